"""The precision scene's drawings as SVG markup (geometry from :mod:`app.scenes.precision.deck`).

Written with f-strings rather than template loops, with what elements share said once on a
group: the bits figure draws each field's boxes as one path and each format's bits as one
``<text>`` whose characters are placed one by one (``x`` lists a position per character), the
histograms' outlines as one path.

The loss-scaling deck shows frame ``current`` first; the frames after it wait in an inert
``<template class="deck-later">`` that ``static/js/player.js`` moves into the deck when the
player reaches them, so a slider's repaint lays out only what frame ``current`` shows.
``standalone`` is a file of its own: the style sheet inlined, concrete colours, frames up to
``current`` only (overlays of ``current`` alone) and the caption underneath.
"""

from __future__ import annotations

from functools import lru_cache

from markupsafe import Markup

from app.scenes.precision.deck import Bar, BitsFigure, RangeFigure, binade_label, values
from app.scenes.precision.deck_scale import ScaleDeck, ScaleFrame
from app.draw.deck import background, deck_open, frame_start, step_header, write_deck
from app.draw.svg import esc_attr as _e
from app.draw.svg import spans_text
from app.draw.fmt import coord as _n
from app.draw.fmt import coord2 as _n2

BIT_H = 28


def _open(width: int, height: int, label: str) -> list[str]:
    """A figure's ``<svg>`` start tag and background (the bits and the ranges: one picture, no
    frames)."""
    return [deck_open(width, height, label, standalone=False), background(width, height)]


def _boxes(boxes, r: float = 0.0) -> str:
    """One path of rectangles ``(x, y, w, h)``, corners rounded by ``r``."""
    if not r:
        return "".join(f"M{_n(x)},{_n(y)}h{_n(w)}v{_n(h)}h{_n(-w)}z" for x, y, w, h in boxes)
    return "".join(f"M{_n(x + r)},{_n(y)}h{_n(w - 2 * r)}a{r},{r} 0 0 1 {r},{r}v{_n(h - 2 * r)}"
                   f"a{r},{r} 0 0 1 {-r},{r}h{_n(2 * r - w)}a{r},{r} 0 0 1 {-r},{-r}"
                   f"v{_n(2 * r - h)}a{r},{r} 0 0 1 {r},{-r}z" for x, y, w, h in boxes)


# --- 1. bit layouts --------------------------------------------------------------------------

def bits_svg(fig: BitsFigure) -> Markup:
    out = _open(fig.width, fig.height, fig.title)
    out.append(f'<text class="ink" x="22" y="36" font-size="24" font-weight="700">'
               f'{_e(fig.title)}</text>')
    for x, colour, text in fig.legend:
        out.append(f'<rect x="{_n(x + 420)}" y="22" width="18" height="18" rx="3" '
                   f'fill="{colour}"/><text class="muted" x="{_n(x + 444)}" y="36" '
                   f'font-size="16">{_e(text)}</text>')
    # every bit's box, one path per field colour
    w = fig.bit_w - 1
    fills: dict[str, list] = {}
    for r in fig.rows:
        for b in r.bits:
            fills.setdefault(b.fill, []).append((b.x, r.y, w, BIT_H))
    out += [f'<path fill="{fill}" d="{_boxes(boxes, 2)}"/>' for fill, boxes in fills.items()]
    for r in fig.rows:
        out.append(f'<g class="format-row" data-format="{r.key}">')
        if r.focus:
            out.append(f'<rect class="focus-row" x="8" y="{_n(r.y - 6)}" '
                       f'width="{fig.width - 16}" height="60" rx="8"/>')
        out.append(f'<text class="ink" x="22" y="{_n(r.y + 18)}" font-size="19" '
                   f'font-weight="700">{_e(r.label)}</text><text class="muted" x="22" '
                   f'y="{_n(r.y + 40)}" font-size="16">{_e(r.layout)}</text>')
        if r.problem:
            out.append(f'<text class="bad-text" x="210" y="{_n(r.y + 24)}" font-size="17" '
                       f'font-weight="650">{_e(r.problem)}</text>')
        else:
            # the bits as one text: each character placed at the centre of its box
            xs = " ".join(_n2(b.x + w / 2) for b in r.bits)
            bits = "".join(b.text for b in r.bits)
            out.append(f'<text x="{xs}" y="{_n2(r.y + BIT_H / 2 + 0.35 * 15)}" '
                       f'text-anchor="middle" font-size="16" font-weight="700" '
                       f'fill="#1a1a1a">{bits}</text>'
                       f'<text class="muted" x="210" y="{_n(r.y + 47)}" font-size="16">'
                       f'{_e(r.decode)}</text>'
                       f'<g text-anchor="end"><text class="ink" x="{fig.width - 20}" '
                       f'y="{_n(r.y + 18)}" font-size="17" font-weight="650">{_e(r.value)}'
                       f'</text><text class="muted" x="{fig.width - 20}" y="{_n(r.y + 40)}" '
                       f'font-size="16">{_e(r.error)}</text></g>')
        out.append("</g>")
    out.append("</svg>")
    return Markup("".join(out))


