"""How wide a label is, so that a deck writer can decide whether it fits before drawing it.

Every deck sets its text in DejaVu Sans (the first font of :data:`app.draw.svg.FONT`; exports
draw with it too, Makefile ``export-deps``). The advance widths below are DejaVu Sans's and
DejaVu Sans Bold's for printable ASCII, in thousandths of an em (read from the fonts' hmtx
tables with Pillow: ``ImageFont.truetype(path, 1000).getlength(c)``), and for the few other
characters the decks write; any other character counts as a full em. Where the browser falls
back to Helvetica or Arial the text comes out narrower, never wider.

A label that does not fit is left out or moved, never shrunk (DESIGN principle 14): see
docs/legibility.md.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

_ASCII = {
    False: (318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337,
            636, 636, 636, 636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531,
            1000, 684, 686, 698, 770, 632, 575, 775, 752, 295, 295, 656, 557, 863, 748, 787,
            603, 787, 695, 635, 611, 732, 684, 989, 685, 611, 685, 390, 337, 390, 838, 500,
            500, 613, 635, 550, 635, 615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612,
            635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838),
    True: (348, 456, 521, 838, 696, 1002, 872, 306, 457, 457, 523, 838, 380, 415, 380, 365,
           696, 696, 696, 696, 696, 696, 696, 696, 696, 696, 400, 400, 838, 838, 838, 580,
           1000, 774, 762, 734, 830, 683, 683, 821, 837, 372, 372, 775, 637, 995, 837, 850,
           733, 850, 770, 720, 682, 812, 774, 1103, 771, 724, 725, 457, 365, 457, 838, 500,
           500, 675, 716, 593, 716, 678, 435, 716, 712, 343, 343, 665, 343, 1042, 712, 687,
           716, 716, 493, 595, 478, 712, 652, 924, 645, 652, 582, 712, 365, 712, 838),
}
"""Advance widths of the characters 32 (space) … 126 (~), regular and bold."""

_OTHER = {
    False: {"·": 318, "–": 500, "—": 1000, "→": 838, "←": 838, "×": 838, "≤": 838, "≥": 838,
            "…": 1000, "Ψ": 787, "α": 659, "β": 638, "σ": 634, "Σ": 632, "²": 401, "³": 401,
            "₀": 401, "₁": 401, "₂": 401, "₃": 401, "√": 637, "≈": 838, "∞": 833, "°": 500,
            "µ": 636, "±": 838, "−": 838, "✓": 838, "✗": 838, "⁻": 528, "¹": 401},
    True: {"·": 380, "–": 500, "—": 1000, "→": 838, "←": 838, "×": 838, "≤": 838, "≥": 838,
           "…": 1000, "Ψ": 850, "α": 687, "β": 716, "σ": 779, "Σ": 683, "²": 438, "³": 438,
           "₀": 438, "₁": 438, "₂": 438, "₃": 438, "√": 667, "≈": 838, "∞": 833, "°": 500,
           "µ": 736, "±": 838, "−": 838, "✓": 838, "✗": 838, "⁻": 528, "¹": 438},
}


@lru_cache(maxsize=8192)
def em_width(text: str, bold: bool = False) -> float:
    """The advance width of ``text`` in em (multiply by the font size for units)."""
    table, other = _ASCII[bold], _OTHER[bold]
    total = 0
    for ch in text:
        code = ord(ch)
        total += table[code - 32] if 32 <= code < 127 else other.get(ch, 1000)
    return total / 1000


def text_width(text: str, size: float, bold: bool = False) -> float:
    """The width of ``text`` set at ``size`` units."""
    return em_width(text, bold) * size


def fits(text: str, size: float, width: float, bold: bool = False) -> bool:
    """Whether ``text`` at ``size`` fits in ``width`` units."""
    return text_width(text, size, bold) <= width


def wrap(text: str, size: float, width: float, bold: bool = False) -> list[str]:
    """``text`` broken at spaces into lines no wider than ``width`` (a word wider than the
    whole line stays on a line of its own: the caller checks with :func:`fits`)."""
    return wrap_by(text, lambda line: text_width(line, size, bold), width)


def wrap_by(text: str, width: Callable[[str], float], room: float, hang: float = 0.0
            ) -> list[str]:
    """``text`` broken at spaces into lines no wider than ``room`` as ``width`` measures them
    (any family: app/draw/column.py measures monospace), the lines after the first ``hang``
    units narrower (a command's continuation, set that far in); a word wider than its line
    keeps a line of its own (the caller checks)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        candidate = f"{line} {word}" if line else word
        if line and width(candidate) > room - (hang if lines else 0.0):
            lines.append(line)
            line = word
        else:
            line = candidate
    if line:
        lines.append(line)
    return lines
