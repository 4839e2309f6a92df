"""Collectives against independent references: numpy for the results (torch.distributed
semantics), textbook send counts for the traffic, NCCL's own tree diagram for the trees."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sim.collectives.params import CollectiveParams
from app.sim.collectives.schedules import (SPLITTING_OPS, SUPPORTED, btree_parents, build,
                                          chunk_bounds, depths, dtree_parents, is_power_of_two,
                                          step_count)
from app.sim.collectives.simulate import make_inputs, reference_outputs, simulate

WORLDS = [2, 3, 4, 5, 7, 8, 13, 16]
CASES = [(alg, op) for alg, ops in SUPPORTED.items() for op in ops]


def params(**kw) -> CollectiveParams:
    return CollectiveParams(**kw)


def counts_for(op: str, world: int) -> list[int]:
    if op in SPLITTING_OPS:
        return [world, 3 * world]
    return [1, world - 1, 2 * world + 3, 37]  # fewer elements than ranks, uneven chunks


def valid_worlds(algorithm: str) -> list[int]:
    return [w for w in WORLDS if algorithm != "halving_doubling" or is_power_of_two(w)]


@pytest.mark.parametrize("algorithm,op", CASES)
def test_results_match_numpy(algorithm, op):
    for world in valid_worlds(algorithm):
        for count in counts_for(op, world):
            for root in {0, world - 1}:
                trace = simulate(params(op=op, algorithm=algorithm, world=world, count=count,
                                        root=root, seed=world * 7 + count))
                expected = reference_outputs(op, trace.inputs, root)
                for got, want in zip(trace.outputs, expected):
                    if want is None:
                        assert got is None
                    else:
                        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("algorithm,op", CASES)
def test_outputs_are_complete_and_sums_hold_every_rank(algorithm, op):
    """Every output element is filled, and a reduced element contains all ranks' inputs."""
    world = 8 if algorithm != "tree" else 7
    count = 2 * world
    trace = simulate(params(op=op, algorithm=algorithm, world=world, count=count))
    everyone = np.uint64(2**world - 1)
    for r, span in enumerate(trace.schedule.layout.outputs):
        if span is None:
            continue
        lo, hi = span
        assert trace.filled[-1, r, lo:hi].all()
        if op in ("all_reduce", "reduce_scatter", "reduce"):
            assert (trace.sources[-1, r, lo:hi] == everyone).all()


