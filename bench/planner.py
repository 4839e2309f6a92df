"""Bench row: the planner's cold search of every mix for 16,384 GPUs (DESIGN budget < 1 s).

    PYTHONPATH=. python -m bench.planner        prints one Markdown row, as bench/run.py's table
"""

from __future__ import annotations

import time

from app.sim.planner.params import PlannerParams
from app.sim.planner.simulate import PlannerTrace, simulate

BUDGET_S = 1.0
QUERY = {"preset": "llama3-405b", "gpus": 16384, "gpu": "h100-80", "global_batch": 2048,
         "seq": 8192}


def measure(repeats: int = 3) -> dict:
    times = []
    for _ in range(repeats):
        p = PlannerParams(**QUERY)
        start = time.perf_counter()
        trace: PlannerTrace = simulate(p)          # simulate is not cached: a cold search
        times.append(time.perf_counter() - start)
    return {"searched": trace.plan.searched, "best_s": min(times), "worst_s": max(times)}


def row(m: dict) -> str:
    ok = "✅" if m["worst_s"] < BUDGET_S else "❌"
    return (f"| planner, every mix for 16,384 GPUs (llama3-405b, {m['searched']:,} mixes), cold, "
            f"best / worst of 3 | < {BUDGET_S:.0f} s | {m['best_s']:.2f} / {m['worst_s']:.2f} s "
            f"{ok} |")


if __name__ == "__main__":
    print(row(measure()))
