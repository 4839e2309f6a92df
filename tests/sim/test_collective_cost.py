"""The α–β model and bus bandwidth against nccl-tests' definitions (doc/PERFORMANCE.md)."""

from __future__ import annotations

import pytest

from app.sim.collectives.params import CollectiveParams
from app.sim.collectives import cost
from app.sim.collectives.schedules import build
from app.sim.collectives.simulate import simulate

MIB = 2**20


@pytest.mark.parametrize("op,n,factor", [
    ("all_reduce", 8, 2 * 7 / 8), ("all_reduce", 2, 1.0), ("reduce_scatter", 4, 3 / 4),
    ("all_gather", 16, 15 / 16), ("all_to_all", 8, 7 / 8), ("broadcast", 8, 1.0),
    ("reduce", 5, 1.0),
])
def test_busbw_factors_are_nccl_tests(op, n, factor):
    assert cost.busbw_factor(op, n) == pytest.approx(factor)


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather"])
@pytest.mark.parametrize("world", [2, 4, 8])
def test_ring_busbw_equals_link_bandwidth_without_latency(op, world):
    """The point of busbw: for the ring with α = 0 it equals the link speed, whatever n."""
    links = cost.Links(alpha_us=0, intra_node_gbs=300, inter_node_gbs=50, gpus_per_node=8)
    costs = cost.step_costs(build(op, "ring", world, 8 * world), links)
    size = 256 * MIB
    t = cost.time_us(costs, 0, size)
    _, busbw = cost.bandwidths(op, world, size, t)
    assert busbw == pytest.approx(300)


def test_ring_across_nodes_runs_at_the_slowest_link():
    links = cost.Links(alpha_us=0, intra_node_gbs=300, inter_node_gbs=50, gpus_per_node=8)
    costs = cost.step_costs(build("all_reduce", "ring", 16, 64), links)
    t = cost.time_us(costs, 0, 1e9)
    _, busbw = cost.bandwidths("all_reduce", 16, 1e9, t)
    assert busbw == pytest.approx(50)


@pytest.mark.parametrize("world", [2, 4, 8])
def test_ring_all_reduce_time_is_the_textbook_formula(world):
    """t = 2(n−1)·α + 2(n−1)/n · S/β."""
    alpha, gbs, size = 7.0, 200.0, 64 * MIB
    links = cost.Links(alpha, gbs, gbs, 8)
    t = cost.time_us(cost.step_costs(build("all_reduce", "ring", world, 4 * world), links),
                     alpha, size)
    n = world
    assert t == pytest.approx(2 * (n - 1) * alpha + 2 * (n - 1) / n * size / (gbs * 1e3))


def test_tree_wins_small_messages_and_ring_wins_large_ones():
    p = CollectiveParams(op="all_reduce", world=64, count=128, gpus_per_node=8)
    trace = simulate(p)
    by = {c.algorithm: c for c in trace.cost.curves}
    assert set(by) == {"ring", "tree", "halving_doubling"}
    assert by["tree"].times_us[0] < by["ring"].times_us[0]      # 1 KiB: latency-bound
    assert by["ring"].times_us[-1] < by["tree"].times_us[-1]    # 16 GiB: bandwidth-bound
    crossover = trace.cost.crossover_bytes
    assert crossover is not None and 1024 < crossover < 2**34


def test_halving_doubling_is_only_offered_for_powers_of_two():
    assert "halving_doubling" not in cost.algorithms_for("all_reduce", 6)
    assert cost.algorithms_for("all_gather", 8) == ("ring",)
    assert cost.algorithms_for("all_to_all", 5) == ("ring", "direct")


def test_latency_part_is_steps_times_alpha_for_the_ring():
    trace = simulate(CollectiveParams(op="all_reduce", world=8, count=16, alpha_us=5))
    assert trace.cost.latency_us == pytest.approx(14 * 5)
    assert trace.cost.time_us > trace.cost.latency_us


@pytest.mark.parametrize("op", cost.RING_PASS_OPS)
@pytest.mark.parametrize("gpus_per_node", [1, 3, 8])
def test_ring_pass_costs_are_the_built_schedules_to_the_last_bit(op, gpus_per_node):
    """The cost panel's closed form against step_costs on the schedule it stands for, built
    move by move, for every world the slider reaches (sampled: every fifth, and the ends)."""
    links = cost.Links(alpha_us=5, intra_node_gbs=300, inter_node_gbs=25,
                       gpus_per_node=gpus_per_node)
    for world in [1, 2, 3, *range(4, 65, 5), 64]:
        built = cost.step_costs(build(op, "ring", world, 2 * world), links)
        closed = cost.ring_pass_costs(op, world, links)
        assert closed.messages.shape == built.messages.shape
        assert closed.messages.tobytes() == built.messages.tobytes()
        assert closed.us_per_byte.tobytes() == built.us_per_byte.tobytes()
