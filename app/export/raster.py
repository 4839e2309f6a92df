"""SVG → PNG with resvg (the ``resvg_py`` wheel: a Rust renderer with no system library and
full CSS-selector support for the decks' inlined style sheets). Text is set in DejaVu Sans, the
first font of every deck's font stack (``fonts-dejavu-core``, installed by ``make run`` and the
Dockerfile), so exported pixels look like the page and −, ×, ≤, Greek letters and subscripts
all have glyphs."""

from __future__ import annotations

import io
import multiprocessing
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import resvg_py
from PIL import Image

from app.export.frames import svg_size

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


WORKERS = int(os.environ.get("SHARDSCOPE_EXPORT_WORKERS", min(4, os.cpu_count() or 1)))
"""Processes that draw an animation's frames side by side (resvg holds the GIL while it draws,
about 0.15 s of CPU a 960 px frame): an export of 30 frames then takes a share of each core
rather than 5 s of one. 1 draws in the calling thread."""

_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ProcessPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            # spawn: the server has threads, which a forked child must not inherit mid-lock
            _pool = ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("spawn"))
        return _pool


def pngs(svgs: list[str], width: int, progress=None) -> Iterator[bytes]:
    """Each SVG drawn ``width`` pixels wide, in order; ``progress(done, total)`` after each."""
    total = len(svgs)
    if WORKERS < 2 or total < 3:
        results: Iterator[bytes] = (png(svg, width) for svg in svgs)
    else:
        results = _executor().map(png, svgs, [width] * total)
    for done, body in enumerate(results, 1):
        if progress is not None:
            progress(done, total)
        yield body


def images(svgs: list[str], width: int, progress=None) -> list[Image.Image]:
    return [Image.open(io.BytesIO(body)).convert("RGB")
            for body in pngs(svgs, width, progress)]