@pytest.mark.parametrize("world", [2, 3, 4, 8, 16, 64])
def test_ring_all_reduce_sends_textbook_volume(world):
    """nccl-tests PERFORMANCE.md: ring all-reduce, 2(n−1) steps, 2(n−1)/n · S per rank."""
    count = 2 * world          # 128 at 64 ranks: within MAX_CELLS (2²⁰ numbers)
    trace = simulate(params(op="all_reduce", world=world, count=count))
    assert trace.stats.steps == 2 * (world - 1)
    assert set(trace.stats.elements_sent) == {2 * (world - 1) * count // world}
    assert set(trace.stats.bytes_sent) == {2 * (world - 1) * count // world * 4}


@pytest.mark.parametrize("op,per_rank", [
    ("reduce_scatter", lambda n, c: (n - 1) * c // n),
    ("all_gather", lambda n, c: (n - 1) * c // n),
    ("all_to_all", lambda n, c: (n - 1) * c // 2),  # ring store-and-forward: (n−1)/2 · S
])
@pytest.mark.parametrize("world", [2, 3, 5, 8])
def test_ring_volumes(op, per_rank, world):
    count = 2 * world
    trace = simulate(params(op=op, world=world, count=count))
    assert trace.stats.steps == world - 1
    assert set(trace.stats.elements_sent) == {per_rank(world, count)}


@pytest.mark.parametrize("world", [2, 3, 6, 9])
def test_direct_all_to_all_sends_each_block_once(world):
    count = 3 * world
    trace = simulate(params(op="all_to_all", algorithm="direct", world=world, count=count))
    assert set(trace.stats.elements_sent) == {(world - 1) * count // world}


@pytest.mark.parametrize("world", [2, 4, 8, 32])
def test_halving_doubling_steps_and_volume(world):
    count = 4 * world
    trace = simulate(params(op="all_reduce", algorithm="halving_doubling", world=world,
                            count=count))
    assert trace.stats.steps == 2 * int(np.log2(world))
    assert set(trace.stats.elements_sent) == {2 * (world - 1) * count // world}


@pytest.mark.parametrize("op", ["broadcast", "reduce"])
@pytest.mark.parametrize("world,root", [(2, 0), (5, 3), (8, 7)])
def test_chain_pipelines_send_the_tensor_once_per_hop(op, world, root):
    count = 4 * world
    trace = simulate(params(op=op, world=world, count=count, root=root))
    assert trace.stats.steps == world + world - 2
    sent = trace.stats.elements_sent
    last = (root + world - 1) % world if op == "broadcast" else root
    assert sent[last] == 0
    assert sorted(sent) == [0] + [count] * (world - 1)


def test_nccl_btree_matches_its_diagram():
    """NCCL src/graph/trees.cc draws the 14-rank tree: 0 → 8 → (4, 12) → (2, 6, 10, 13) …"""
    parents = btree_parents(14)
    expected = {8: 0, 4: 8, 12: 8, 2: 4, 6: 4, 10: 12, 13: 12, 1: 2, 3: 2, 5: 6, 7: 6,
                9: 10, 11: 10}
    assert parents[0] == -1
    assert {r: p for r, p in enumerate(parents) if r} == expected


@pytest.mark.parametrize("world", [2, 3, 4, 5, 8, 12, 13, 64])
def test_double_binary_tree_is_two_trees_with_leaves_swapped(world):
    first, second = dtree_parents(world)
    for parents in (first, second):
        assert sorted(parents).count(-1) == 1  # one root
        assert max(depths(parents)) <= int(np.ceil(np.log2(world))) + 1
    # NCCL's roots: 0, and n−1 (even n, mirror) or 1 (odd n, shift)
    assert first.index(-1) == 0
    assert second.index(-1) == (world - 1 if world % 2 == 0 else 1)
    if world % 2 == 0:
        # the mirror: an interior rank of one tree is a leaf of the other
        interior = [{p for p in parents if p >= 0} for parents in (first, second)]
        assert not (interior[0] & interior[1])


@pytest.mark.parametrize("world", [2, 3, 7, 8, 16])
def test_tree_traffic_counted_from_the_trees(world):
    """Each non-root sends its half up once; each parent sends the half to each child."""
    count = 4 * world
    trace = simulate(params(op="all_reduce", algorithm="tree", world=world, count=count))
    spans = [count // 2, count - count // 2]
    expected = np.zeros(world, dtype=int)
    for parents, length in zip(dtree_parents(world), spans):
        for r, p in enumerate(parents):
            if p >= 0:
                expected[r] += length     # reduce: up to the parent
                expected[p] += length     # broadcast: down to the child
    assert list(trace.stats.elements_sent) == expected.tolist()
    assert trace.stats.steps == 2 * max(max(depths(p)) for p in dtree_parents(world))


@pytest.mark.parametrize("algorithm,op", CASES)
def test_step_count_predicts_build(algorithm, op):
    for world in valid_worlds(algorithm):
        for count in counts_for(op, world):
            assert len(build(op, algorithm, world, count).steps) == \
                step_count(op, algorithm, world, count)


@pytest.mark.parametrize("count,parts", [(8, 4), (10, 4), (3, 5), (0, 2), (65536, 7)])
def test_chunk_bounds_cut_like_numpy(count, parts):
    bounds = chunk_bounds(count, parts)
    pieces = np.array_split(np.arange(count), parts)
    assert [len(p) for p in pieces] == np.diff(bounds).tolist()


def test_inputs_are_seeded_small_integers():
    a = make_inputs("all_reduce", 4, 8, seed=3)
    b = make_inputs("all_reduce", 4, 8, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert all(((x >= 1) & (x <= 9)).all() for x in a)
    assert len(make_inputs("all_gather", 4, 8, seed=3)[0]) == 2


def test_frames_hold_what_the_contract_needs():
    trace = simulate(params(op="all_reduce", world=4, count=8))
    assert len(trace.frames) == trace.stats.steps + 1
    assert trace.frames[0].step == 0 and not trace.frames[0].transfers
    first = trace.frames[1]
    assert {(t.src, t.dst) for t in first.transfers} == {(0, 1), (1, 2), (2, 3), (3, 0)}
    assert all(t.elements == 2 and t.reduce for t in first.transfers)
    # captions teach with numbers: the step, the phase and a worked example
    assert first.caption.startswith("Communication step 1 of 6 · reduce-scatter")
    assert "Rank 0 → rank 1" in first.caption and "giving" in first.caption


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_valid_collective_is_correct(data):
    algorithm, op = data.draw(st.sampled_from(CASES))
    world = data.draw(st.integers(2, 24))
    if algorithm == "halving_doubling":
        world = 2 ** data.draw(st.integers(1, 4))
    per = data.draw(st.integers(1, 6))
    count = world * per if op in SPLITTING_OPS else data.draw(st.integers(1, 60))
    root = data.draw(st.integers(0, world - 1))
    seed = data.draw(st.integers(0, 2**31 - 1))
    trace = simulate(params(op=op, algorithm=algorithm, world=world, count=count, root=root,
                            seed=seed))
    for got, want in zip(trace.outputs, reference_outputs(op, trace.inputs, root)):
        assert (got is None) == (want is None)
        if want is not None:
            np.testing.assert_array_equal(got, want)
    # every element sent is received: traffic is conserved in every step
    for step in trace.schedule.steps:
        sent = sum(m.length for m in step.moves if not m.local)
        assert sent == sum(t.elements for t in trace.frames[step_index(trace, step)].transfers)


def step_index(trace, step) -> int:
    return trace.schedule.steps.index(step) + 1


@pytest.mark.parametrize("algorithm,op", CASES)
@pytest.mark.parametrize("world", [2, 5, 8, 16, 33, 64])
def test_a_step_at_once_is_the_moves_one_by_one(algorithm, op, world):
    """execute's flat-index steps (_apply_step) against the plain per-move loop, bit for bit,
    on integers and on floats (where the order of two additions into one element shows)."""
    from app.sim.collectives import simulate as sim
    if algorithm == "halving_doubling" and not is_power_of_two(world):
        return
    count = 3 * world if op in SPLITTING_OPS else 2 * world + 3
    schedule = build(op, algorithm, world, count, world - 1)
    ints = make_inputs(op, world, count, 7)
    rng = np.random.default_rng(world)
    floats = tuple(rng.standard_normal(len(x)) * 10.0 ** rng.integers(-8, 8, len(x)) for x in ints)
    for inputs in (ints, floats):
        fast = sim.execute(schedule, inputs)
        n, length = world, schedule.layout.buffer_len
        states = [np.array(a[0]) for a in fast]
        for k, step in enumerate(schedule.steps):
            new = [s.copy() for s in states]
            sim._apply_moves(step.moves, states, new)
            for a, b in zip(fast, new):
                np.testing.assert_array_equal(a[k + 1], b, strict=True)
            states = new
        assert fast[0].shape == (len(schedule.steps) + 1, n, length)