# --- 2. gradients against every format's range -------------------------------------------------

def _tipped_bars(bars: tuple[Bar, ...]) -> list[str]:
    """Bars with their hover texts, grouped by fill."""
    out = []
    for fill, group in _by_fill(bars).items():
        out.append(f'<g fill="{fill}">')
        w = _n(group[0].w)  # every bar of a histogram is as wide
        out += [f'<rect x="{_n(b.x)}" y="{_n(b.y)}" width="{w}" height="{_n(b.h)}" '
                f'data-tip="{_binade_tip(b.e)}: {values(b.count)}"/>' for b in group]
        out.append("</g>")
    return out


@lru_cache(maxsize=512)
def _binade_tip(e: int) -> str:
    return _e(binade_label(e))


def range_svg(fig: RangeFigure) -> Markup:
    out = _open(fig.width, fig.height, fig.title)
    out.append(f'<text class="ink" x="22" y="30" font-size="19" font-weight="700">'
               f'{_e(fig.title)}</text>')
    bottom = fig.height - 36
    out.append('<path class="gridline" d="'
               + "".join(f"M{_n(t.x)},44V{_n(bottom)}" for t in fig.ticks) + '"/>')
    out.append('<g class="muted" text-anchor="middle" font-size="16">')
    out += [f'<text x="{_n(t.x)}" y="{fig.height - 14}">{_e(t.label)}</text>' for t in fig.ticks]
    out.append("</g>")
    out += _tipped_bars(fig.bars)
    out.append(f'<line class="axisline" x1="{_n(fig.left)}" x2="{_n(fig.right)}" '
               f'y1="{_n(fig.base)}" y2="{_n(fig.base)}"/><text class="muted" '
               f'x="{_n(fig.left - 10)}" y="{_n(fig.base - 4)}" text-anchor="end" '
               f'font-size="16">|g|</text>')
    labels, notes = [], []
    for band in fig.bands:
        labels.append(f'<text x="{_n(fig.left - 10)}" y="{_n(band.y + 14)}">{_e(band.label)}</text>')
        if band.sub_w > 0:
            out.append(f'<rect x="{_n(band.sub_x)}" y="{_n(band.y)}" width="{_n(band.sub_w)}" '
                       f'height="18" fill="{band.colour}" opacity="0.35" '
                       f'data-tip="{_e(band.label)} subnormals"/>')
        if band.norm_w > 0:
            out.append(f'<rect x="{_n(band.norm_x)}" y="{_n(band.y)}" '
                       f'width="{_n(band.norm_w)}" height="18" fill="{band.colour}" '
                       f'data-tip="{_e(band.label)} normal range"/>')
        if band.clipped_right:
            notes.append(f'<text class="muted" x="{_n(fig.right + 4)}" y="{_n(band.y + 14)}">'
                         f'…</text>')
        notes.append(f'<text x="{_n(fig.right + 22)}" y="{_n(band.y + 14)}">{_e(band.note)}</text>')
    out.append('<g class="ink" text-anchor="end" font-size="16" font-weight="650">')
    out += labels
    out.append('</g><g class="ink" font-size="16">')
    out += notes
    out.append("</g></svg>")
    return Markup("".join(out))


# --- 3. the loss-scaling deck ----------------------------------------------------------------

def _lines(attributes: str, lines) -> str:
    """(x, baseline, text) lines of one look as the spans of one ``<text>``."""
    return spans_text(attributes, [f'<tspan x="{_n(x)}" y="{_n(y)}">{_e(t)}</tspan>'
                                   for x, y, t in lines])


