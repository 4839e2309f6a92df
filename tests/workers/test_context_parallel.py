"""workers/context_parallel.py on real gloo ranks, 2 and 4 processes, one launch each (--suite):
ring attention with contiguous and zigzag blocks (causal and not), the all-gather of K/V,
Ulysses' all-to-alls, and on 4 ranks the hybrid — every rank's output rows equal the
simulation's and torch's scaled_dot_product_attention to 1e-9, the elements each rank sent
(counted at its send calls) equal the formulas, and the ring skips the blocks the simulation
skips; then doctored reports that the check must reject."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

pytest.importorskip("torch")

from app.sim.context_parallel.params import STAGE_FIELDS, ContextParallelParams  # noqa: E402
from app.sim.context_parallel.simulate import simulate  # noqa: E402
from app.scenes.context_parallel.check import CHECK, compare, worker_argv  # noqa: E402
from tests.workers.launch import torchrun  # noqa: E402

SIZES = {"example_seq": 16, "heads": 8, "kv_heads": 4, "head_dim": 4, "seed": 11}


def params_of(entry: dict, world: int) -> ContextParallelParams:
    return ContextParallelParams(cp=world, **{k: entry[k] for k in STAGE_FIELDS})


@pytest.fixture(scope="module", params=[2, 4], ids=["2-ranks", "4-ranks"])
def suite(request, tmp_path_factory):
    world = request.param
    args = [f"--{k.replace('_', '-')}={v}" for k, v in SIZES.items()]
    out: Path = tmp_path_factory.mktemp("cp") / "report.json"
    report, _ = torchrun("workers/context_parallel.py", world, ["--suite", *args], out, 180)
    return world, report


@pytest.mark.workers
def test_every_method_matches_the_simulation_and_torch(suite):
    world, report = suite
    assert report["backend"] == "gloo" and report["world"] == world
    ran = {(e["method"], e["balance"], e["causal"]) for e in report["suite"]}
    assert {("ring", "none", True), ("ring", "zigzag", True), ("ring", "none", False),
            ("all_gather", "zigzag", True), ("ulysses", "none", True)} <= ran
    assert (("hybrid", "zigzag", True) in ran) == (world == 4)
    for entry in report["suite"]:
        p = params_of(entry, world)
        trace = simulate(p)
        verdict = compare(p, trace, entry)
        assert verdict.passed, (entry["method"], entry["balance"], verdict.detail)
        assert verdict.max_abs_diff < 1e-12                      # float64 on every side
        for r, rank in enumerate(entry["ranks"]):
            assert rank["elements_sent"] == trace.ranks[r].elements_sent
            assert rank["elements_sent"] == sum(c["elements"] for c in rank["calls"])


@pytest.mark.workers
def test_the_ring_sends_one_block_per_step_and_skips_above_the_diagonal(suite):
    world, report = suite
    entry = next(e for e in report["suite"] if e["method"] == "ring" and e["balance"] == "none"
                 and e["causal"])
    block = 2 * (SIZES["example_seq"] // world) * SIZES["kv_heads"] * SIZES["head_dim"]
    for r, rank in enumerate(entry["ranks"]):
        assert rank["calls"] == [{"op": "isend", "elements": block}] * (world - 1)
        assert rank["computed_steps"] == list(range(r + 1))       # blocks of later ranks skipped
    zigzag = next(e for e in report["suite"] if e["method"] == "ring" and e["balance"] == "zigzag")
    assert all(rank["computed_steps"] == list(range(world)) for rank in zigzag["ranks"])
    ulysses = next(e for e in report["suite"] if e["method"] == "ulysses")
    assert [c["op"] for c in ulysses["ranks"][0]["calls"]] == ["all_to_all_single"] * 4


@pytest.mark.workers
def test_the_check_rejects_a_wrong_number_a_wrong_count_or_a_missed_skip(suite):
    world, report = suite
    entry = next(e for e in report["suite"] if e["method"] == "ring" and e["balance"] == "none"
                 and e["causal"])
    p = params_of(entry, world)
    trace = simulate(p)
    assert compare(p, trace, entry).passed
    wrong = copy.deepcopy(entry)
    wrong["ranks"][world - 1]["output"][0][0][0] += 1e-6
    verdict = compare(p, trace, wrong)
    assert not verdict.passed and verdict.max_abs_diff == pytest.approx(1e-6, rel=0.01)
    counted = copy.deepcopy(entry)
    counted["ranks"][0]["elements_sent"] += 1
    verdict = compare(p, trace, counted)
    assert not verdict.passed and "rank 0 sent" in verdict.detail
    unskipped = copy.deepcopy(entry)
    unskipped["ranks"][0]["computed_steps"] = list(range(world))
    verdict = compare(p, trace, unskipped)
    assert not verdict.passed and "skipped" in verdict.detail
    torch_off = copy.deepcopy(entry)
    torch_off["reference"][3][1][2] += 1e-6
    assert not compare(p, trace, torch_off).passed
    assert CHECK.world(p) == world and CHECK.args(p) == worker_argv(p)
    argv = worker_argv(params_of({**entry, "causal": False}, world))
    assert argv[argv.index("--causal") + 1] == "false"
