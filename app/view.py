"""The view parameters of a page, an embed, ``/svg`` and ``/export``: the box a deck is laid out
for and its type scale (:mod:`app.draw.box`), read from the query apart from the scene's params,
as ``frame`` is.

    box=WxH    the deck's box in CSS px (static/js/box.js sends its frame's bucket); on
               /svg and /export the file's page, caption included (default 1280x720, 16:9)
    font=F     the type scale, 0.85 … 2 (A−/A+; snapped to app.draw.box.FONTS)

A bad value is a 422 naming the parameter and its range, as everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.draw import box as boxes
from app.draw.box import Box
from app.params import ParamsError, Problem

BOX_HELP = (f"the deck's box, WIDTHxHEIGHT CSS px: width {boxes.MIN_WIDTH}–{boxes.MAX_WIDTH}, "
            f"height {boxes.MIN_HEIGHT}–{boxes.MAX_HEIGHT}")
FONT_HELP = (f"the deck's type scale, {boxes.FONTS[0]:g} to {boxes.FONTS[-1]:g} (snapped to "
             f"{', '.join(f'{f:g}' for f in boxes.FONTS)})")

NAMES = ("box", "font")
"""The view parameters' names: a scene's form sends them beside its params (hidden inputs)."""

PARAMETERS = [
    {"name": "box", "in": "query", "required": False, "schema": {"type": "string",
     "pattern": r"^\d+x\d+$"}, "description": BOX_HELP + "; pages and embeds lay out their "
     f"deck for it, each side rounded down to a multiple of {boxes.STEP} (the browser sends its "
     "frame's), /svg and /export for a file of that page size (default "
     f"{boxes.EXPORT.key}, a 16:9 slide)"},
    {"name": "font", "in": "query", "required": False, "schema": {"type": "number",
     "minimum": boxes.FONTS[0], "maximum": boxes.FONTS[-1], "default": 1}, "description":
     FONT_HELP + ": larger type reflows the deck (fewer labels fit), it is not scaled"},
]
"""The OpenAPI description of the two, for the routes that take them."""


def parse_view(query: Mapping[str, str], default: Box, exact: bool = False) -> Box:
    """The box and font of ``query``, ``default``'s where absent; a :class:`ParamsError` naming
    ``box`` or ``font`` where a value is not allowed. A box is rounded down to its bucket,
    unless ``exact`` (a file's page: 960x540 is a 16:9 slide)."""
    problems: list[Problem] = []
    width, height, font = default.width, default.height, default.font
    raw = query.get("box")
    if raw:
        sides = raw.lower().split("x")
        try:
            w, h = (int(side) for side in sides)
        except ValueError:
            w = h = -1
        if not (boxes.MIN_WIDTH <= w <= boxes.MAX_WIDTH
                and boxes.MIN_HEIGHT <= h <= boxes.MAX_HEIGHT):
            problems.append(Problem("box", f"box must be {BOX_HELP.split(', ', 1)[1]} "
                                           f"(got {raw!r})"))
        elif exact:
            width, height = w, h
        else:
            width = boxes.bucket(w, boxes.MIN_WIDTH, boxes.MAX_WIDTH)
            height = boxes.bucket(h, boxes.MIN_HEIGHT, boxes.MAX_HEIGHT)
    raw = query.get("font")
    if raw:
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not boxes.FONTS[0] <= value <= boxes.FONTS[-1]:
            problems.append(Problem("font", f"font must be a number from {boxes.FONTS[0]:g} "
                                            f"to {boxes.FONTS[-1]:g} (got {raw!r})"))
        else:
            font = boxes.snap_font(value)
    if problems:
        raise ParamsError(problems)
    return Box(width, height, font)


def page_default(query: Mapping[str, str], embed: bool) -> Box:
    """The box a page or embed is first rendered for when its query names none: an embed's by
    its ``aspect`` (the Embed dialog writes it), a page's :data:`app.draw.box.PAGE`."""
    if embed:
        return boxes.EMBEDS.get(query.get("aspect", ""), boxes.EMBEDS["16:9"])
    return boxes.PAGE


def scene_box(scene, query: Mapping[str, str], *, embed: bool = False,
              export: bool = False) -> Box | None:
    """The box ``scene``'s deck is drawn for, or None while the scene's deck is drawn at its
    fixed size (``Scene.boxed`` false: docs/legibility.md, "scenes still to do"): its states are
    then not cached per bucket. The query is checked either way."""
    box = parse_view(query, boxes.EXPORT if export else page_default(query, embed), export)
    return box if scene.boxed else None
