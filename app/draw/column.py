"""A column of text laid out for its box (app/draw/box.py): lines wrapped to the column's width
at the box's sizes, placed top down, and cut where the column ends — a line that does not fit
is left out, never shrunk (DESIGN principle 14; docs/legibility.md).

A deck's side panel, a table of commands, a paragraph under a chart: the writer makes a
:class:`Column` between two x's and two y's and adds what it has to say in the order it
matters; :meth:`Column.add` places a whole paragraph or nothing, so that what a small box drops
is the end of the list, not half a sentence. Monospace text (commands, Python) is measured as
DejaVu Sans Mono is set: every character 0.602 em (1233 of 2048 units), Menlo's pitch too
(Consolas is narrower).
"""

from __future__ import annotations

from app.draw.layout import LINE
from app.draw.shapes import Text
from app.draw.text import text_width, wrap_by

MONO_EM = 1233 / 2048
"""DejaVu Sans Mono's advance, every character alike."""


def mono_width(text: str, size: float) -> float:
    """The width of ``text`` set in the monospace family at ``size`` units."""
    return len(text) * MONO_EM * size


def width_of(text: str, size: float, bold: bool = False, mono: bool = False) -> float:
    """The width of a label in the family it is set in."""
    return mono_width(text, size) if mono else text_width(text, size, bold)


class Column:
    """Text placed top down in ``x`` … ``x + width``, from ``top`` to ``bottom`` (units)."""

    def __init__(self, x: float, top: float, width: float, bottom: float):
        self.x, self.width, self.bottom = x, width, bottom
        self.y = top
        """where the next line's box starts (its baseline is ``size`` × 0.95 below)"""
        self.texts: list[Text] = []

    def lines(self, text: str, size: float, bold: bool = False, mono: bool = False,
              indent: float = 0.0) -> list[str] | None:
        """``text`` wrapped to the column ``indent`` units in (a command's continuation lines
        :meth:`hang` further), or None when a word is wider than its line."""
        room, hang = self.width - indent, self.hang(size, mono)

        def width(s: str) -> float:
            return width_of(s, size, bold, mono)

        out = wrap_by(text, width, room, hang)
        return out if out and all(width(s) <= room - (hang if k else 0.0)
                                  for k, s in enumerate(out)) else None

    @staticmethod
    def hang(size: float, mono: bool) -> float:
        """How much further in a wrapped command's later lines start (two characters)."""
        return 2 * MONO_EM * size if mono else 0.0

    def fits(self, count: int, size: float) -> bool:
        """Whether ``count`` more lines of ``size`` fit above the bottom."""
        return self.y + count * size * LINE <= self.bottom + size * 0.3

    def room(self, size: float) -> int:
        """How many more lines of ``size`` fit."""
        return max(0, int((self.bottom + size * 0.3 - self.y) // (size * LINE)))

    def add(self, text: str, size: float, cls: str = "ink", weight: int = 0,
            mono: bool = False, indent: float = 0.0) -> bool:
        """``text`` wrapped and placed whole, or not at all (False): it does not fit the
        column's width or what is left of its height."""
        pieces = self.lines(text, size, weight >= 600, mono, indent)
        if pieces is None or not self.fits(len(pieces), size):
            return False
        for k, piece in enumerate(pieces):
            x = self.x + indent + (self.hang(size, mono) if k else 0.0)
            self.texts.append(Text(round(x, 1), round(self.y + size * 0.95, 1), piece, size,
                                   cls, weight=weight, mono=mono))
            self.y += size * LINE
        return True

    def gap(self, size: float, lines: float = 0.5) -> None:
        """Space of ``lines`` lines of ``size`` between paragraphs."""
        self.y += size * LINE * lines

    def take(self, height: float) -> float | None:
        """``height`` units of the column (a row of bars), or None when they are not left: the
        top of what was taken."""
        if self.y + height > self.bottom + 0.01:
            return None
        top = self.y
        self.y += height
        return top
