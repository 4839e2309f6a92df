"""The frame writer: one scene's deck as one SVG, whatever the scene (every ``deck_svg.py``).

A deck is a drawing and its frames, one layer each. :func:`write_deck` writes the whole of it:

1. the ``<svg>`` start tag and its ``<defs>`` (:func:`deck_open`), the background, then what
   the deck draws once beneath every frame (``under``: its title, axes, lanes …);
2. ``<g class="frames">`` holding frames 0 … ``current``, each a layer that ``frame(f)``
   writes as a list of markup parts, its ``<g>`` started by :func:`frame_start`;
3. what the deck draws once above the frames (``over``: a legend, a cursor …);
4. the close (:func:`deck_end`): a page's deck is followed by its later frames as inert lazy
   layers (:func:`later_frames`), which static/js/player.js makes when the player reaches them;
   a standalone file (an export) gets its caption under the drawing instead.

So a slider's swap costs the browser the style and layout of the frames up to the one shown,
never the later ones. Every deck's title (:func:`deck_title`) and step header
(:func:`step_header`) is written here too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from markupsafe import Markup

from app.draw.caption import CAPTION_HEIGHT, Caption, caption_texts
from app.draw.caption import caption_lines  # noqa: F401  (app/scenes/collective/page.py's import)
from app.draw.fmt import coord
from app.draw.svg import FONT, SVG_NS, esc, esc_attr



def deck_open(width: float, height: float, label: str, *, standalone: bool, style: str = "",
              defs: str = "", cls: str = "deck", box: Any = None) -> str:
    """A deck's ``<svg>`` start tag and its ``<defs>``: ``height`` is the drawing's; a
    standalone file (an export) gets the caption's room beneath it, a size of its own and the
    style sheet inlined; ``defs`` holds the deck's patterns and gradients. A deck laid out for
    its ``box`` (app/draw/box.py) says so on a page: ``data-box`` and ``data-font`` are what it
    was asked for (static/js/box.js compares them with its frame), ``--deck-width`` the width
    it was drawn at, as its frame shows it (a phone's frame scrolls a wider deck sideways; a
    deck laid out taller than its box, at large type, is fitted to the frame's height, so it
    takes that much less width)."""
    if standalone:
        height += CAPTION_HEIGHT
    size = f'width="{width}" height="{height}" ' if standalone else ""
    if box is not None and not standalone:
        shown = width * min(1.0, box.height / height)
        size = (f'data-box="{box.key}" data-font="{box.font:g}" '
                f'style="--deck-width: {coord(shown)}px" ')
    inner = (f"<style>{style}</style>" if style else "") + defs
    return (f'<svg xmlns="{SVG_NS}" class="{cls}" viewBox="0 0 {width} {height}" {size}'
            f'role="img" aria-label="{esc(label)}" font-family="{FONT}">'
            + (f"<defs>{inner}</defs>" if inner else ""))


def background(width: float, height: float) -> str:
    """The deck's background (class "bg": the theme's page colour, inlined in a file)."""
    return f'<rect class="bg" x="0" y="0" width="{width}" height="{height}"/>'


def deck_title(title: str, width: float, *, size: float = 20, cls: str = "ink title",
               inset: float = 18, y: float = 34) -> str:
    """What the deck shows, at its top right: "1F1B · 4 stages · 8 micro-batches"."""
    return (f'<text class="{cls}" x="{width - inset}" y="{y}" text-anchor="end" '
            f'font-size="{size}">{esc(title)}</text>')


def step_header(header: str, *, x: float = 22, y: float = 36, size: float = 24,
                weight: int = 700, anchor: str = "", only_current: bool = False) -> str:
    """A frame's header line at the top left ("Step 3: reduce-scatter"), shown while the frame
    is current (inside an "only-current" group, or ``only_current`` itself)."""
    cls = "only-current ink step-header" if only_current else "ink step-header"
    more = (f' text-anchor="{anchor}"' if anchor else "") + (
        f' font-weight="{weight}"' if weight else "")
    return (f'<text class="{cls}" x="{x}" y="{y}" font-size="{size}"{more}>'
            f'{esc(header)}</text>')


def legend_labels(items: Iterable[tuple[float, str]], y: float,
                  num: Callable[[float], str] = coord, dx: float = 24) -> str:
    """A legend's words, muted at 16 units: each ``dx`` right of its swatch at ``x``, on the
    baseline ``y``."""
    return ('<g class="muted" font-size="16">'
            + "".join(f'<text x="{num(x + dx)}" y="{y}">{esc(text)}</text>' for x, text in items)
            + "</g>")


def frame_start(index: int, current: int, unit: str, *, step: bool = False, classes: str = "",
                data: str = "", after: str = "", hidden: bool = False) -> str:
    """A frame's ``<g>`` start tag: class "frame" (and "current" for frame ``current``; "step"
    past frame 0 where the style needs it, then ``classes``), its index and ``unit`` (the
    player's position text: "ring step 2 of 4"), ``data`` attributes before the unit and
    ``after`` it; ``hidden`` for the later layers a standalone file keeps."""
    css = ("frame" + (" current" if index == current else "") + (" step" if step and index else "")
           + classes)
    return (f'<g class="{css}" data-frame="{index}"{data} data-unit="{esc_attr(unit)}"{after}'
            + (' display="none">' if hidden else ">"))


def write_deck(width: float, height: float, label: str, frames: Sequence, current: int,
               frame: Callable[[Any], list[str]], *, standalone: bool,
               caption: Caption | tuple = (), style: str = "", defs: str = "", cls: str = "deck",
               under: Iterable[str] = (), over: Iterable[str] = (), group: str = "",
               every_frame: bool = False, bg: bool = True, box: Any = None) -> Markup:
    """A whole deck (see the module's docstring): ``height`` is the drawing's; ``frames`` are
    the deck's frames in order (frame k at index k); ``frame(f)`` writes one as markup parts
    (its ``<g …>`` … ``</g>``); ``group`` is more attributes of the frames' group
    (``font-size="17"``); ``every_frame``: a standalone file holds every frame (the later ones
    hidden by the frame itself), not just those up to ``current``; ``bg`` False: the deck
    draws its own background in ``under``; ``box``: the box a deck laid out for its box was
    drawn for (:func:`deck_open`)."""
    out = [deck_open(width, height, label, standalone=standalone, style=style, defs=defs,
                     cls=cls, box=box)]
    if bg:
        out.append(background(width, height + (CAPTION_HEIGHT if standalone else 0)))
    out += under
    out.append(f'<g class="frames"{" " + group if group else ""}>')
    for f in (frames if standalone and every_frame else frames[:current + 1]):
        out += frame(f)
    out.append("</g>")
    out += over
    out.append(deck_end(standalone, caption, height, (frame(f) for f in frames[current + 1:])))
    return Markup("".join(out))


def deck_end(standalone: bool, caption: Caption | tuple, top: float,
             later: Iterable[list[str]]) -> str:
    """What closes every deck: a standalone file (an export) gets its caption (laid out by
    :func:`app.draw.caption.caption_lines`, or none) under the drawing that ends at ``top``; a
    page's deck is followed by its later frames, ``later`` — an iterable of frames, consumed
    only then (:func:`later_frames`)."""
    if standalone:
        return (caption_texts(caption.lines, top, caption.size) if caption else "") + "</svg>"
    return "</svg>" + later_frames(later)


def later_frames(frames: Iterable[list[str]]) -> str:
    """The frames after the current one (each a list of markup parts: its ``<g …>`` start tag
    … ``</g>``), in an inert ``<template class="deck-later">`` after the ``<svg>``, each as an
    empty layer that carries its content as text (:func:`lazy_layer`): a slider's swap then
    costs the browser neither their style and layout nor the parsing of their elements.
    static/js/player.js moves a layer into the deck and makes its elements when the player
    reaches it. A part that several later frames repeat (an arrow along a link a schedule uses
    step after step, a lane's label) is written once, in the template's ``data-pieces``
    (:func:`shared_pieces`), and where it stood a layer holds its number. "" when there are
    none."""
    frames = list(frames)
    if not frames:
        return ""
    pieces = shared_pieces(frames)
    layers = "".join(lazy_layer(frame, pieces) for frame in frames)
    listed = (f" data-pieces='{_attr_text(PIECE_SEP.join(pieces))}'" if pieces else "")
    return f'<template class="deck-later"><svg xmlns="{SVG_NS}"{listed}>{layers}</svg></template>'


PIECE_OPEN, PIECE_CLOSE, PIECE_SEP = "\ue000", "\ue001", "\ue002"
"""A shared piece's number in a layer's text is written between PIECE_OPEN and PIECE_CLOSE,
and the pieces are listed one after another, PIECE_SEP between them (characters of Unicode's
private use area, which no markup of the decks holds: :func:`shared_pieces` checks)."""
PIECE_MIN = 40
"""Shorter parts are written where they stand: a number and its marks cost nearly as much."""


def shared_pieces(frames: list[list[str]]) -> dict[str, int]:
    """The parts of the frames' contents (neither a frame's start tag nor its close) that
    occur more than once and are at least PIECE_MIN characters long, each with its number, in
    the order they first occur."""
    seen: dict[str, int] = {}
    for frame in filter(_parted, frames):
        for part in frame[1:-1]:
            if len(part) >= PIECE_MIN:
                seen[part] = seen.get(part, 0) + 1
    shared = [part for part, times in seen.items() if times > 1]
    assert not any(c in part for part in shared for c in (PIECE_OPEN, PIECE_CLOSE, PIECE_SEP))
    return {part: k for k, part in enumerate(shared)}


def _parted(frame: list[str]) -> bool:
    """Whether ``frame``'s first part is its start tag alone and its last its close."""
    return frame[0].find(">") == len(frame[0]) - 1 and frame[-1] == "</g>"


def _attr_text(markup: str) -> str:
    """Markup as the text of a single-quoted attribute: only ' and & need escaping."""
    return markup.replace("&", "&amp;").replace("'", "&#39;")


def lazy_layer(frame: list[str], pieces: dict[str, int] | None = None) -> str:
    """A frame's group (its ``<g …>`` start tag, its content, ``</g>``) as an empty layer that
    carries its content as text: parsing an attribute costs the browser next to nothing,
    parsing its elements a few microseconds each. A part of ``pieces`` is written as its
    number (:func:`later_frames`)."""
    start = frame[0]
    if pieces and _parted(frame):
        head, body = len(start), "".join(
            f"{PIECE_OPEN}{pieces[part]}{PIECE_CLOSE}" if part in pieces else part
            for part in frame[1:-1])
    else:
        markup = "".join(frame)
        start, head = markup, markup.index(">") + 1
        body = markup[head:-4]
    assert start.startswith("<g ") and frame[-1].endswith("</g>"), start[:80]
    return f"{start[:head - 1]} data-markup='{_attr_text(body)}'></g>"
