"""One PDF page a frame, vector: CairoSVG converts each frame's page (text stays text, in the
embedded DejaVu Sans subset) and pypdf joins the pages, so Beamer's
``\\includegraphics[page=k]{…}`` shows step k (page k is step k: steps count from 1). Every
page of an export has one size, 16:9 (app/export/frames.py, ``slide_svgs``): the figure as large
as the page allows above its caption (``caption=0``: the figure alone, letterboxed)."""

from __future__ import annotations

import io
from collections.abc import Sequence

import cairosvg
from pypdf import PdfReader, PdfWriter

from app.export.pool import ordered


def page(svg: str) -> bytes:
    """One frame as a one-page vector PDF."""
    return cairosvg.svg2pdf(bytestring=svg.encode("utf-8"))


def pdf(svgs: Sequence[str], title: str, progress=None) -> bytes:
    """The frames' pages (drawn side by side, app/export/pool.py) joined in order."""
    writer = PdfWriter()
    for body in ordered(page, svgs, progress=progress):
        writer.append(PdfReader(io.BytesIO(body)))
    writer.add_metadata({"/Title": title, "/Creator": "Shardscope"})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
