"""Bench rows of the exercises (DESIGN budgets): one client's p99 of ``GET /api/exercises/<id>``
(≤ 10 ms) for the canonical problems, a check (``POST …/check``), and an 8-problem sheet PDF
(< 3 s), every sheet cold (a seed not asked before).

    PYTHONPATH=. python -m bench.exercises [URL]   prints the Markdown rows (starts a server
                                                   when no URL is given)
"""

from __future__ import annotations

import http.client
import json
import sys
import time
from urllib.parse import urlsplit

from bench.http_load import latency_ms

API_P99_MS = 10
SHEET_S = 3.0
IDS = ("zero-model-states", "ring-allreduce-time", "pipeline-bubble", "moe-capacity",
       "activation-memory", "layout-rank-coords")


def sheet_s(base: str, chapter: int, seed: int, key: bool = False) -> float:
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    t0 = time.perf_counter()
    conn.request("GET", f"/exercises/{chapter}/{'key' if key else 'sheet'}.pdf?seed={seed}&n=8")
    response = conn.getresponse()
    body = response.read()
    if response.status != 200 or not body.startswith(b"%PDF"):
        raise RuntimeError(f"sheet of chapter {chapter} answered {response.status}")
    return time.perf_counter() - t0


def measure(base: str, quick: bool = False) -> dict:
    requests = 300 if quick else 1000
    out = {"api": {}, "sheets": {}}
    for i, id_ in enumerate(IDS):
        out["api"][id_] = latency_ms(f"{base}/api/exercises/{id_}?seed={7 + i}", requests)
    out["check"] = latency_ms(f"{base}/api/exercises/pipeline-bubble/check?seed=3",
                              requests // 3, 20, "POST", json.dumps({"answer": "0.5"}).encode(),
                              {"content-type": "application/json"})
    seed = int(time.time()) % 100000 + 1000           # cold: not asked before
    for chapter in range(1, 12):
        out["sheets"][chapter] = {"sheet_s": sheet_s(base, chapter, seed),
                                  "key_s": sheet_s(base, chapter, seed, key=True)}
    return out


def rows(m: dict, mark=lambda ok: "✓" if ok else "✗ over budget") -> list[str]:
    if not m:
        return []
    worst = max(r["p99_ms"] for r in m["api"].values())
    median = max(r["p50_ms"] for r in m["api"].values())
    sheet = max(max(r["sheet_s"], r["key_s"]) for r in m["sheets"].values())
    return [
        f"| `/api/exercises/<id>?seed=S`, {len(m['api'])} canonical problems, one client, "
        f"worst p50 / p99 | p99 ≤ {API_P99_MS} ms | {median:.2f} / {worst:.2f} ms "
        f"{mark(worst <= API_P99_MS)} |",
        f"| `POST /api/exercises/pipeline-bubble/check`, p50 / p99 | — | "
        f"{m['check']['p50_ms']:.2f} / {m['check']['p99_ms']:.2f} ms |",
        f"| 8-problem sheet or answer key PDF, every chapter, cold, worst | < {SHEET_S:.0f} s | "
        f"{sheet:.2f} s {mark(sheet < SHEET_S)} |",
    ]


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print("\n".join(rows(measure(sys.argv[1], quick=True))))
    else:
        from bench.servers import serve
        with serve("app.main:create_app", "--factory") as url:
            print("\n".join(rows(measure(url, quick=True))))
