"""The checkpointing deck as SVG markup (geometry from :mod:`app.scenes.checkpointing.deck`).

Written with f-strings rather than a template loop, with what elements share said once on a
group. Neighbouring layers that a frame leaves in the same state are one element with one
hover text ("layers 3–9: all activations"), so a 512-layer model costs no more than its runs.

``current`` is the frame shown first. The frames after it wait in an inert ``<template
class="deck-later">`` that ``static/js/player.js`` moves into the deck when the player reaches
them, so a slider's repaint lays out only what frame ``current`` shows. ``standalone`` is a
file of its own: the style sheet inlined, concrete colours, frames up to ``current`` only
(overlays of ``current`` alone) and the caption underneath.
"""

from __future__ import annotations

from markupsafe import Markup

from app.draw import shapes
from app.draw.deck import frame_start, step_header, write_deck
from app.draw.fmt import coord2 as _n
from app.draw.svg import esc as _e
from app.scenes.checkpointing.deck import THIS_RUN, CheckpointDeck, Curve, FrameView, LayerCell

THIN = 6.0
"""cells narrower than this (long models) are drawn without their dashed outline"""


def render(deck: CheckpointDeck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] = (), style: str = "") -> Markup:
    under = [shapes.label(t) for t in deck.titles]
    under += [shapes.label(deck.strip_label), _labels(deck.layer_labels)]
    under += _chart(deck)
    over = ['<g class="legend">']
    side = _n(deck.swatch)
    for x, y, fill in deck.legend:
        paint = 'class="done-cell"' if fill == "done" else f'fill="{fill}"'
        over.append(f'<rect {paint} x="{_n(x)}" y="{_n(y)}" width="{side}" height="{side}"/>')
    over += [_labels(deck.legend_texts), "</g>"]
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda f: _frame(deck, f, current, standalone), standalone=standalone,
                      caption=caption, style=style, under=under, over=over, box=deck.box)


def _labels(texts) -> str:
    """Labels, each with its own size (the box's: never the style sheet's default)."""
    return "".join(shapes.label(t) for t in texts)


def _chart(deck: CheckpointDeck) -> list[str]:
    """Memory against time: axes, the other strategies' curves and every curve's key."""
    left, top, right, bottom = deck.chart
    out = [shapes.label(deck.chart_title)] if deck.chart_title else []
    if deck.gridlines:
        out.append('<path class="gridline" d="'
                   + "".join(f"M{_n(left)},{_n(y)}H{_n(right)}" for y in deck.gridlines) + '"/>')
    out.append(_labels(deck.ticks))
    out.append(f'<line class="axisline" x1="{_n(left)}" x2="{_n(right)}" '
               f'y1="{_n(bottom)}" y2="{_n(bottom)}"/>')
    for c in deck.curves:
        if not c.chosen:
            dash = f' stroke-dasharray="{c.dash}"' if c.dash else ""
            out.append(f'<path class="axisline other-curve" d="{c.path}" fill="none"{dash}/>')
    for c in deck.curves:
        out.append(_key(c))
    return out


def _key(c: Curve) -> str:
    """A curve's line in the key, its label (the chosen one's " this run" muted: the space
    before the span, where every renderer keeps it) and its peak and time."""
    x1, x2, y = c.key
    dash = f' stroke-dasharray="{c.dash}"' if c.dash else ""
    paint = (f'stroke="{c.colour}" stroke-width="5"' if c.chosen else   # others: muted ink
             'class="axisline" style="stroke-width:3"')
    out = [f'<line x1="{_n(x1)}" x2="{_n(x2)}" y1="{_n(y)}" y2="{_n(y)}" {paint}{dash}/>']
    label, *rest = c.texts
    if c.chosen:
        name = label.text[:-len(THIS_RUN)]
        out.append(f'<text class="ink" x="{_n(label.x)}" y="{_n(label.y)}" '
                   f'font-size="{_n(label.size)}" font-weight="700">{_e(name)} <tspan '
                   f'class="muted" font-weight="400">{THIS_RUN.strip()}</tspan></text>')
    else:
        out.append(shapes.label(label))
    out += [shapes.label(t) for t in rest]
    return "".join(out)


def _runs(cells: tuple[LayerCell, ...]) -> list[list[LayerCell]]:
    """Neighbouring layers in the same state, in layer order."""
    runs: list[list[LayerCell]] = []
    for c in sorted(cells, key=lambda c: c.layer):
        last = runs[-1][-1] if runs else None
        if last and c.layer == last.layer + 1 and (c.fill, c.word) == (last.fill, last.word):
            runs[-1].append(c)
        else:
            runs.append([c])
    return runs


def _cells(cells: tuple[LayerCell, ...], strip, tips: bool) -> list[str]:
    out = []
    top, h = _n(strip[2]), _n(strip[3])
    for run in _runs(cells):
        first, last = run[0], run[-1]
        fill = first.fill
        if fill == "":
            paint = 'class="blank thin"' if first.w < THIN else 'class="blank"'
        elif fill == "done":
            paint = 'class="done-cell"'
        else:
            paint = f'class="filled" fill="{fill}"'
        if not tips:
            tip = ""
        elif len(run) == 1:
            tip = f' data-tip="{_e(first.title)}"'
        else:
            tip = f' data-tip="layers {first.layer + 1}–{last.layer + 1}: {_e(first.word)}"'
        if len(run) == 1:
            out.append(f'<rect {paint} x="{_n(first.x)}" y="{top}" width="{_n(first.w)}" '
                       f'height="{h}"{tip}/>')
        else:
            d = "".join(f"M{_n(c.x)},{top}h{_n(c.w)}v{h}h{_n(-c.w)}z" for c in run)
            out.append(f'<path {paint} d="{d}"{tip}/>')
    return out


def _frame(deck: CheckpointDeck, f: FrameView, current: int, standalone: bool) -> list[str]:
    out = [frame_start(f.index, current, f.unit)]
    out += _cells(f.cells, deck.strip, tips=not standalone)
    if f.path:
        out.append(f'<path class="chosen-curve" d="{f.path}" fill="none" stroke="{deck.colour}"/>')
    if not standalone or f.index == current:
        out.append('<g class="only-current">')
        _, _, strip_top, strip_h = deck.strip
        out += [f'<rect class="changed-box" x="{_n(x - 1)}" y="{_n(strip_top - 2)}" '
                f'width="{_n(w + 2)}" height="{_n(strip_h + 4)}"/>' for x, w in f.boxes]
        if f.index > 0:
            left, top, right, bottom = deck.chart
            # the cursor in full precision: its label's baseline must not round across a pixel
            cx, cy = f.cursor_x, f.cursor_y
            out.append(f'<line class="cursor" x1="{cx}" x2="{cx}" y1="{_n(top)}" '
                       f'y2="{_n(bottom)}"/><circle cx="{cx}" cy="{cy}" r="7" '
                       f'fill="{deck.colour}" class="cursor-dot"/>')
            if f.cursor is not None:
                out.append(shapes.label(f.cursor))
        h = deck.header
        out.append(step_header(f.header, x=h.x, y=h.y, size=h.size) + "</g>")
    out.append("</g>")
    return out
