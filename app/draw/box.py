"""The box a deck is laid out for (issue 27, DESIGN principle 14): its size in CSS pixels and
the type scale, so that a deck is drawn for where it is shown instead of being shrunk into it.

A deck's viewBox is its box: one unit is one CSS pixel when the deck fills its frame, so a
font size in units is the size a student reads. The browser tells the server the deck frame's
size (static/js/box.js) as ``box=WxH``, each side rounded down to a multiple of :data:`STEP`
(a bucket: a few buckets cover the views, and states are cached per bucket), and the type
scale as ``font`` (A−/A+). A deck drawn for a bucket a little smaller than its frame is scaled
up by at most one step (or down by 1 % at most), so its type is about what it was laid out
with.

These are view parameters, not simulation parameters: they are kept out of the scenes' params
models (like ``frame``) and defined here once — ranges, buckets, defaults and the type sizes —
for the routes (:mod:`app.view`), the decks and static/js/box.js (which reads them from the
page, :func:`client_config`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import cached_property

STEP = 40
"""A bucket's sides are multiples of this many CSS px."""
MIN_WIDTH, MAX_WIDTH = 320, 2560
MIN_HEIGHT, MAX_HEIGHT = 200, 1440
"""The boxes a request may ask for (a phone's frame is narrower than a deck needs: the deck is
then laid out wider and scrolls sideways inside its frame, see :meth:`Box.at_least`)."""
FONTS = (0.85, 1.0, 1.15, 1.3, 1.5, 1.75, 2.0)
"""The type scales A−/A+ step through; ``font=`` is snapped to the nearest."""
TEXT, AREA, GROWTH = 15.5, 920 * 360, 0.17
"""A label is 15.5 px in a box of 920 × 360 (the deck's box in a 960 × 540 embed) and grows
with the box's area to the power 0.17: 15.5 px on the page at 1280 × 720 (840 × 360), 17.5 in
presentation mode at 1280 × 720 (1200 × 520), 20 at 1920 × 1080 (1840 × 840), so that issue
27's targets hold with the small size too (:data:`SMALL`)."""
SMALL, HEAD = 1.5, 1.3
"""Secondary text (ticks, legends, notes) is 1.5 px smaller than a label; the step's header
1.3 times a label."""


def bucket(length: float, low: int, high: int) -> int:
    """``length`` rounded down to a multiple of :data:`STEP`, within [low, high]."""
    return int(max(low, min(high, length // STEP * STEP)))


@dataclass(frozen=True)
class Box:
    """A deck's box: ``width`` × ``height`` CSS px, type scaled by ``font``."""

    width: int
    height: int
    font: float = 1.0

    @property
    def key(self) -> str:
        """``920x400``: the bucket as the query and the deck's ``data-box`` carry it."""
        return f"{self.width}x{self.height}"

    @cached_property
    def text(self) -> float:
        """The size of a label, in units (px)."""
        return _half(TEXT * (self.width * self.height / AREA) ** GROWTH * self.font)

    @property
    def small(self) -> float:
        """Secondary text: ticks, legends, notes."""
        return self.text - SMALL

    @property
    def head(self) -> float:
        """The step's header."""
        return _half(self.text * HEAD)

    @property
    def pad(self) -> float:
        """The margin round the drawing and between its parts."""
        return _half(self.text * 1.1)

    def at_least(self, width: int, height: int = MIN_HEIGHT) -> Box:
        """This box, widened (or made taller) to what a deck needs at the least: a phone's frame
        then scrolls the deck sideways (its type keeps the box's size)."""
        return replace(self, width=max(self.width, width), height=max(self.height, height))


def _half(x: float) -> float:
    return round(x * 2) / 2


def snap_font(value: float) -> float:
    """The A−/A+ step nearest ``value``."""
    return min(FONTS, key=lambda f: abs(f - value))


def fitted(width: float, height: float, font: float = 1.0) -> Box:
    """The bucket of a frame of ``width`` × ``height`` CSS px."""
    return Box(bucket(width, MIN_WIDTH, MAX_WIDTH), bucket(height, MIN_HEIGHT, MAX_HEIGHT),
               snap_font(font))


# --- where a deck is shown, and its box there ---------------------------------------------------
# The deck frame's size in each view, as Chromium lays out templates/ and static/css/ (the
# caption box holds a fixed number of lines, so the frame does not change from step to step).
# tests/browser/test_deck_box.py checks that each view's client asks for exactly these.

PAGE = fitted(1256, 707)
"""A page's first render (the page at 1920 × 1080); the client swaps in its own bucket's deck
once if its frame differs."""
EMBEDS = {"16:9": fitted(943, 378), "4:3": fitted(943, 558)}
"""An embed's first render by its ``aspect`` (the Embed dialog's 960 × 540 and 960 × 720;
``fill`` takes 16:9's)."""
EXPORT = Box(1280, 720)
"""An export's page (``/svg``, ``/export``): a 16:9 slide, the caption included."""


def client_config() -> str:
    """What static/js/box.js needs to bucket a frame and step the type, as JSON."""
    return json.dumps({"step": STEP, "width": [MIN_WIDTH, MAX_WIDTH],
                       "height": [MIN_HEIGHT, MAX_HEIGHT], "fonts": list(FONTS)},
                      separators=(",", ":"))
