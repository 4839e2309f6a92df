"""The legibility table (issue 27, DESIGN principle 14): every scene × view × step, measured as
rendered in the box each view gives its deck (tests/browser/legibility.py): labels counted,
median, 5th percentile and smallest size (px), overlapping labels, and whether the view's
targets hold. Each scene at its default state and at the large states of
tests/browser/test_deck_legibility.py (``LARGE`` and ``MORE``).

    PYTHONPATH=. python -m bench.legibility [http://host:port] [scene…] [--defaults]

``--defaults`` measures only the default states. Prints a line per scene state and view;
returns the rows, which :func:`table` sums up per scene and view for docs/legibility.md
(bench/run.py writes it there, between the ``legibility`` markers)."""

from __future__ import annotations

import sys

from playwright.sync_api import sync_playwright

from app.main import SCENES
from tests.browser.legibility import VIEWS, measure, misses, open_view, summary
from tests.browser.test_deck_legibility import LARGE, MORE
from tests.conftest import launch_chromium


def states(only: list[str], defaults: bool) -> list[tuple[str, str]]:
    out = []
    for scene in SCENES:
        if only and scene.slug not in only:
            continue
        out.append((scene.slug, ""))
        if not defaults:
            out += [(scene.slug, q) for q in (*LARGE.get(scene.slug, ()),
                                               *MORE.get(scene.slug, ()))]
    return out


def main(base: str, only: list[str], defaults: bool = False) -> list[dict]:
    rows = []
    with sync_playwright() as p:
        browser = launch_chromium(p)
        for view in VIEWS:
            context = browser.new_context(**view.context)
            page = context.new_page()
            for slug, query in states(only, defaults):
                try:
                    open_view(page, base, view, slug, query)
                    s = summary(measure(page, None))
                except Exception as error:  # a state a scene refuses: say so, go on
                    print(f"{view.name:13} {slug + query:42} {str(error)[:70]}", flush=True)
                    continue
                missed = misses(view, s)
                rows.append({"view": view.name, "state": slug + query, **s, "misses": missed})
                print(f"{view.name:13} {slug + query:42} n={s['labels']:6} "
                      f"med={s['median']:5.1f} p5={s['p5']:5.1f} min={s['min']:5.1f} "
                      f"{'ok' if not missed else '; '.join(missed)[:90]}"
                      + ("" if not missed else f"  smallest {s['smallest'][:2]}"), flush=True)
            context.close()
        browser.close()
    return rows


def table(rows: list[dict]) -> str:
    """A Markdown table, a row per scene and a column per view: over every state and step
    measured, the lowest 5th percentile, the lowest median and the smallest label (px), and ✓
    where every state meets the view's targets (✗ and what it misses else)."""
    views = [v.name for v in VIEWS]
    scenes = list(dict.fromkeys(r["state"].split("?")[0] for r in rows))
    out = ["| scene | " + " | ".join(views) + " |", "|---|" + "---|" * len(views)]
    for scene in scenes:
        cells = []
        for view in views:
            mine = [r for r in rows if r["view"] == view and r["state"].split("?")[0] == scene]
            if not mine:
                cells.append("—")
                continue
            names = {"labels": "overlaps", "the": "frame resized", "no": "no labels"}
            missed = sorted({names.get(m.split()[0], m.split()[0])
                             for r in mine for m in r["misses"]})
            figures = (f"{min(r['p5'] for r in mine):.1f} / {min(r['median'] for r in mine):.1f}"
                       f" / {min(r['min'] for r in mine):.1f}")
            cells.append(f"{figures} {'✓' if not missed else '✗ ' + ', '.join(missed)}")
        out.append(f"| {scene} | " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(next((a for a in args if a.startswith("http")), "http://127.0.0.1:8765"),
         [a for a in args if not a.startswith(("http", "--"))], "--defaults" in args)