def scale_svg(deck: ScaleDeck, current: int, *, standalone: bool = False,
              caption: tuple[str, ...] = (), style: str = "") -> Markup:
    small = _n(deck.small)
    base = deck.hist_base
    under = [_lines(f'class="muted title" text-anchor="end" font-size="{small}"',
                    deck.title_lines)]
    for z in deck.zones:
        under.append(f'<rect x="{_n(z.x)}" y="{_n(deck.zone_top)}" width="{_n(z.w)}" '
                     f'height="{_n(base - deck.zone_top)}" fill="{z.fill}" class="zone"/>')
    under.append(_lines(f'class="muted" text-anchor="middle" font-size="{small}"',
                        [(z.x + z.w / 2, deck.zone_label_y, z.label) for z in deck.zones
                         if z.label]
                        + [(t.x, deck.tick_y, t.label) for t in deck.ticks]))
    if deck.ghost:
        under.append('<path class="ghost" d="'
                     + _boxes((b.x, b.y, b.w, b.h) for b in deck.ghost) + '"/>')
    vx, vy = deck.value_label
    under.append(f'<line class="axisline" x1="{_n(deck.hist_left)}" x2="{_n(deck.hist_right)}" '
                 f'y1="{_n(base)}" y2="{_n(base)}"/><text class="muted" x="{_n(vx)}" '
                 f'y="{_n(vy)}" text-anchor="end" font-size="{small}">|S·g|</text>')
    left, top, right, bottom = deck.timeline
    if deck.timeline_title[2]:
        under.append(_lines(f'class="ink" font-size="{small}" font-weight="700"',
                            (deck.timeline_title,)))
    if deck.y_ticks:
        under.append('<path class="gridline" d="' + "".join(
            f"M{_n(left)},{_n(y)}H{_n(right)}" for y, _ in deck.y_ticks) + '"/>')
    under.append(_lines(f'class="muted" text-anchor="end" font-size="{small}"',
                        [(left - deck.small * 0.5, y + deck.small * 0.35, t)
                         for y, t in deck.y_ticks]))
    under.append(_lines(f'class="muted" text-anchor="middle" font-size="{small}"',
                        [(x, bottom + deck.small * 1.15, t) for x, t in deck.x_ticks]))
    over = ['<g class="legend">']
    side = _n(deck.swatch)
    for x, y, colour, *_ in deck.legend:
        if colour == "none":
            over.append(f'<rect class="ghost" x="{_n(x)}" y="{_n(y)}" width="{side}" '
                        f'height="{side}"/>')
        else:
            over.append(f'<rect x="{_n(x)}" y="{_n(y)}" width="{side}" height="{side}" rx="2" '
                        f'fill="{colour}"/>')
    over += [_lines(f'class="muted" font-size="{small}"',
                    [(tx, ty, words) for _, _, _, tx, ty, words in deck.legend]), "</g>"]
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda f: _frame(deck, f, current, standalone), standalone=standalone,
                      caption=caption, style=style, under=under, over=over, box=deck.box)


def _frame(deck: ScaleDeck, f: ScaleFrame, current: int, standalone: bool) -> list[str]:
    out = [frame_start(f.index, current, f.unit)]
    pt, m = f.point, deck.mark
    if pt:
        if pt.line:
            out.append(f'<path class="scale-line" d="{pt.line}" fill="none"/>')
        tip = f' data-tip="{_e(pt.title)}"' if not standalone else ""
        if pt.skipped:
            out.append(f'<path class="skip-mark" d="M{_n(pt.x - m)},{_n(pt.y - m)}'
                       f'l{_n(2 * m)},{_n(2 * m)}m{_n(-2 * m)},0l{_n(2 * m)},{_n(-2 * m)}"{tip}/>')
        else:
            out.append(f'<circle class="ok-mark" cx="{_n(pt.x)}" cy="{_n(pt.y)}" r="{_n(m)}"'
                       f'{tip}/>')
    if not standalone or f.index == current:
        out.append('<g class="only-current">')
        if standalone:
            out += [f'<path fill="{fill}" d="{_boxes((b.x, b.y, b.w, b.h) for b in bars)}"/>'
                    for fill, bars in _by_fill(f.bars).items()]
        else:
            out += _tipped_bars(f.bars)
        small = _n(deck.small)
        if f.preview:                      # step 0: where the line of S will start
            x, y, right, lines = f.preview
            out.append(f'<line class="max-line" x1="{_n(x)}" x2="{_n(right)}" y1="{_n(y)}" '
                       f'y2="{_n(y)}"/><circle class="current-mark" cx="{_n(x)}" cy="{_n(y)}" '
                       f'r="{_n(m * 1.9)}"/>')
            out.append(_lines(f'class="ink halo-bg" font-size="{small}"', lines))
        if f.index > 0:
            verdict = "bad-text" if f.verdict_bad else "good-text"
            vx, vy, size = deck.verdict_at
            out.append(f'<line class="max-line" x1="{_n(f.max_x)}" x2="{_n(f.max_x)}" '
                       f'y1="{_n(deck.zone_label_y + deck.small * 0.4)}" '
                       f'y2="{_n(deck.hist_base)}"/>'
                       f'<text class="{verdict} halo-bg" x="{_n(vx)}" y="{_n(vy)}" '
                       f'font-size="{_n(size)}" font-weight="700">{_e(f.verdict)}</text>')
            if f.shift_label:
                out.append(f'<text class="muted" x="{_n(deck.shift_x)}" y="{_n(vy)}" '
                           f'text-anchor="end" font-size="{small}">{_e(f.shift_label)}</text>')
            if pt:
                out.append(f'<circle class="current-mark" cx="{_n(pt.x)}" cy="{_n(pt.y)}" '
                           f'r="{_n(m * 1.9)}"/>')
        x, y, size = deck.header
        out.append(step_header(f.header, x=x, y=y, size=size) + "</g>")
    out.append("</g>")
    return out


def _by_fill(bars: tuple[Bar, ...]) -> dict[str, list[Bar]]:
    fills: dict[str, list[Bar]] = {}
    for b in bars:
        fills.setdefault(b.fill, []).append(b)
    return fills
