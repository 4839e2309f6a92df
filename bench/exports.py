"""Exports of a 30-frame scene (issue 14, DESIGN.md budgets): GIF, PDF, PPTX and HTML each
under 5 s, MP4 under 10 s, over HTTP against a served app, each uncached (the best of two
requests for different frames, so the export cache answers neither).

    .venv/bin/python -m bench.exports          this measurement alone
"""

from __future__ import annotations

import json

from bench.http_load import once_ms

SCENE = "pipeline"
QUERY = "schedule=1f1b&stages=4&microbatches=8"
"""32 frames; each measurement exports 30 of them (``first``/``last``; HTML holds all 32)."""

BUDGET_S = {"gif": 5, "pdf": 5, "pptx": 5, "html": 5, "mp4": 10}


def measure(base: str) -> dict:
    results = {}
    for ext, budget in BUDGET_S.items():
        times = []
        for k in range(2):
            # a distinct range (HTML: a distinct opening frame) is a distinct cache entry
            frames = f"frame={k}" if ext == "html" else f"first={k}&last={k + 29}"
            times.append(once_ms(f"{base}/export/{SCENE}.{ext}?{QUERY}&{frames}") / 1000)
        results[ext] = {"query": QUERY, "frames": 30, "seconds": min(times),
                        "budget_s": budget}
    return results


def rows(results: dict, mark) -> list[str]:
    return [f"| `/export/{SCENE}.{ext}?{m['query']}`, {m['frames']} frames, uncached | "
            f"< {m['budget_s']} s | {m['seconds']:.1f} s {mark(m['seconds'] < m['budget_s'])} |"
            for ext, m in results.items()]


if __name__ == "__main__":
    from bench.servers import serve
    with serve("app.main:create_app", "--factory") as url:
        measured = measure(url)
    print(json.dumps(measured, indent=2))
    print("\n".join(rows(measured, lambda ok: "✓" if ok else "✗ over budget")))
