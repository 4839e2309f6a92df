"""Published training runs the planner must reproduce (REFERENCES.md, "Real-world
configurations") and PTD-P's Table 1 sweep as a wider check.

* Llama 3 405B (Meta 2024, Table 4), H100 80 GB, 16M tokens a step: 8,192 GPUs TP 8 CP 1 PP 16
  DP 64 seq 8,192 → 430 TFLOP/s, 43 % MFU; 16,384 GPUs DP 128 → 400, 41 %; 16,384 GPUs TP 8
  CP 16 PP 16 DP 8 seq 131,072 → 380, 38 %.
* PTD-P (Narayanan et al. 2021, Table 1), A100 80 GB, seq 2,048, vocab 51,200, full
  recomputation: 1,008B (160 heads, hidden 25,600, 128 layers) on 3,072 GPUs TP 8 PP 64,
  batch 3,072 → 163 TFLOP/s per GPU (executed FLOPs).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Run:
    name: str
    source: str
    query: dict            # PlannerParams fields (the published mix pinned)
    published_tflops: float
    published_mfu: float | None
    mix: dict              # tp, pp, cp, dp as published


LLAMA = {"preset": "llama3-405b", "gpu": "h100-80", "gpus_per_node": 8,
         "intra_node_gbs": 450.0, "inter_node_gbs": 50.0}
PTDP = {"preset": "gpt3-175b", "layers": 128, "hidden": 25600, "heads": 160, "vocab": 51200,
        "seq": 2048, "gpu": "a100-80", "gpus_per_node": 8, "intra_node_gbs": 300.0,
        "inter_node_gbs": 25.0, "recompute": "full", "attention": "materialized"}

RUNS: tuple[Run, ...] = (
    Run("Llama 3 405B, 8,192 H100", "Meta 2024, Table 4",
        {**LLAMA, "gpus": 8192, "global_batch": 2048, "seq": 8192},
        430, 0.43, {"tp": 8, "pp": 16, "cp": 1, "dp": 64}),
    Run("Llama 3 405B, 16,384 H100", "Meta 2024, Table 4",
        {**LLAMA, "gpus": 16384, "global_batch": 2048, "seq": 8192},
        400, 0.41, {"tp": 8, "pp": 16, "cp": 1, "dp": 128}),
    Run("Llama 3 405B, 131k context, 16,384 H100", "Meta 2024, Table 4",
        {**LLAMA, "gpus": 16384, "global_batch": 128, "seq": 131072},
        380, 0.38, {"tp": 8, "pp": 16, "cp": 16, "dp": 8}),
    Run("PTD-P 1T, 3,072 A100", "Narayanan et al. 2021, Table 1",
        {**PTDP, "gpus": 3072, "global_batch": 3072}, 163, None,
        {"tp": 8, "pp": 64, "cp": 1, "dp": 6}),
)

PTDP_TABLE1 = (
    # name, heads, hidden, layers, tp, pp, gpus, batch, TFLOP/s per GPU
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137), ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138),
    ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142), ("18B", 48, 6144, 40, 8, 1, 256, 1024, 135),
    ("39B", 64, 8192, 48, 8, 2, 512, 1536, 138), ("76B", 80, 10240, 60, 8, 4, 1024, 1792, 140),
    ("145B", 96, 12288, 80, 8, 8, 1536, 2304, 148),
    ("310B", 128, 16384, 96, 8, 16, 1920, 2160, 155),
    ("530B", 128, 20480, 105, 8, 35, 2520, 2520, 163),
)
"""Narayanan et al. 2021, Table 1 (A100, full recomputation), beyond REFERENCES.md's 1T row."""


def ptdp_row_query(row) -> dict:
    name, a, h, l, t, p, n, batch, _ = row
    return {**PTDP, "layers": l, "hidden": h, "heads": a, "gpus": n, "global_batch": batch}
