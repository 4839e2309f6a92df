"""Bench rows of /train's real run (DESIGN.md: a 4-rank run of 5 steps ≤ 10 s warm and ≤ 30 s
cold, 8 ranks ≤ 60 s cold), its measured step against the cost model, and the exactness proof
over the whole table of layouts for 1 to 20 steps.

    PYTHONPATH=. python -m bench.train [--quick]     prints the Markdown rows

bench/run.py calls :func:`measure` on its running server: the first 4-rank job is cold (the
rank pool starts its processes), the next one — once the pool has refilled — warm, and the
first 8-rank job cold again (the pool keeps ranks per world size). :func:`proof` launches
workers/train/train.py's ``--suite`` with the table of app/sim/train/proof.py, once per number
of steps.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import urllib.request
from pathlib import Path

BUDGETS = {"cold4_s": 30, "warm4_s": 10, "cold8_s": 60}
FOUR = "tp=2&cp=1&pp=2&dp=1&ep=1&experts=4&steps=5"
EIGHT = "tp=2&cp=1&pp=2&dp=2&ep=2&experts=4&steps=5"


def job(base: str, query: str) -> dict:
    """POST a real run and poll it to its end: (seconds, the job's status)."""
    began = time.perf_counter()
    request = urllib.request.Request(f"{base}/api/verify/train?{query}", method="POST")
    ident = json.loads(urllib.request.urlopen(request, timeout=30).read())["job"]
    while True:
        body = json.loads(urllib.request.urlopen(f"{base}/api/verify/jobs/{ident}").read())
        if body["status"] in ("passed", "failed", "error"):
            return {"seconds": time.perf_counter() - began, **body}
        time.sleep(0.1)


def _keep(body: dict) -> dict:
    keys = ("seconds", "status", "detail", "measured", "predicted", "predicted_page",
            "predicted_gpu", "calibration", "measured_over_predicted", "max_rel_loss_diff",
            "max_rel_param_diff")
    return {k: body.get(k) for k in keys}


def measure(base: str) -> dict:
    cold = job(base, FOUR)
    time.sleep(float(os.environ.get("BENCH_POOL_REFILL_S", "20")))   # the refill imports torch
    warm = job(base, FOUR)
    eight = job(base, EIGHT)
    return {"cold4": _keep(cold), "warm4": _keep(warm), "cold8": _keep(eight),
            "load": os.getloadavg()}


def proof(steps: tuple[int, ...] = (1, 5, 20)) -> dict:
    """The table of layouts, trained for each number of steps in one 8-rank launch each."""
    from app.sim.train.proof import FLOAT32, TABLE, rows
    from tests.workers.launch import torchrun
    names = [name for name, _ in TABLE + [FLOAT32]]
    out = {}
    with tempfile.TemporaryDirectory() as folder:
        for n in steps:
            table = Path(folder) / f"table-{n}.json"
            table.write_text(json.dumps(rows(n)))
            began = time.perf_counter()
            report, _ = torchrun("workers/train/train.py", 8, ["--suite", str(table)],
                                 Path(folder) / f"report-{n}.json", timeout=3600)
            out[n] = {"seconds": time.perf_counter() - began,
                      "layouts": {name: {"loss": r["max_rel_loss_diff"],
                                         "params": r["max_rel_param_diff"]}
                                  for name, r in zip(names, report["suite"])}}
    return out


def rows(m: dict, mark) -> list[str]:
    out = []
    for key, what, budget in (("cold4", "4 ranks, 5 steps, cold", "cold4_s"),
                              ("warm4", "4 ranks, 5 steps, warm (the pool refilled)", "warm4_s"),
                              ("cold8", "8 ranks, 5 steps, cold", "cold8_s")):
        r = m.get(key)
        if not r:
            continue
        ok = r["status"] == "passed" and r["seconds"] <= BUDGETS[budget]
        out.append(f"| `/train` real run, {what}, POST to verdict | ≤ {BUDGETS[budget]} s | "
                   f"{r['seconds']:.1f} s ({r['status']}) {mark(ok)} |")
    for key in ("warm4", "cold8"):
        r = m.get(key) or {}
        if r.get("measured") and r.get("predicted"):
            out.append(f"| `/train` {key[-1]} ranks: measured step / cost model with the run's "
                       f"calibration | — | {r['measured']['step_s'] * 1e3:.0f} / "
                       f"{r['predicted']['step_s'] * 1e3:.0f} ms = "
                       f"{r['measured_over_predicted']:.2f}× |")
    for n, r in (m.get("proof") or {}).items():
        worst = max(max(v["loss"], v["params"]) for name, v in r["layouts"].items()
                    if not name.startswith("float32"))
        out.append(f"| exactness proof, {len(r['layouts'])} layouts × {n} step"
                   f"{'s' if int(n) > 1 else ''} (one 8-rank launch), largest relative "
                   f"difference in float64 | ≤ 1e-9 | {worst:.1e} in {r['seconds']:.0f} s "
                   f"{mark(worst <= 1e-9)} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the proof for 1 and 5 steps only")
    args = parser.parse_args()
    from bench.servers import serve
    with serve("app.main:create_app", "--factory") as base:
        results = measure(base)
    results["proof"] = proof((1, 5) if args.quick else (1, 5, 20))
    print("\n".join(rows(results, lambda ok: "✓" if ok else "✗ over budget")))
    print(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
