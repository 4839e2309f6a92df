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

from app.scenes.checkpointing.deck import STRIP_H, STRIP_TOP, CheckpointDeck, FrameView, LayerCell
from app.draw.deck import deck_title, frame_start, legend_labels, step_header, write_deck
from app.draw.plot import tick_marks
from app.draw.svg import esc as _e
from app.draw.fmt import coord2 as _n

THIN = 6.0
"""cells narrower than this (long models) are drawn without their dashed outline"""


def render(deck: CheckpointDeck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] = (), style: str = "") -> Markup:
    under = [deck_title(deck.title, deck.width, size=18),
             f'<text class="ink" x="22" y="{_n(STRIP_TOP + 24)}" font-size="16" '
             f'font-weight="650">layers</text>', '<g class="muted" font-size="16" text-anchor="middle">']
    y = _n(STRIP_TOP + STRIP_H + 18)
    under += [f'<text x="{_n(x)}" y="{y}">{label}</text>' for x, label in deck.layer_labels]
    under.append("</g>")
    under += _chart(deck)
    over = ['<g class="legend">']
    for x, fill, _ in deck.legend:
        paint = 'class="done-cell"' if fill == "done" else f'fill="{fill}"'
        over.append(f'<rect {paint} x="{_n(x)}" y="690" width="18" height="16"/>')
    over += [legend_labels(((x, text) for x, _, text in deck.legend), 703, _n), "</g>"]
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda f: _frame(deck, f, current, standalone), standalone=standalone,
                      caption=caption, style=style, under=under, over=over)


def _chart(deck: CheckpointDeck) -> list[str]:
    """Memory against time: axes, the other strategies' curves and every curve's legend."""
    left, top, right, bottom = deck.chart
    out = [f'<text class="ink" x="{_n(left)}" y="{_n(top - 14)}" font-size="16" '
           f'font-weight="650">activation memory on one GPU</text>']
    out += tick_marks(left, right, bottom, deck.y_ticks, deck.x_ticks, _n)
    out.append(f'<line class="axisline" x1="{_n(left)}" x2="{_n(right)}" '
               f'y1="{_n(bottom)}" y2="{_n(bottom)}"/>')
    for c in deck.curves:
        if not c.chosen:
            dash = f' stroke-dasharray="{c.dash}"' if c.dash else ""
            out.append(f'<path class="axisline other-curve" d="{c.path}" fill="none"{dash}/>')
    for q, c in enumerate(deck.curves):
        y = top + q * 48
        dash = f' stroke-dasharray="{c.dash}"' if c.dash else ""
        this_run = ('<tspan class="muted" font-size="16" font-weight="400"> this run</tspan>'
                    if c.chosen else "")
        paint = (f'stroke="{c.colour}" stroke-width="5"' if c.chosen else   # others: muted ink
                 'class="axisline" style="stroke-width:3"')
        out.append(f'<line x1="{_n(right + 20)}" x2="{_n(right + 56)}" y1="{_n(y + 12)}" '
                   f'y2="{_n(y + 12)}" {paint}'
                   f'{dash}/><text class="ink" x="{_n(right + 64)}" y="{_n(y + 17)}" '
                   f'font-size="16" font-weight="{700 if c.chosen else 400}">{_e(c.label)}'
                   f'{this_run}</text><text class="muted" x="{_n(right + 64)}" '
                   f'y="{_n(y + 36)}" font-size="16">{_e(c.legend)}</text>')
    return out


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


def _cells(cells: tuple[LayerCell, ...], tips: bool) -> list[str]:
    out = []
    top, h = _n(STRIP_TOP), _n(STRIP_H)
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
    out += _cells(f.cells, tips=not standalone)
    if f.path:
        out.append(f'<path class="chosen-curve" d="{f.path}" fill="none" stroke="{deck.colour}"/>')
    if not standalone or f.index == current:
        out.append('<g class="only-current">')
        out += [f'<rect class="changed-box" x="{_n(x - 1)}" y="{_n(STRIP_TOP - 2)}" '
                f'width="{_n(w + 2)}" height="{_n(STRIP_H + 4)}"/>' for x, w in f.boxes]
        if f.index > 0:
            left, top, right, bottom = deck.chart
            # the cursor in full precision: its label's baseline must not round across a pixel
            cx, cy = f.cursor_x, f.cursor_y
            out.append(f'<line class="cursor" x1="{cx}" x2="{cx}" y1="{_n(top)}" '
                       f'y2="{_n(bottom)}"/><circle cx="{cx}" cy="{cy}" r="7" '
                       f'fill="{deck.colour}" class="cursor-dot"/><text class="ink halo-bg" '
                       f'x="{min(cx + 12, right - 260)}" y="{max(cy - 14, top + 20)}" '
                       f'font-size="16">{_e(f.cursor_label)}</text>')
        out.append(step_header(f.header) + "</g>")
    out.append("</g>")
    return out
