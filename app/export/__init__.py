"""Exports for slide tools (issue 14, DESIGN.md "Exports"): ``GET /export/<scene>.<ext>?<query>``
and ``shardscope export``. Every format is made from the frames' standalone SVGs
(:mod:`app.export.frames`), one module a format:

    png   raster.py   the current ``frame``, ``width`` pixels wide (× ``scale``, 2 for retina)
    gif   gif.py      the animation, one frame a step at ``fps``, loops; ``width``; ``caption``
    mp4   mp4.py      the same as H.264 (yuv420p, even size) for PowerPoint, Keynote, Slides
    pdf   pdf.py      one vector 16:9 page a frame, every page one size (CairoSVG + pypdf)
    pptx  pptx.py     one 16:9 slide a frame: a title, the figure as SVG with a PNG fallback,
                      the caption in the notes (and on the slide: ``caption=1``)
    html  html.py     one offline file: the embed page with its player inlined

``first`` and ``last`` choose a range of frames (counted from 0, as ``frame`` is: ``first=0``
is step 1). Captions are wrapped to the figure's width (app/export/captions.py). The work one
query may ask for is bounded (:data:`MAX_FRAMES`, :data:`MAX_PIXELS`): beyond it the answer is a
422 naming the reason.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.caches import EXPORTS
from app.export.frames import Progress, captions, frame_svgs, slide_svgs, svg_size, unit_of
from app.params import ParamsError, Problem

FORMATS = {
    "png": "image/png",
    "gif": "image/gif",
    "mp4": "video/mp4",
    "pdf": "application/pdf",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "html": "text/html; charset=utf-8",
}

DEFAULT_WIDTH = {"png": 0, "gif": 960, "mp4": 1280, "pptx": 1280}
"""Pixel width of each raster format (0: the SVG's own width)."""

MAX_FRAMES = {"gif": 120, "mp4": 120, "pptx": 120, "pdf": 60, "html": 2000, "png": 1}
"""A PDF page costs CairoSVG about 0.1 s; the raster formats are bounded by their pixels."""
MAX_PIXELS = 40_000_000
"""Frames × output pixels a raster export may draw: resvg draws about 3 Mpx per second of CPU,
so this is about 6 s of CPU, a few seconds on two cores (raster.WORKERS): 38 frames of
1280 × 810, 70 of 960 × 608."""
MIN_WIDTH, MAX_WIDTH = 160, 3840

OPTION_HELP = {
    "frame": "the frame to export, from 0 (frame 0 is step 1; png, and the step the html "
             "opens at); default 0",
    "first": "first frame to export, from 0 (gif, mp4, pdf, pptx); default 0",
    "last": "last frame to export, inclusive, from 0 (gif, mp4, pdf, pptx); default the last",
    "width": f"pixel width, {MIN_WIDTH} to {MAX_WIDTH} (png: the SVG's; gif 960; mp4 1280; "
             f"pptx pictures 1280)",
    "scale": "1 or 2 (png: 2 doubles the width, for retina screens); default 1",
    "fps": "steps per second, 0.1 to 30 (gif, mp4); default 1",
    "caption": "1 or 0: caption under the figure (gif, mp4, pdf, png: default 1; pptx: on the "
               "slide as well as in the notes, default 0)",
    "box": "the page, WIDTHxHEIGHT units, caption included (default 1280x720, a 16:9 slide; "
           "html: the deck's box in its embed page): a deck that lays out for its box is drawn "
           "for this one (app/draw/box.py)",
    "font": "the deck's type scale, 0.85 to 2: larger type reflows the deck",
}


@dataclass(frozen=True)
class Options:
    frame: int | None = None
    first: int = 0
    last: int | None = None
    width: int | None = None
    scale: int = 1
    fps: float = 1.0
    caption: bool | None = None
    box: Any = None
    """the :class:`app.draw.box.Box` the frames are drawn for (None: the scene's deck has a
    fixed size); set by :func:`options_for`"""


def parse_options(query: Mapping[str, str]) -> Options:
    """The export's own options from the query (the scene's params are parsed apart)."""
    problems: list[Problem] = []
    values: dict = {}

    def integer(name: str, low: int, high: int | None = None):
        raw = query.get(name)
        if raw is None or raw == "":
            return
        try:
            value = int(raw)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f"of at least {low}"
            problems.append(Problem(name, f"{name} must be an integer {bound} (got {raw!r})"))
            return
        values[name] = value

    integer("frame", 0)
    integer("first", 0)
    integer("last", 0)
    integer("width", MIN_WIDTH, MAX_WIDTH)
    raw = query.get("scale")
    if raw not in (None, ""):
        if raw in ("1", "2"):
            values["scale"] = int(raw)
        else:
            problems.append(Problem("scale", f"scale must be 1 or 2 (got {raw!r})"))
    raw = query.get("fps")
    if raw not in (None, ""):
        try:
            fps = float(raw)
        except ValueError:
            fps = float("nan")
        if not 0.1 <= fps <= 30:
            problems.append(Problem("fps", f"fps must be a number from 0.1 to 30 (got {raw!r})"))
        else:
            values["fps"] = fps
    raw = query.get("caption")
    if raw not in (None, ""):
        if raw.lower() in ("1", "true", "yes", "on"):
            values["caption"] = True
        elif raw.lower() in ("0", "false", "no", "off"):
            values["caption"] = False
        else:
            problems.append(Problem("caption", f"caption must be 1 or 0 (got {raw!r})"))
    if problems:
        raise ParamsError(problems)
    return Options(**values)


def options_for(scene, query: Mapping[str, str], fmt: str = "") -> Options:
    """:func:`parse_options` and the box ``scene``'s frames are drawn for (app/view.py): the
    file's page, or for ``html`` the deck's box in its embed page."""
    from app.view import scene_box
    box = scene_box(scene, query, embed=fmt == "html", export=fmt != "html")
    return replace(parse_options(query), box=box)


@dataclass(frozen=True)
class Plan:
    """What one export will draw, checked against the bounds."""
    fmt: str
    frames: range
    width: int
    caption: bool


def plan(fmt: str, scene, params, trace, opts: Options) -> Plan:
    total = scene.frame_count(trace)
    last_frame = total - 1
    problems = []
    for name in ("frame", "first", "last"):
        value = getattr(opts, name)
        if value is not None and value > last_frame:
            problems.append(Problem(name, f"{name} must be an integer from 0 to {last_frame} "
                                          f"(got {value})"))
    if problems:
        raise ParamsError(problems)
    if fmt == "png":
        frames = range(opts.frame or 0, (opts.frame or 0) + 1)
    elif fmt == "html":
        frames = range(total)
    else:
        last = last_frame if opts.last is None else opts.last
        if last < opts.first:
            raise ParamsError([Problem("last", f"last ({last}) must not be before first "
                                               f"({opts.first})")])
        frames = range(opts.first, last + 1)
    caption = opts.caption if opts.caption is not None else fmt != "pptx"
    if len(frames) > MAX_FRAMES[fmt]:
        raise ParamsError([Problem("last", f"a {fmt} export holds at most {MAX_FRAMES[fmt]} "
                                           f"frames and this state has {len(frames)}: choose "
                                           f"a range with first and last")])
    width = 0
    if fmt in DEFAULT_WIDTH:
        w, h = svg_size(next(frame_svgs(scene, params, trace, frames, caption, box=opts.box)))
        width = opts.width or DEFAULT_WIDTH[fmt] or round(w)
        if fmt == "png":
            width *= opts.scale
        height = round(width * h / w)
        pixels = len(frames) * width * height
        if pixels > MAX_PIXELS:
            raise ParamsError([Problem("width", (
                f"this {fmt} would draw {len(frames)} frames of {width} × {height} px "
                f"({pixels / 1e6:.0f} Mpx); at most {MAX_PIXELS / 1e6:.0f} Mpx: lower width or "
                f"choose fewer frames with first and last"))])
    return Plan(fmt, frames, width, caption)


def export(fmt: str, scene, params, trace, opts: Options, base_url: str = "",
           progress: Progress | None = None) -> bytes:
    """The export's bytes, kept in :data:`app.caches.EXPORTS` while recent."""
    p = plan(fmt, scene, params, trace, opts)
    key = (scene.slug, params, p, opts.box, opts.fps if fmt in ("gif", "mp4") else None,
           opts.frame if fmt == "html" else None, base_url if fmt == "html" else "")
    body = EXPORTS.get(key)
    if body is None:
        with _AT_ONCE:
            body = EXPORTS.get(key)  # made by the request this one waited behind
            if body is None:
                body = _make(p, scene, params, trace, opts, base_url, progress)
                EXPORTS.put(key, body)
    return body


_AT_ONCE = threading.BoundedSemaphore(2)
"""Exports made at once: each already draws on every core (app/export/pool.py), so more would
only slow each other and the pages served meanwhile; later ones wait their turn."""


def _make(p: Plan, scene, params, trace, opts: Options, base_url: str,
          progress: Progress | None) -> bytes:
    title = f"Shardscope · {scene.title}"
    if p.fmt == "html":
        from app.export.html import html
        page = html(scene, params, trace, opts.frame or 0, base_url, box=opts.box)
        if progress is not None:
            progress(1, 1)
        return page.encode("utf-8")
    # the SVGs first (a few ms each), then drawn side by side (app/export/pool.py)
    if p.fmt == "pdf":
        from app.export.pdf import pdf
        return pdf(list(slide_svgs(scene, params, trace, p.frames, p.caption, box=opts.box)), title,
                   progress)
    if p.fmt == "pptx":
        return _pptx(p, scene, params, trace, title, progress, opts.box)
    svgs = list(frame_svgs(scene, params, trace, p.frames, p.caption, box=opts.box))
    from app.export import raster
    if p.fmt == "png":
        return raster.png(svgs[0], p.width)
    images = raster.images(svgs, p.width, progress)
    if p.fmt == "gif":
        from app.export.gif import gif
        return gif(images, opts.fps)
    from app.export.mp4 import mp4
    return mp4(images, opts.fps)


def _pptx(p: Plan, scene, params, trace, title: str, progress: Progress | None,
          box=None) -> bytes:
    """A slide a frame: the figure without its caption (the caption goes to the notes), drawn
    as a PNG and kept as a flattened SVG, under a title naming the step."""
    from app.export import raster
    from app.export.flat import flatten
    from app.export.frames import drawing
    from app.export.pptx import Slide, pptx
    draws = [drawing(scene, params, trace, k, box) for k in p.frames]
    pngs = raster.pngs(draws, p.width, progress)
    slides = []
    for k, draw, png, caption in zip(p.frames, draws, pngs, captions(trace, p.frames)):
        slides.append(Slide(
            title=f"{scene.title} · step {k + 1} of {scene.frame_count(trace)}",
            unit=unit_of(draw, k), caption=caption, png=png,
            size=raster.output_size(draw, p.width), svg=flatten(draw)))
    return pptx(slides, title, p.caption)


def filename(fmt: str, scene, opts: Options) -> str:
    suffix = f"-frame{opts.frame or 0}" if fmt == "png" else ""
    return f"shardscope-{scene.slug}{suffix}.{fmt}"
