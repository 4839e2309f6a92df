"""Coordinates as SVG text: as few characters as a number needs where it places something.

How numbers read in words (sizes, times, captions) is :mod:`app.humanize`, below every layer;
this module is the drawing's own.
"""

from __future__ import annotations


def coord(x: float) -> str:
    """A coordinate in as few characters as it needs (one decimal at most)."""
    text = f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text

def coord2(x: float) -> str:
    """Two decimals at most, for what text is placed by: glyphs snap to whole pixels, and a
    baseline rounded across a pixel's boundary would move them by one."""
    return f"{x:.2f}".rstrip("0").rstrip(".")
