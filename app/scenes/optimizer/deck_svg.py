"""The optimizer deck as SVG markup (geometry from :mod:`app.scenes.optimizer.deck`).

Written with f-strings rather than a template loop: a 32-step deck has hundreds of frames'
rows, and a template escapes every attribute of every cell. What elements share is said once
on a group (font, anchor, fill); a row's background is one path, defined once and drawn by a
``<use>`` in every frame that redraws the row, with the row's values in full as hover text;
each number is one ``<text>`` that carries its own value in full; a row of values not computed
yet is one ``<use>`` of dashed boxes.

``current`` is the frame shown first. The frames after it are not part of the drawing yet: they
follow the ``<svg>`` in an inert ``<template class="deck-later">`` that ``static/js/player.js``
moves into the deck when the player reaches them, so a slider's repaint lays out frame 0 alone.
``standalone`` is a file of its own: the style sheet inlined, concrete colours, every path
written out (no references), frames up to ``current`` only (overlays of ``current`` alone), the
caption underneath.
"""

from __future__ import annotations

from markupsafe import Markup

from app.templating import PAGE_COLOURS
from app.scenes.optimizer.deck import FrameView, OptimizerDeck, RowCells
from app.draw.deck import frame_start, step_header, write_deck
from app.draw.svg import esc as _e
from app.draw.svg import spans_text
from app.draw.fmt import coord as _n
from app.draw.fmt import coord2 as _n2

CENTRE = 0.35
"""a number's baseline sits this many ems below the centre of its box (dy="0.35em")"""
INK = "#000000"
"""the numbers' colour on every row's pale fill (set once on the frames' group)"""
BLANK_INSET = 0.8
"""a blank cell's dashed outline (1.5 wide) lies this far inside the cell"""
DASH = 8.0
"""half the width of the dash that stands for a value not computed yet"""


def render(deck: OptimizerDeck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] = (), style: str = "") -> Markup:
    under = [*_title(deck), *_grid_labels(deck), *_bytes_bar(deck), *_chart_axes(deck)]
    cells = _Cells(deck, tips=not standalone, standalone=standalone)
    defs = cells.defs()        # before the frames: a row's <use> refers to its definition
    if defs:
        under.append(f"<defs>{defs}</defs>")
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda f: _frame(cells, f, current, standalone), standalone=standalone,
                      caption=caption, style=style, under=under,
                      group=f'font-size="{_n(deck.font)}" text-anchor="middle" '
                            f'font-weight="700" fill="{INK}"', box=deck.box)


def _texts(attributes: str, texts) -> list[str]:
    """Texts of one look as the spans of one ``<text>``."""
    return [spans_text(attributes, [f'<tspan x="{_n(t.x)}" y="{_n(t.y)}">{_e(t.text)}</tspan>'
                                    for t in texts])] if texts else []


def _title(deck: OptimizerDeck) -> list[str]:
    return _texts(f'class="muted title" text-anchor="end" font-size="{_n(deck.small)}"',
                  deck.title_lines)


def _grid_labels(deck: OptimizerDeck) -> list[str]:
    """Column indices, and each row's colour swatch, name and bytes."""
    small = deck.small
    out = _texts(f'class="muted" text-anchor="middle" font-size="{_n(small)}"', deck.columns)
    side = round(small * 0.45, 1)
    tall = round(min(deck.cell_h, small * 2.4), 1)
    out += [f'<rect x="{_n(deck.swatch_x)}" y="{_n(r.y - tall / 2)}" width="{side}" '
            f'height="{tall}" rx="2" fill="{r.colour}"/>' for r in deck.row_labels]
    name_dy = -small * 0.3 if deck.sub_size else deck.name_size * 0.35
    out.append(f'<text class="ink" text-anchor="end" font-size="{_n(deck.name_size)}" '
               f'font-weight="600">')
    out += [f'<tspan x="{_n(deck.label_x)}" y="{_n(r.y + name_dy)}">{_e(r.label)}</tspan>'
            for r in deck.row_labels if r.named]
    out.append("</text>")
    if deck.sub_size:
        out.append(f'<text class="muted" text-anchor="end" font-size="{_n(deck.sub_size)}">')
        out += [f'<tspan x="{_n(deck.label_x)}" y="{_n(r.y + small * 0.95)}">{_e(r.sub)}</tspan>'
                for r in deck.row_labels if r.named]
        out.append("</text>")
    return out


