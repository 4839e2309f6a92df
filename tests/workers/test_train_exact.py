"""The exactness proof of the training framework on real gloo ranks: every layout of the table —
each parallelism alone, pairs, and 3-to-5-D mixes (MoE + EP, CP + TP + PP …) — trains the same
model, data and seed as one process (tests/workers/test_train_reference.py holds that process
to plain PyTorch), and in float64 every step's loss and every final tensor, gathered back to
full size, agree to ≤ 1e-9 relative; replicas of a tensor stay identical. A float32 run reports
its difference.

One torchrun launch of 8 ranks runs the whole table (``--suite``): layout k on ranks
0 … world_k − 1, the others waiting (torchrun's start costs seconds on two cores). The full
table of layouts × 1–20 steps is ``make bench`` (bench/train.py)."""

from __future__ import annotations

import json

import pytest

from app.scenes.train.check import TOLERANCE
from tests.workers.launch import torchrun

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.workers

MODEL = {"layers": 4, "hidden": 16, "heads": 4, "kv_heads": 2, "ffn": 32, "vocab": 32, "seq": 16,
         "experts": 4, "top_k": 2}
DENSE = {"experts": 1, "top_k": 1}
ONE = {"tp": 1, "cp": 1, "pp": 1, "dp": 1, "ep": 1}

TABLE = [
    # each parallelism alone
    ("tp", {**ONE, "tp": 2, "steps": 1}),
    ("tp+sp", {**ONE, "tp": 2, "sequence_parallel": True, "steps": 1}),
    ("cp", {**ONE, "cp": 2, "steps": 1}),
    ("pp gpipe", {**ONE, "pp": 2, "schedule": "gpipe", "microbatches": 4, "steps": 1}),
    ("pp4 1f1b", {**ONE, "pp": 4, "microbatches": 4, "steps": 1}),
    ("dp", {**ONE, "dp": 2, "steps": 1}),
    ("dp zero1", {**ONE, "dp": 2, "zero": 1, "steps": 1}),
    ("ep", {**ONE, "dp": 2, "ep": 2, "steps": 1}),
    # pairs
    ("tp pp", {**ONE, "tp": 2, "pp": 2, "microbatches": 4, **DENSE}),
    ("cp pp recompute", {**ONE, "cp": 2, "pp": 2, "recompute": "full", **DENSE}),
    ("tp dp zero1", {**ONE, "tp": 2, "dp": 2, "zero": 1}),
    ("cp ep", {**ONE, "cp": 2, "ep": 2}),
    ("tp cp selective", {**ONE, "tp": 2, "cp": 2, "recompute": "selective", **DENSE}),
    # 3-to-5-D mixes
    ("cp tp pp sp", {**ONE, "tp": 2, "cp": 2, "pp": 2, "sequence_parallel": True, **DENSE}),
    ("moe tp pp dp ep zero1", {**ONE, "tp": 2, "pp": 2, "dp": 2, "ep": 2, "zero": 1}),
    ("moe tp cp pp ep", {**ONE, "tp": 2, "cp": 2, "pp": 2, "ep": 2, "steps": 3}),
    ("moe cp pp dp ep4 gpipe", {**ONE, "cp": 2, "pp": 2, "dp": 2, "ep": 4,
                                "schedule": "gpipe"}),
    ("moe tp dp4 ep4 order", {**ONE, "tp": 2, "dp": 4, "ep": 4, "zero": 1,
                              "order": "tp-dp-cp-ep-pp", "microbatches": 2}),
]
FLOAT32 = ("float32 tp pp dp", {**ONE, "tp": 2, "pp": 2, "dp": 2, "dtype": "float32"})


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    folder = tmp_path_factory.mktemp("train")
    table = folder / "table.json"
    table.write_text(json.dumps([{**MODEL, "steps": 2, "microbatches": 2, **row}
                                 for _, row in TABLE + [FLOAT32]]))
    report, _ = torchrun("workers/train/train.py", 8, ["--suite", str(table)],
                         folder / "report.json", timeout=600)
    return {name: result for (name, _), result in zip(TABLE + [FLOAT32], report["suite"])}


@pytest.mark.parametrize("name", [name for name, _ in TABLE])
def test_every_layout_trains_exactly_as_one_process(suite, name):
    result = suite[name]
    assert result["max_rel_loss_diff"] <= TOLERANCE["float64"], result["losses"]
    assert result["max_rel_param_diff"] <= TOLERANCE["float64"], max(
        result["tensors"], key=lambda t: t["max_abs_diff"] / t["max_abs"])
    assert result["replica_spread"] == 0.0
    assert len(result["losses"]) == result["config"]["steps"]
    assert all(a > 0 for a in result["losses"])


def test_the_table_covers_every_parallelism_pairs_and_mixes():
    def active(row):
        return {k for k in ("tp", "cp", "pp", "dp", "ep") if row.get(k, 1) > 1} | \
               ({"zero1"} if row.get("zero") else set())
    alone = {frozenset(active(r)) for _, r in TABLE if len(active(r)) == 1}
    assert {frozenset({k}) for k in ("tp", "cp", "pp", "dp")} <= alone
    assert any(active(r) >= {"ep"} and len(active(r) - {"dp"}) == 1 for _, r in TABLE)
    mixes = [active(r) for _, r in TABLE if len(active(r) - {"zero1"}) >= 3]
    assert len(mixes) >= 4
    assert any({"ep", "tp", "pp"} <= m for m in mixes)          # MoE + EP in a mix
    assert any({"cp", "tp", "pp"} <= m for m in mixes)          # CP + TP + PP


def test_float32_reports_its_difference(suite):
    result = suite[FLOAT32[0]]
    assert 0 < result["max_rel_param_diff"] <= TOLERANCE["float32"]
    assert result["max_rel_loss_diff"] <= TOLERANCE["float32"]
