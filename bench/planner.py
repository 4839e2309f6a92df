"""Bench row: the planner's cold search of every mix for 16,384 GPUs (DESIGN budget < 1 s).

    PYTHONPATH=. python -m bench.planner        prints one Markdown row, as bench/run.py's table
"""

from __future__ import annotations

import time

from app.sim.planner.params import PlannerParams
from app.sim.planner.simulate import PlannerTrace, simulate

BUDGET_S = 1.0
QUERY = {"gpus": 16384, "gpu": "h100-80", "global_batch": 2048, "seq": 8192}
PRESETS = ("llama3-405b", "deepseek-v3")
"""The dense model of the published runs, and the preset with the most mixes (an MoE: every ep
that divides its 256 experts multiplies the grid)."""


def measure(repeats: int = 3) -> dict:
    out = {}
    for preset in PRESETS:
        times = []
        for _ in range(repeats):
            p = PlannerParams(preset=preset, **QUERY)
            start = time.perf_counter()
            trace: PlannerTrace = simulate(p)          # simulate is not cached: a cold search
            times.append(time.perf_counter() - start)
        out[preset] = {"searched": trace.plan.searched, "best_s": min(times),
                       "worst_s": max(times)}
    return out


def rows(m: dict) -> list[str]:
    return [f"| planner, every mix for 16,384 GPUs ({preset}, {r['searched']:,} mixes), cold, "
            f"best / worst of 3 | < {BUDGET_S:.0f} s | {r['best_s']:.2f} / {r['worst_s']:.2f} s "
            f"{'✓' if r['worst_s'] < BUDGET_S else '✗ over budget'} |" for preset, r in m.items()]


if __name__ == "__main__":
    print("\n".join(rows(measure())))
