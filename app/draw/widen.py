"""A deck's least box when its step header is wider than the box (issue 27, docs/legibility.md):
a header is never shrunk or cut, so at large type on a narrow frame (a phone at A+) the deck is
laid out wider — as wide as its widest header needs — and scrolls sideways inside its frame,
as it does below a deck's least width (:meth:`app.draw.box.Box.at_least`)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from app.draw.box import Box
from app.draw.text import text_width


def wide_enough(box: Box, width: int, height: int, headers: Iterable[str]) -> Box:
    """``box`` widened to ``width`` × ``height`` at the least, and further until the widest of
    ``headers`` fits between the margins at the header size (which grows with the box: a few
    rounds settle it)."""
    headers = tuple(headers)
    area = box.at_least(width, height)
    for _ in range(4):
        widest = max((text_width(h, area.head, bold=True) for h in headers), default=0.0)
        need = math.ceil((widest + 2 * area.pad) * 1.01)
        if need <= area.width:
            break
        area = box.at_least(need, height)
    return area
