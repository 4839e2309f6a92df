"""SVG → PNG with resvg (the ``resvg_py`` wheel: a Rust renderer with no system library and
full CSS-selector support for the decks' inlined style sheets). Text is set in DejaVu Sans, the
first font of every deck's font stack (``fonts-dejavu-core``, installed by ``make run`` and the
Dockerfile), so exported pixels look like the page and −, ×, ≤, Greek letters and subscripts
all have glyphs."""

from __future__ import annotations

import io
from collections.abc import Iterator

import resvg_py
from PIL import Image

from app.export.frames import svg_size
from app.export.pool import ordered

FONT = "DejaVu Sans"


def png(svg: str, width: int) -> bytes:
    """The SVG drawn ``width`` pixels wide (height in proportion), on white."""
    w, _ = svg_size(svg)
    # a zoom, not width=: resvg rounds a width's height up, a zoom's to the nearest pixel
    out = resvg_py.svg_to_bytes(svg_string=svg, zoom=width / w, background="#ffffff",
                                font_family=FONT, sans_serif_family=FONT)
    return bytes(out)


def image(svg: str, width: int) -> Image.Image:
    """The SVG drawn ``width`` pixels wide, as an RGB Pillow image."""
    return Image.open(io.BytesIO(png(svg, width))).convert("RGB")


def output_size(svg: str, width: int) -> tuple[int, int]:
    w, h = svg_size(svg)
    return width, max(1, round(width * h / w))



def pngs(svgs: list[str], width: int, progress=None) -> Iterator[bytes]:
    """Each SVG drawn ``width`` pixels wide, in order, side by side (app/export/pool.py)."""
    return ordered(png, svgs, width, progress=progress)


def images(svgs: list[str], width: int, progress=None) -> Iterator[Image.Image]:
    """Each SVG as an RGB image, one at a time (so a long GIF or MP4 holds one RGB frame)."""
    for body in pngs(svgs, width, progress):
        yield Image.open(io.BytesIO(body)).convert("RGB")
