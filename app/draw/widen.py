"""A deck's least box at large type (issue 27, docs/legibility.md). A header is never shrunk or
cut, so on a narrow frame (a phone at A+) the deck is laid out wider — as wide as its widest
header needs — and scrolls sideways inside its frame, as it does below a deck's least width
(:meth:`app.draw.box.Box.at_least`); where its rows need more height than a short frame has
(A+ twice in an embed), it is laid out taller and fitted into the frame."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import replace

from app.draw.box import Box
from app.draw.text import text_width


def least_box(box: Box, width: int, height: int, headers: Iterable[str],
              need: Callable[[Box], float] | None = None,
              need_width: Callable[[Box], float] | None = None) -> Box:
    """``box`` at ``width`` × ``height`` at the least, widened until the widest of ``headers``
    fits between the margins at the header size (and to ``need_width``: the width its columns
    need at a box's type size), and (``need``: the height its deck needs at a box's type
    size) made taller where its rows need it. Type grows with the box, so each change may call
    for the other: a few rounds settle both."""
    headers = tuple(headers)
    area = box.at_least(width, height)
    for _ in range(6):
        widest = max((text_width(h, area.head, bold=True) for h in headers), default=0.0)
        wide = math.ceil(max(widest + 2 * area.pad, need_width(area) if need_width else 0.0)
                         * 1.01)
        tall = math.ceil(need(area) * 1.01) if need else 0
        if wide <= area.width and tall <= area.height:
            break
        area = replace(area, width=max(area.width, wide), height=max(area.height, tall))
    return area
