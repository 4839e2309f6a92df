"""The layouts the exactness proof trains (tests/workers/test_train_exact.py in one 8-rank launch,
bench/train.py for 1 to 20 steps): each parallelism alone, pairs, and 3-to-5-D mixes — MoE with
EP among them, and CP with TP and PP —, then MoE layouts with the load-balancing loss on, on a
model small enough to train in seconds. Each row is
a dict of /train's parameters over MODEL (and 2 steps, 2 micro-batches unless it says)."""

from __future__ import annotations

MODEL = {"layers": 4, "hidden": 16, "heads": 4, "kv_heads": 2, "ffn": 32, "vocab": 32, "seq": 16,
         "experts": 4, "top_k": 2}
DENSE = {"experts": 1, "top_k": 1}
ONE = {"tp": 1, "cp": 1, "pp": 1, "dp": 1, "ep": 1}
AUX = {"aux_loss_coeff": 0.1}

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
    # the MoE layers' load-balancing loss on: its counts are summed over cp (the ranks that
    # share a micro-batch's tokens), never over dp or ep (other micro-batches)
    ("moe aux dp ep", {**ONE, "dp": 2, "ep": 2, **AUX}),
    ("moe aux tp sp cp dp ep zero1", {**ONE, "tp": 2, "cp": 2, "dp": 2, "ep": 2,
                                      "sequence_parallel": True, "zero": 1, **AUX}),
    ("moe aux cp pp dp ep4 recompute", {**ONE, "cp": 2, "pp": 2, "dp": 2, "ep": 4,
                                        "recompute": "full", **AUX}),
]
FLOAT32 = ("float32 tp pp dp", {**ONE, "tp": 2, "pp": 2, "dp": 2, "dtype": "float32"})
"""float32 reports its difference beside float64's exactness."""


def rows(steps: int | None = None) -> list[dict]:
    """Every layout as a full row of /train's parameters (``steps`` for all, if given)."""
    return [{**MODEL, "steps": 2, "microbatches": 2, **row, **({"steps": steps} if steps else {})}
            for _, row in TABLE + [FLOAT32]]


