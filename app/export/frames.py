"""The frames an export is made of, and the standalone file of one step (``/svg/<scene>?frame=k``).

A step's file is the deck's drawing (``_partials/deck_file.svg`` over ``scene.export(params,
trace, k)``, cut above the band where the deck writer put its own caption) with the frame's
caption wrapped beneath it to the drawing's width (:mod:`app.export.captions`, which wraps
with :mod:`app.draw.caption`). ``/svg``, the
handout and every export read their frames here, so a caption is laid out one way everywhere.
Steps count from 1 where a person reads them (a file's title says "step k+1 of N"); ``frame``
counts from 0 as the URL does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from html import escape, unescape

from app.draw.caption import CAPTION_HEIGHT, line_count
from app.export.captions import banded, captioned, root_size, slide
from app.templating import render

Progress = Callable[[int, int], None]
"""``progress(done, total)``: called after each frame is drawn (the CLI's progress bar)."""

PROLOG = '<?xml version="1.0" encoding="UTF-8"?>\n'

_ROOT = re.compile(r"<svg\b[^>]*>")
_VIEWBOX = re.compile(r'viewBox="0 0 ([\d.]+) ([\d.]+)"')
_WIDTH = re.compile(r'\bwidth="([\d.]+)"')
_HEIGHT = re.compile(r'\bheight="([\d.]+)"')
_LABEL = re.compile(r'\baria-label="([^"]*)"')
_TEXT_AT = re.compile(r'<text\b[^>]*?\sy="([\d.]+)"[^>]*>[^<]*</text>')


def deck_file(scene, params, trace, frame: int, box=None) -> str:
    """The deck writer's own standalone file of ``frame`` (its caption in the bottom
    ``CAPTION_HEIGHT`` units), drawn for ``box`` where the scene's deck lays out for its box."""
    return render("_partials/deck_file.svg", **scene.export_context(params, trace, frame, box))


def drawing(scene, params, trace, frame: int, box=None) -> str:
    """Frame ``frame``'s drawing alone: the deck file cut above its caption band, the texts the
    deck wrote there removed (a caption is laid out by :mod:`app.export.captions`)."""
    return without_caption(deck_file(scene, params, trace, frame, box))


def caption_of(trace, frame: int) -> str:
    return str(getattr(trace.frames[frame], "caption", "") or "")


def captions(trace, frames: range) -> list[str]:
    """Each frame's caption as the trace writes it (whole, not wrapped)."""
    return [caption_of(trace, k) for k in frames]


def unit_of(svg: str, frame: int) -> str:
    """What step ``frame`` is in its deck's words: its layer's ``data-unit`` ("MoE layer stage
    2 of 7: top-k choice"), "" where the deck names none."""
    m = re.search(rf'data-frame="{frame}"[^>]*?\sdata-unit="([^"]*)"', svg)
    return unescape(m.group(1)) if m else ""


def step_title(scene, trace, frame: int, svg: str) -> str:
    """"Mixture of experts · step 3 of 8: MoE layer stage 2 of 7: top-k choice"."""
    unit = unit_of(svg, frame)
    return (f"{scene.title} · step {frame + 1} of {scene.frame_count(trace)}"
            + (f": {unit}" if unit else ""))


def frame_svg(scene, params, trace, frame: int, caption: bool = True, min_lines: int = 0,
              describe: bool = False, box=None) -> str:
    """Frame ``frame`` as a standalone SVG file: the drawing, its caption beneath it unless
    ``caption`` is off (a band of at least ``min_lines`` lines); ``describe``: a ``<title>`` and
    a ``<desc>`` holding the caption and the values the step shows (its text alternative)."""
    draw = drawing(scene, params, trace, frame, box)
    label = step_title(scene, trace, frame, draw)
    text = caption_of(trace, frame) if caption else ""
    alt = text_alternative(draw, label, caption_of(trace, frame)) if describe else ""
    if text and box is not None and scene.boxed:
        # drawn for a page of the box's size (app/view.py): the file is exactly that size
        return PROLOG + banded(draw, text, CAPTION_HEIGHT, label, alt, (box.width, box.height))
    return PROLOG + captioned(draw, text, label, min_lines, alt)


def frame_svgs(scene, params, trace, frames: range, caption: bool = True,
               progress: Progress | None = None, box=None) -> Iterator[str]:
    """The frames of an animation: every caption band as tall as the longest's, so that each
    frame has the same size."""
    lines = 0
    if caption:
        width = root_size(drawing(scene, params, trace, frames[0], box))[0]
        lines = max(line_count(caption_of(trace, k), width) for k in frames)
    for done, k in enumerate(frames, 1):
        yield frame_svg(scene, params, trace, k, caption, lines, box=box)
        if progress is not None:
            progress(done, len(frames))


def slide_svgs(scene, params, trace, frames: range, caption: bool = True,
               box=None) -> Iterator[str]:
    """Each frame as a 16:9 page (the PDF's): the drawing letterboxed above its caption."""
    for k in frames:
        draw = drawing(scene, params, trace, k, box)
        yield PROLOG + slide(draw, caption_of(trace, k) if caption else "",
                             step_title(scene, trace, k, draw))


def svg_size(svg: str) -> tuple[float, float]:
    """The root ``<svg>``'s width and height (every standalone file states both)."""
    root = _ROOT.search(svg).group(0)
    return float(_WIDTH.search(root).group(1)), float(_HEIGHT.search(root).group(1))


def without_caption(svg: str) -> str:
    """The deck writer's file cut above its caption: every deck puts its caption in the bottom
    ``CAPTION_HEIGHT`` units (app/draw/deck.py's ``deck_open``), so the root's height and viewBox
    are shortened by that much and the texts written below the cut are dropped (they would
    otherwise stay in the file: in a PDF's text, in a nested drawing)."""
    root = _ROOT.search(svg)
    tag = root.group(0)
    _, height = svg_size(svg)
    cut = max(1.0, height - CAPTION_HEIGHT)
    new = _VIEWBOX.sub(lambda m: f'viewBox="0 0 {m.group(1)} {_num(cut)}"', tag, count=1)
    new = _HEIGHT.sub(f'height="{_num(cut)}"', new, count=1)
    body = _TEXT_AT.sub(lambda m: "" if float(m.group(1)) > cut else m.group(0),
                        svg[root.end():])
    return svg[:root.start()] + new + body


# --- the text alternative of a step's file ------------------------------------------------------

_LEAF = re.compile(r"<(text|tspan)\b[^>]*>([^<]+)<")


def shown_values(svg: str) -> list[str]:
    """The labels a step's drawing shows, in document order, each once: the text of its
    ``<text>`` and ``<tspan>`` leaves, leaving out the arrows and notes that only the current
    layer shows (``only-current`` in the layers before it)."""
    out, seen = [], set()
    # the layers before the current one: their only-current parts are hidden
    parts = re.split(r'(<g class="frame[^"]*"[^>]*>)', svg)
    hidden = False
    for part in parts:
        if part.startswith('<g class="frame'):
            hidden = "current" not in part.split('"')[1].split()
            continue
        chunk = part
        if hidden:
            chunk = re.sub(r'<(\w+) class="[^"]*\bonly-current\b[^"]*"[^>]*>.*?</\1>', "", chunk,
                           flags=re.S)
        for _, text in _LEAF.findall(chunk):
            text = " ".join(unescape(text).split())
            if text and text not in seen:
                seen.add(text)
                out.append(text)
    return out


def text_alternative(draw: str, label: str, caption: str) -> str:
    """The ``<title>`` (the step) and ``<desc>`` (its caption, then every value drawn) of a
    step's file: what a screen reader, a search engine or an alt text takes from it."""
    values = shown_values(draw)
    desc = caption + (" Values shown: " + "; ".join(values) + "." if values else "")
    return f"<title>{escape(label, quote=False)}</title><desc>{escape(desc, quote=False)}</desc>"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"
