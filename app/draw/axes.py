"""Axes laid out for their box (issue 27, docs/legibility.md): ticks as many as their labels
leave room for, and plot areas inset by the width of their tick labels, so a small box gets
fewer ticks — never smaller or overlapping ones.

A deck that draws a plot (/optimizer's loss, /precision's histogram and loss-scale timeline)
asks :func:`spaced` for the densest set of ticks whose labels, at the box's small size, keep a
gap along the axis, from candidate sets ordered densest first (:func:`nice_candidates` for
round values 1, 2 or 5 × 10^k apart, :func:`every_candidates` for whole numbers: steps,
binades). :func:`inset` sizes a plot's left margin from its widest y tick label.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from app.draw.layout import LINE
from app.draw.plot import linear_ticks
from app.draw.text import text_width


@dataclass(frozen=True)
class Linear:
    """Values ``lo`` … ``hi`` drawn from pixel ``px_lo`` to ``px_hi`` (either way round)."""

    lo: float
    hi: float
    px_lo: float
    px_hi: float

    def __call__(self, value: float) -> float:
        if self.hi == self.lo:
            return round((self.px_lo + self.px_hi) / 2, 1)
        return round(self.px_lo + (value - self.lo) / (self.hi - self.lo)
                     * (self.px_hi - self.px_lo), 1)


def nice_candidates(lo: float, hi: float, most: int = 12) -> list[list[float]]:
    """Round ticks over [lo, hi], densest first: :func:`app.draw.plot.linear_ticks` for
    ``most`` down to 2 ticks, each set once."""
    out: list[list[float]] = []
    for count in range(most, 1, -1):
        ticks = linear_ticks(lo, hi, count)
        if not out or ticks != out[-1]:
            out.append(ticks)
    return out


EVERY = (1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 40, 50, 64, 100)


def every_candidates(first: int, last: int, steps: Sequence[int] = EVERY,
                     keep: Iterable[int] = ()) -> list[list[int]]:
    """Whole numbers ``first`` … ``last`` every 1, 2, 4, 5 … (densest first): the multiples of
    the step, and ``keep`` (the first step of a timeline) in every set."""
    keep = tuple(keep)
    out = []
    for step in steps:
        values = sorted(set(range(math.ceil(first / step) * step, last + 1, step)) | set(keep))
        out.append(values)
        if len(values) <= 2:
            break
    return out


def spaced(candidates: Iterable[Sequence[float]], px: Callable[[float], float],
           label: Callable[[float], str], size: float, *, vertical: bool = False,
           gap: float | None = None) -> tuple[tuple[float, str], ...]:
    """The first set of ``candidates`` whose labels (at ``size``, centred on their tick along
    a horizontal axis, or one per line along a vertical one) keep ``gap`` (a label's size by
    default) apart: (pixel, label) of each tick. Where none does (an axis shorter than two
    labels), the first tick of the sparsest set alone."""
    gap = size if gap is None else gap
    chosen: tuple[tuple[float, str], ...] = ()
    for values in candidates:
        chosen = tuple((px(v), label(v)) for v in values)
        ordered = sorted(chosen)
        if vertical:
            ok = all(abs(b[0] - a[0]) >= size * LINE + gap * 0.25
                     for a, b in zip(ordered, ordered[1:]))
        else:
            ok = all(b[0] - a[0] >= (text_width(a[1], size) + text_width(b[1], size)) / 2 + gap
                     for a, b in zip(ordered, ordered[1:]))
        if ok:
            return chosen
    return chosen[:1]


def inset(labels: Iterable[str], size: float) -> float:
    """A plot's left margin for its y tick labels (right-aligned against the axis)."""
    return max((text_width(t, size) for t in labels), default=0.0) + size * 0.5
