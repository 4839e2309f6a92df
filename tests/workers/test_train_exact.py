"""The exactness proof of the training framework on real gloo ranks: every layout of the table —
each parallelism alone, pairs, and 3-to-5-D mixes (MoE + EP, CP + TP + PP …) — trains the same
model, data and seed as one process (tests/workers/test_train_reference.py holds that process
to plain PyTorch), and in float64 every step's loss and every final tensor, gathered back to
full size, agree to ≤ 1e-9 relative; replicas of a tensor stay identical. MoE layouts with the
load-balancing loss on (the last rows) also match the one process's aux loss to ≤ 1e-9: a
count summed over the wrong group (none, or ep) fails them. A float32 run reports its
difference.

One torchrun launch of 8 ranks runs the whole table (``--suite``): layout k on ranks
0 … world_k − 1, the others waiting (torchrun's start costs seconds on two cores). The full
table of layouts × 1–20 steps is ``make bench`` (bench/train.py)."""

from __future__ import annotations

import json

import pytest

from app.scenes.train.check import TOLERANCE
from app.sim.train.proof import FLOAT32, TABLE, rows
from tests.workers.launch import torchrun

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.workers

@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    folder = tmp_path_factory.mktemp("train")
    table = folder / "table.json"
    table.write_text(json.dumps(rows()))
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
    assert result["max_rel_aux_loss_diff"] <= TOLERANCE["float64"], result["aux_losses"]
    on = result["config"].get("aux_loss_coeff", 0) > 0
    assert all(a > 0 if on else a == 0 for a in result["aux_losses"]), result["aux_losses"]


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
    aux = [active(r) for _, r in TABLE if r.get("aux_loss_coeff", 0) > 0]
    assert any({"ep", "dp"} <= m and "cp" not in m for m in aux)  # counts not summed over ep
    assert any({"ep", "dp", "cp"} <= m for m in aux)           # … but over cp


def test_float32_reports_its_difference(suite):
    result = suite[FLOAT32[0]]
    assert 0 < result["max_rel_param_diff"] <= TOLERANCE["float32"]
    assert result["max_rel_loss_diff"] <= TOLERANCE["float32"]
