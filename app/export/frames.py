"""The frames an export is made of: frame k's standalone SVG is exactly what ``/svg/<scene>?frame=k``
answers (``_partials/deck_file.svg`` over ``scene.export(params, trace, k)``), which already
carries the caption under the drawing (app/draw/deck.py, ``CAPTION_HEIGHT``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from app.draw.deck import CAPTION_HEIGHT
from app.templating import render

Progress = Callable[[int, int], None]
"""``progress(done, total)``: called after each frame is drawn (the CLI's progress bar)."""

_ROOT = re.compile(r"<svg\b[^>]*>")
_VIEWBOX = re.compile(r'viewBox="0 0 ([\d.]+) ([\d.]+)"')
_WIDTH = re.compile(r'\bwidth="([\d.]+)"')
_HEIGHT = re.compile(r'\bheight="([\d.]+)"')


def frame_svg(scene, params, trace, frame: int, caption: bool = True, box=None) -> str:
    """Frame ``frame`` as a standalone SVG file (drawn for ``box`` where the scene's deck lays
    out for its box); without its caption when ``caption`` is off."""
    svg = render("_partials/deck_file.svg", **scene.export_context(params, trace, frame, box))
    return svg if caption else without_caption(svg)


def frame_svgs(scene, params, trace, frames: range, caption: bool = True,
               progress: Progress | None = None, box=None) -> Iterator[str]:
    for done, k in enumerate(frames, 1):
        yield frame_svg(scene, params, trace, k, caption, box)
        if progress is not None:
            progress(done, len(frames))


def captions(trace, frames: range) -> list[str]:
    """Each frame's caption as the trace writes it (whole, not wrapped)."""
    return [str(getattr(trace.frames[k], "caption", "") or "") for k in frames]


def svg_size(svg: str) -> tuple[float, float]:
    """The root ``<svg>``'s width and height (every standalone deck states both)."""
    root = _ROOT.search(svg).group(0)
    return float(_WIDTH.search(root).group(1)), float(_HEIGHT.search(root).group(1))


def without_caption(svg: str) -> str:
    """The same file cut above its caption: every standalone deck puts its caption in the
    bottom ``CAPTION_HEIGHT`` units (app/draw/deck.py's ``deck_open``), so shortening the root's
    height and viewBox leaves the caption outside the picture."""
    root = _ROOT.search(svg)
    tag = root.group(0)
    _, height = svg_size(svg)
    cut = max(1.0, height - CAPTION_HEIGHT)
    new = _VIEWBOX.sub(lambda m: f'viewBox="0 0 {m.group(1)} {_num(cut)}"', tag, count=1)
    new = _HEIGHT.sub(f'height="{_num(cut)}"', new, count=1)
    return svg[:root.start()] + new + svg[root.end():]


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"
