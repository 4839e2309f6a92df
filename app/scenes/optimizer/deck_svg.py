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
from app.draw.deck import deck_title, frame_start, step_header, write_deck
from app.draw.svg import esc as _e
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
    under = [deck_title(deck.title, deck.width), *_grid_labels(deck), *_bytes_bar(deck),
             *_chart_axes(deck)]
    cells = _Cells(deck, tips=not standalone, standalone=standalone)
    defs = cells.defs()        # before the frames: a row's <use> refers to its definition
    if defs:
        under.append(f"<defs>{defs}</defs>")
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda f: _frame(cells, f, current, standalone), standalone=standalone,
                      caption=caption, style=style, under=under,
                      group=f'font-size="{_n(deck.font)}" text-anchor="middle" '
                            f'font-weight="700" fill="{INK}"')


def _grid_labels(deck: OptimizerDeck) -> list[str]:
    """Column indices, and each row's colour swatch, name and bytes."""
    out = ['<g class="muted" text-anchor="middle" font-size="15">']
    out += [f'<text x="{_n(x)}" y="{_n(y)}">{label}</text>' for x, y, label in deck.columns]
    out.append("</g>")
    out += [f'<rect x="14" y="{_n(r.y - 17)}" width="6" height="34" rx="2" fill="{r.colour}"/>'
            for r in deck.row_labels]
    out.append('<g class="ink" text-anchor="end" font-size="17" font-weight="650">')
    out += [f'<text x="292" y="{_n(r.y - 2)}">{_e(r.label)}</text>' for r in deck.row_labels]
    out.append('</g><g class="muted" text-anchor="end" font-size="14">')
    out += [f'<text x="292" y="{_n(r.y + 16)}">{_e(r.sub)}</text>' for r in deck.row_labels]
    out.append("</g>")
    return out


def _bytes_bar(deck: OptimizerDeck) -> list[str]:
    y = deck.bar_y
    out = [f'<text class="ink" x="24" y="{_n(y - 22)}" font-size="17" font-weight="700">'
           f'{_e(deck.bar_title)}</text>']
    out += [f'<rect class="bar-part" x="{_n(b.x)}" y="{_n(y)}" width="{_n(b.w)}" height="38" '
            f'fill="{b.fill}"/>' for b in deck.bar]
    out.append('<g text-anchor="middle" font-size="15" font-weight="700">')
    out += [f'<text x="{_n(b.x + b.w / 2)}" y="{_n2(y + 19 + CENTRE * 15)}" fill="{b.ink}">'
            f'{_e(b.label)}</text>' for b in deck.bar]
    out.append("</g>")
    if deck.state_span:
        left, right, label = deck.state_span
        out.append(f'<path class="brace" d="M{_n(left + 2)},{_n(y + 46)} v8 H{_n(right - 2)} v-8" '
                   f'fill="none"/><text class="ink" x="{_n(left)}" y="{_n(y + 74)}" '
                   f'font-size="15">{_e(label)}</text>')
    out.append(f'<text class="muted" x="24" y="{_n(y + 98)}" font-size="14">'
               f'{_e(deck.bar_note)} bytes per parameter</text>')
    return out


def _chart_axes(deck: OptimizerDeck) -> list[str]:
    left, top, right, bottom = deck.chart_box
    x0 = _n(left + 54)
    out = [f'<text class="ink" x="{x0}" y="{_n(top - 16)}" font-size="15" font-weight="650">'
           f'{_e(deck.chart_title)}</text>']
    if deck.chart_grid:
        d = "".join(f"M{x0},{_n(y)}H{_n(right)}" for y in deck.chart_grid)
        out.append(f'<path class="gridline" d="{d}"/>')
    out.append('<g class="muted" font-size="14">')
    out += [f'<text x="{_n(t.x)}" y="{_n(t.y)}" text-anchor="{t.anchor}">{_e(t.label)}</text>'
            for t in deck.chart_ticks]
    out.append(f'</g><line class="axisline" x1="{x0}" x2="{_n(right)}" y1="{_n(bottom - 22)}" '
               f'y2="{_n(bottom - 22)}"/>')
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
        out = []
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
                   f'r="5"/>')
    if not standalone or f.index == current:
        if f.outlines:
            d = "".join(f"M{_n(x + 6)},{_n(y)}h{_n(w - 12)}a6,6 0 0 1 6,6v{_n(h - 12)}"
                        f"a6,6 0 0 1 -6,6h{_n(12 - w)}a6,6 0 0 1 -6,-6v{_n(12 - h)}"
                        f"a6,6 0 0 1 6,-6z" for x, y, w, h in f.outlines)
            out.append(f'<path class="only-current current-mark" d="{d}"/>')
        out.append(step_header(f.header, anchor="start", weight=0, only_current=True))
        if f.formula:
            out.append(f'<text class="only-current ink rule" x="22" y="70" font-size="21" '
                       f'text-anchor="start" font-weight="400">{_e(f.formula)}</text>')
    out.append("</g>")
    return out