def _bytes_bar(deck: OptimizerDeck) -> list[str]:
    band, small = deck.band, deck.small
    if band is None:
        return []
    y, h = band.bar_y, band.bar_h
    out = _texts(f'class="ink" font-size="{_n(small)}" font-weight="700"', (band.bar_title,))
    out += [f'<rect class="bar-part" x="{_n(b.x)}" y="{_n(y)}" width="{_n(b.w)}" '
            f'height="{_n(h)}" fill="{b.fill}"/>' for b in band.parts]
    out.append(spans_text(f'text-anchor="middle" font-size="{_n(small)}" font-weight="700"',
                          [f'<tspan x="{_n(b.x + b.w / 2)}" y="{_n2(y + h / 2 + CENTRE * small)}" '
                           f'fill="{b.ink}">{_e(b.label)}</tspan>' for b in band.parts
                           if b.label]))
    if band.span:
        left, right, brace_y = band.span
        out.append(f'<path class="brace" d="M{_n(left + 2)},{_n(brace_y)} v{_n(small * 0.5)} '
                   f'H{_n(right - 2)} v{_n(-small * 0.5)}" fill="none"/>')
    if band.span_label:
        out += _texts(f'class="ink" font-size="{_n(small)}"', (band.span_label,))
    if band.note:
        out += _texts(f'class="muted" font-size="{_n(small)}"', (band.note,))
    return out


def _chart_axes(deck: OptimizerDeck) -> list[str]:
    band, small = deck.band, deck.small
    if band is None:
        return []
    left, top, right, bottom = band.plot
    out = _texts(f'class="ink" font-size="{_n(small)}" font-weight="700"',
                 (band.chart_title,) if band.chart_title.text else ())
    if band.grid:
        d = "".join(f"M{_n(left)},{_n(y)}H{_n(right)}" for y in band.grid)
        out.append(f'<path class="gridline" d="{d}"/>')
    out += _texts(f'class="muted" text-anchor="end" font-size="{_n(small)}"', band.y_ticks)
    out += _texts(f'class="muted" text-anchor="middle" font-size="{_n(small)}"', band.x_ticks)
    out.append(f'<line class="axisline" x1="{_n(left)}" x2="{_n(right)}" y1="{_n(bottom)}" '
               f'y2="{_n(bottom)}"/>')
    return out


