"""One PDF page a frame, vector: CairoSVG converts each frame's SVG (text stays text, in the
embedded DejaVu Sans subset) and pypdf joins the pages, so Beamer's
``\\includegraphics[page=k]{…}`` picks frame k − 1. The caption is part of each page, under the
figure, unless ``caption=0``."""

from __future__ import annotations

import io
from collections.abc import Iterable

import cairosvg
from pypdf import PdfReader, PdfWriter


def pdf(svgs: Iterable[str], title: str) -> bytes:
    writer = PdfWriter()
    for svg in svgs:
        page = cairosvg.svg2pdf(bytestring=svg.encode("utf-8"))
        writer.append(PdfReader(io.BytesIO(page)))
    writer.add_metadata({"/Title": title, "/Creator": "Shardscope"})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
