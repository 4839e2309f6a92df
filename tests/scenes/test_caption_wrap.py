"""app/draw/caption.py, the one caption wrapper (every step's file and the decks' standalone
band): its widths against the fonts themselves (tests/scenes/deck_labels.py's ``width``, Pillow
at 1000 units an em) on the captions the scenes write, and its lines within the band — each
line inside the page's margins, the whole caption kept where the band holds it, "…" where it
does not."""

from __future__ import annotations

from functools import lru_cache

import pytest

from app.draw.caption import (CAPTION_HEIGHT, MARGIN, SIZE, SMALLEST, band_height, fitted,
                              text_width, wrap)
from tests.scenes.deck_labels import HAVE_FONTS, width

pytestmark = pytest.mark.skipif(not HAVE_FONTS, reason="DejaVu Sans not installed")


@lru_cache(maxsize=1)
def captions() -> list[str]:
    """Every frame's caption of every scene's default state."""
    from app.main import SCENES
    from app.params import parse
    from app.scene import trace_of
    return [str(f.caption) for s in SCENES for f in trace_of(s, parse(s.params, {})).frames
            if getattr(f, "caption", "")]


@pytest.mark.parametrize("size", [SIZE, 15, SMALLEST])
def test_widths_are_the_fonts(size):
    # the measure the deck tests use, to a tenth of a unit over whole captions (app/draw/
    # text.py's table counts η, ∇ or a combining hat as a whole em: up to 50 units too wide)
    for caption in captions():
        for k in range(0, len(caption), 60):
            piece = caption[k:k + 90]
            assert text_width(piece, size) == pytest.approx(width(piece, size), abs=0.15), piece


@pytest.mark.parametrize("page", [1280, 960, 600])
def test_lines_fit_the_band_and_keep_the_caption(page):
    room = page - 2 * MARGIN
    for caption in captions():
        text = fitted(caption, page)
        assert SMALLEST <= text.size <= SIZE
        assert all(width(line, text.size) <= room + 0.2 for line in text.lines), caption
        assert band_height(len(text.lines), text.size) <= CAPTION_HEIGHT, caption
        if band_height(len(wrap(caption, room, SMALLEST)), SMALLEST) <= CAPTION_HEIGHT:
            assert " ".join(text.lines) == " ".join(caption.split())
            # and at the largest size that holds it
            bigger = text.size + 1
            assert text.size == SIZE or band_height(len(wrap(caption, room, bigger)),
                                                    bigger) > CAPTION_HEIGHT
        else:   # cut to the band's lines, the last one saying so
            assert text.size == SMALLEST and text.lines[-1].endswith(" …")
            assert " ".join(text.lines)[:-2] in " ".join(caption.split())


def test_a_long_caption_is_set_smaller_then_cut():
    words = "every rank sends its chunk to the next rank and adds what it receives " * 12
    text = fitted(words, 960)
    assert text.size == SMALLEST and text.lines[-1].endswith(" …")
    assert band_height(len(text.lines), text.size) <= CAPTION_HEIGHT
    short = fitted("Before the collective: every rank holds its own input.", 960)
    assert short.size == SIZE and len(short.lines) == 1