class _Cells:
    """Writes rows of cells, reusing what every frame's copy of a row shares: the columns'
    coordinates and each row's background. On a page a row's background is one path defined
    once (``<defs>``) and drawn by a ``<use>`` in every frame that redraws the row; a
    standalone file writes the path itself, for editors that do not follow references."""

    def __init__(self, deck: OptimizerDeck, tips: bool, standalone: bool):
        self.deck, self.tips, self.standalone = deck, tips, standalone
        w = deck.cell_w
        self.centres = [_n(x + w / 2) for x in deck.cell_xs]
        self.all = tuple(range(len(deck.cell_xs)))
        self.defined: dict[float, str] = {}   # row top → id of its background
        # the theme's edge around a cell (a faint light line on the dark theme, none on the
        # light one and in files)
        self.edge = "" if standalone else f' style="stroke:{PAGE_COLOURS["cell_edge"]}"'

    def path(self, y: float, columns: tuple[int, ...], inset: float = 0.0) -> str:
        """Rounded boxes for ``columns`` of the row whose cells start at ``y``, shrunk by
        ``inset`` on every side (with ``y`` already moved down by it)."""
        w, h = self.deck.cell_w - 2 * inset, self.deck.cell_h - 2 * inset
        xs = self.deck.cell_xs
        return "".join(f"M{_n(xs[j] + inset + 4)},{_n(y)}h{_n(w - 8)}a4,4 0 0 1 4,4v{_n(h - 8)}"
                       f"a4,4 0 0 1 -4,4h{_n(8 - w)}a4,4 0 0 1 -4,-4v{_n(8 - h)}"
                       f"a4,4 0 0 1 4,-4z" for j in columns)

    def dashes(self, y: float, columns: tuple[int, ...]) -> str:
        cy = _n(y + self.deck.cell_h / 2)
        return "".join(f"M{_n(self.deck.cell_xs[j] + self.deck.cell_w / 2 - DASH)},{cy}"
                       f"h{_n(2 * DASH)}" for j in columns)

    def blank_row(self, y: float, columns: tuple[int, ...], css: bool = True) -> str:
        """Values not computed yet: the background over whatever the row showed before, a
        dashed outline inside each cell (so a value's fill covers it once computed) and a
        dash, for the muted "—" a table prints. In ``<defs>`` (``css`` False) the colours are
        inline styles: a ``<use>`` copy of them is out of the style sheet's reach."""
        box, dashes = self.path(y, columns), self.dashes(y, columns)
        inset = self.path(y + BLANK_INSET, columns, BLANK_INSET)
        if css:
            return (f'<path class="bg" d="{box}"/><path class="blank" d="{inset}"/>'
                    f'<path class="axisline" d="{dashes}"/>')
        c = PAGE_COLOURS
        return (f'<path style="fill:{c["bg"]}" d="{box}"/><path style="fill:none;'
                f'stroke:{c["empty"]};stroke-dasharray:4 3;stroke-width:1.5" d="{inset}"/>'
                f'<path style="fill:none;stroke:{c["muted"]};stroke-width:1.5" d="{dashes}"/>')

    def defs(self) -> str:
        """Every row's background and its not-computed-yet look, once (for the page's
        ``<use>`` elements)."""
        if self.standalone:
            return ""
        fills, blank = {}, set()
        for f in self.deck.frames:
            for row in f.rows:
                fills.setdefault(row.y, row.fill)
                if not all(row.texts):
                    blank.add(row.y)
        out = []
        for i, (y, fill) in enumerate(sorted(fills.items())):
            self.defined[y] = f"opt-row{i}"
            out.append(f'<path id="opt-row{i}" fill="{fill}"{self.edge} '
                       f'd="{self.path(y, self.all)}"/>')
            if y in blank:
                out.append(f'<g id="opt-row{i}-blank">{self.blank_row(y, self.all, False)}</g>')
        return "".join(out)

    def row(self, row: RowCells) -> list[str]:
        """A row's cells: computed values on the row's fill, each number carrying its exact
        value as hover text; values not computed yet as dashed outlines with a dash in each,
        with one hover text for the row (every element of it is equally not computed yet)."""
        filled = tuple(j for j, t in enumerate(row.texts) if t)
        blank = tuple(j for j, t in enumerate(row.texts) if not t)
        defined = self.defined.get(row.y)
        xs, w = self.deck.cell_xs, self.deck.cell_w
        # the row's band, opaque, over what the row showed before (its old numbers)
        out = [f'<rect class="bg" x="{_n(xs[0] - 1)}" y="{_n(row.y - 1)}" '
               f'width="{_n(xs[-1] + w - xs[0] + 2)}" height="{_n(self.deck.cell_h + 2)}"/>']
        if filled:
            # the background's hover text: the whole row in full, for the pointer between
            # numbers
            tip = (f' data-tip="{_e(row.label)} = [{", ".join(row.exact[j] for j in filled)}] '
                   f'({row.dtype})"' if self.tips else "")
            if filled == self.all and defined:
                out.append(f'<use href="#{defined}"{tip}/>')
            else:
                out.append(f'<path fill="{row.fill}"{self.edge} d="{self.path(row.y, filled)}"'
                           f'{tip}/>')
            cy = _n2(row.y + self.deck.cell_h / 2 + CENTRE * self.deck.font)
            ink = "" if row.ink == INK else f' fill="{row.ink}"'
            label = _e(row.label)
            for j in filled:
                if not row.numbers[j]:      # too narrow for its number: the hover tells
                    continue
                # the hover text: the value in full and its dtype
                tip = (f' data-tip="{label}[{j}] = {row.exact[j]} ({row.dtype})"'
                       if self.tips else "")
                out.append(f'<text x="{self.centres[j]}" y="{cy}"{ink}{tip}>{row.texts[j]}</text>')
        if blank:
            tip = f' data-tip="{_e(row.label)}: not computed yet"' if self.tips else ""
            if blank == self.all and defined:
                out.append(f'<use href="#{defined}-blank"{tip}/>')
            else:
                out.append(f"<g{tip}>{self.blank_row(row.y, blank)}</g>")
        return out


def _frame(cells: _Cells, f: FrameView, current: int, standalone: bool) -> list[str]:
    out = [frame_start(f.index, current, f.unit)]
    for row in f.rows:
        out += cells.row(row)
    if f.segment:
        if f.segment.d:
            out.append(f'<path class="loss-line" d="{f.segment.d}" fill="none"/>')
        out.append(f'<circle class="loss-dot" cx="{_n(f.segment.x)}" cy="{_n(f.segment.y)}" '
                   f'r="{_n(cells.deck.band.dot)}"/>')
    if not standalone or f.index == current:
        if f.outlines:
            d = "".join(f"M{_n(x + 6)},{_n(y)}h{_n(w - 12)}a6,6 0 0 1 6,6v{_n(h - 12)}"
                        f"a6,6 0 0 1 -6,6h{_n(12 - w)}a6,6 0 0 1 -6,-6v{_n(12 - h)}"
                        f"a6,6 0 0 1 6,-6z" for x, y, w, h in f.outlines)
            out.append(f'<path class="only-current current-mark" d="{d}"/>')
        x, y, size = cells.deck.header
        out.append(step_header(f.header, x=x, y=y, size=size, anchor="start",
                               only_current=True))
        if f.formula:
            x, y, size = cells.deck.rule
            out.append(f'<text class="only-current ink rule" x="{_n(x)}" y="{_n(y)}" '
                       f'font-size="{_n(size)}" text-anchor="start" font-weight="400">'
                       f'{_e(f.formula)}</text>')
    out.append("</g>")
    return out
