"""Deck type at 960 px wide for every scene and a few large states: median, 5th percentile and
smallest rendered font size (px). ``PYTHONPATH=. python -m bench.legibility [base-url]``."""

from __future__ import annotations

import sys

from playwright.sync_api import sync_playwright

from tests.browser.legibility import measure, summary
from tests.conftest import launch_chromium

STATES: dict[str, list[str]] = {
    "memory": ["", "?dp=8", "?tp=4"],
    "parallelism": ["", "?tp=4&dp=8", "?dp=32"],
    "collective": ["", "?op=all_to_all&world=8", "?world=16", "?world=32", "?op=all_to_all&world=32"],
    "optimizer": [""],
    "data-parallel": ["", "?dp=8", "?dp=32"],
    "zero": ["", "?dp=8", "?dp=32"],
    "tensor-parallel": ["", "?tp=4", "?tp=8"],
    "pipeline": ["", "?stages=8", "?stages=32"],
    "precision": [""],
    "checkpointing": [""],
    "moe": ["", "?experts=8", "?ep=8"],
}


def main(base: str, only: list[str]) -> None:
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
        for slug, queries in STATES.items():
            if only and slug not in only:
                continue
            for query in queries:
                try:
                    s = summary(measure(page, base, f"/{slug}{query}"))
                except Exception as error:  # a state a scene refuses: say so, go on
                    print(f"{slug}{query}: {str(error)[:80]}")
                    continue
                print(f"{slug+query:45} n={s['texts']:5} med={s['median']:5.1f} "
                      f"p5={s['p5']:5.1f} min={s['min']:5.1f} {s['small'][:3]}", flush=True)
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 and sys.argv[1].startswith("http") else
         "http://127.0.0.1:8765", [a for a in sys.argv[1:] if not a.startswith("http")])
