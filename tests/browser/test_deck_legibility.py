"""Deck type a class can read: every scene's deck shown 960 px wide (DESIGN principle 14) has a
median rendered text size of at least 12 px and a 5th percentile of at least 10 px, at its
default state and at the large states where cells get small (tp = 4, dp = 8, an 8-rank
all-to-all, 16–32 ranks); step 0 already draws what is about to happen.

Sizes are measured in Chromium (tests/browser/legibility.py): each visible <text>'s computed
font size times the SVG's scale on screen, frame 0, 1, 2 and the last."""

from __future__ import annotations

import pytest

from app.main import SCENES
from tests.browser.legibility import measure, summary

LARGE: dict[str, list[str]] = {
    "memory": ["?dp=8", "?tp=4"],
    "parallelism": ["?tp=4&dp=8", "?dp=32"],
    "collective": ["?op=all_to_all&world=8", "?world=16", "?world=32",
                   "?op=all_gather&world=32&count=32",
                   "?op=all_to_all&world=16&count=16"],
    "optimizer": [],
    "data-parallel": ["?dp=8", "?dp=32", "?mode=fsdp&dp=16"],
    "zero": ["?dp=8", "?dp=32"],
    "tensor-parallel": ["?tp=4", "?tp=8"],
    "pipeline": ["?stages=8", "?stages=32", "?stages=64"],
    "precision": ["?format=fp8_e4m3"],
    "checkpointing": ["?layers=32"],
    "moe": ["?experts=32&ep=8", "?experts=64&ep=16&tokens=64"],
    "context-parallel": ["?cp=8", "?cp=16&seq=64", "?method=ulysses&cp=4&kv_heads=4"],
    "planner": ["?gpus=4096&preset=llama3-405b&global_batch=2048"],
    "train": ["?tp=2&cp=2&pp=2&dp=2&ep=2", "?tp=1&pp=4&dp=4&ep=4&microbatches=8"],
}
"""Large states per scene (a scene not listed here fails the completeness test below)."""

SKIP: set[str] = set()   # scenes left out of the table (none now)

STATES = [(scene.slug, "")
          for scene in SCENES if scene.slug not in SKIP] + [
          (slug, query) for slug, queries in LARGE.items() for query in queries]


def test_every_scene_has_large_states():
    assert {s.slug for s in SCENES} - SKIP <= set(LARGE)


@pytest.mark.parametrize("slug,query", STATES, ids=[f"{s}{q}" for s, q in STATES])
def test_deck_text_is_legible_at_960(page, live_server, slug, query):
    result = measure(page, live_server, f"/{slug}{query}")
    s = summary(result)
    assert s["texts"] > 0, f"/{slug}{query}: no text in the deck"
    assert s["median"] >= 11.95, f"/{slug}{query}: median {s['median']:.1f} px < 12 px"
    assert s["p5"] >= 9.95, (f"/{slug}{query}: 5th percentile {s['p5']:.1f} px < 10 px; "
                             f"smallest: {s['small']}")


@pytest.mark.parametrize("slug", [s.slug for s in SCENES if s.slug not in SKIP])
def test_step_zero_shows_what_is_about_to_happen(page, live_server, slug):
    """Frame 0 is not an empty axis: it names the step and draws the starting state."""
    frame0 = measure(page, live_server, f"/{slug}", frames=[0])[0]
    assert len(frame0["sizes"]) >= 5, f"/{slug}: step 0 shows {len(frame0['sizes'])} texts"
    # marks, not axes: filled shapes and paths shown at step 0 (grid lines are <line>s)
    shapes = page.evaluate("""() => [...document.querySelectorAll(
        'svg.deck :is(rect, circle, path, polygon)')]
        .filter(e => { const b = e.getBoundingClientRect();
                       return b.width > 1 && b.height > 1 && !e.closest('[display="none"]')
                              && !e.closest('defs, pattern, template'); })
        .length""")
    assert shapes >= 4, f"/{slug}: step 0 draws {shapes} marks"
