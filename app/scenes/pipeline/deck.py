"""The pipeline scene as drawable geometry: one lane per rank, time to the right.

Drawn as layers for ``static/js/player.js``: frame k holds what began in it — the passes that
started, the idle stretches (bubbles) that began, the sends that left, the activation memory
since the previous frame — and, shown only while it is current, the time cursor and arrows from
each starting pass to the pass it waited for. A standalone SVG of frame k is the deck cut after
layer k. :mod:`app.scenes.pipeline.deck_svg` writes the markup.

Passes are coloured by kind (app/draw/palette.py PASS: F cyan, B rose, I rose and hatched, W
sand with a dashed edge), never by a rank colour; the micro-batch is the pass's label and odd
micro-batches are a shade darker, so neighbouring passes part. When a timeline cannot be
drawn legibly (more than :data:`DRAW_RANKS` ranks or :data:`DRAW_PASSES` passes) each lane
becomes a strip of time slices, each a stacked bar of what the rank did in the slice (blue
forward, vermillion backward, green weight gradients); the empty part of a lane is idle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.draw.box import Box
from app.draw.layout import LINE, Heading, Legend, heading, legend_rows
from app.draw.plot import linear_ticks
from app.draw.text import text_width, wrap
from app.draw.widen import least_box
from app.humanize import sig4
from app.scenes.pipeline import deck_layers as draw
from app.scenes.pipeline.deck_layers import SUMMARY_COLOURS, Arrow, Block, TimeAxis, pass_fill
from app.sim.pipeline.captions import EPS
from app.sim.pipeline.orders import SCHEDULE_KINDS
from app.sim.pipeline.schedules import KINDS
from app.sim.pipeline.simulate import PipelineTrace

MIN_WIDTH, MIN_HEIGHT = 560, 320
"""The smallest box the timeline is laid out for: a narrower frame (a phone) scrolls it; at
large type it is laid out wider for its headers and taller for its lanes (:func:`least_box`)."""
DRAW_RANKS, DRAW_PASSES = 32, 2048


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    unit: str
    """what a step is, for the player's position text: t = 7 of 33: warm-up"""
    cursor: float
    cursor_label: str
    pill: float
    """x of the cursor's label, kept inside the deck"""
    veil: float
    """summarised timelines: width of the veil over what lies after the cursor"""
    blocks: tuple[Block, ...]
    idle: str
    """path of the idle stretches that begin in this frame"""
    memory: str
    """path of the activations held since the previous frame"""
    sends: str
    """path of the sends that leave in this frame"""
    arrows: tuple[Arrow, ...]
    marked: bool
    """whether its passes are outlined while it is current (not when too many start at once)"""


@dataclass(frozen=True)
class Lane:
    rank: int
    y: float
    h: float
    label: str
    font: float
    side: str
    stages: str


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    box: Box
    """the box asked for (the deck's ``data-box``); width × height is what it was laid out in"""
    title: str
    title_lines: tuple[tuple[float, float, str], ...]
    """(x, baseline, text) of each line of the title, right-aligned; the note's lines follow"""
    header: tuple[float, float, float]
    """x, baseline and size of the step's header"""
    drawn: bool
    lanes: tuple[Lane, ...]
    ticks: tuple[tuple[float, str], ...]
    frames: tuple[FrameView, ...]
    legend: tuple[tuple[str, str, str, float, float], ...]
    """(kind, fill, text, x, y): y is the swatch's top"""
    swatch: float
    """the side of a legend swatch (its text follows at ``swatch + small * 0.45``)"""
    note: str
    side_header: str
    ghost: tuple[tuple[str, str], ...]
    """(colour, path) per kind of pass: every pass to come, faint in its kind's colour, so frame 0
    already shows what will run where; each frame's passes cover theirs"""
    slices: dict[str, str]
    """summarised timelines: a path per colour of the stacked bars"""
    band: float
    """height of a pass"""
    font: float
    """font of the passes' labels"""
    small: float
    """ticks, the side column, the cursor's label, the legend, the note"""
    axis_y: float
    """the baseline of the time ticks; the grid starts under them"""
    grid_top: float
    bottom: float
    """the bottom of the last lane"""
    side_x: float
    """the middle of the side column (idle share and peak per rank)"""
    pill_w: float
    left: float
    right: float


def build_deck(trace: PipelineTrace, box: Box, upto: int | None = None) -> Deck:
    """Every frame of ``trace`` (or frames 0…``upto`` for a standalone export), laid out for
    ``box``: the header and title on top, the time axis under them, a lane per rank between
    the rank labels (left) and each rank's idle share and peak (right), the time cursor's label
    and the legend's rows below."""
    p = trace.params
    flat, line = trace.flat, trace.line
    ranks, makespan = p.stages, line.makespan
    drawn = ranks <= DRAW_RANKS and flat.ids.size <= DRAW_PASSES
    last = len(trace.frames) - 1 if upto is None else upto

    kind = SCHEDULE_KINDS[p.schedule]
    chunks = f" × {p.chunks} chunks" if p.chunks > 1 else ""
    title = (f"{kind.title} · {ranks} rank{'s' if ranks > 1 else ''}{chunks} · "
             f"{p.microbatches} micro-batch{'es' if p.microbatches > 1 else ''}")
    note = "" if drawn else (f"{flat.ids.size:,} passes on {ranks} ranks: each lane shows, per "
                             f"slice of time, how much of it the rank spent on each kind of pass")
    every_header = [_header(f) for f in trace.frames]
    headers = every_header[:last + 1]
    widest = [text for _, _, text in _legend(trace, drawn, memory=drawn)]

    def need(a: Box) -> float:
        """The top band, the time axis, the lanes (up to 8 a rank's number apart; more:
        four numbers' worth, one every few lanes), the cursor's label and the legend."""
        lanes = a.text * 1.2 * (ranks if ranks <= 8 else 4)
        return (_below_title(a, headers, title, note)[2] + a.small * 1.65 + lanes
                + a.small * 2.1 + a.pad * 0.6 + a.height - legend_rows(a, widest).top)

    area = least_box(box, MIN_WIDTH, MIN_HEIGHT, every_header, need)
    width, height = area.width, area.height
    pad, text, small = area.pad, area.text, area.small
    top, title_lines, below = _below_title(area, headers, title, note)
    axis_y = round(below + small * 0.9, 1)
    grid_top = round(axis_y + small * 0.45, 1)
    lanes_top = grid_top + small * 0.3
    pill_h = round(small * 1.7, 1)

    def lanes_for(items):
        legend = legend_rows(area, [t for _, _, t in items])
        bottom = legend.top - pad * 0.6 - pill_h - small * 0.4    # the last lane's bottom
        return legend, min(text * 8, (bottom - lanes_top) / ranks)

    # the held activations get a strip under each lane's passes where lanes are tall enough
    legend_items = _legend(trace, drawn, memory=drawn)
    legend, lane_h = lanes_for(legend_items)
    tall = lane_h >= text * 2.8
    if drawn and not tall:
        legend_items = _legend(trace, drawn, memory=False)
        legend, lane_h = lanes_for(legend_items)
    bottom = lanes_top + lane_h * ranks

    # the columns: rank labels on the left, idle share and peak on the right
    every = next((e for e in (1, 2, 4, 8, 16) if e * lane_h >= text * 1.2), 32)
    named = lane_h >= text * 1.4
    label_text = f"rank {ranks - 1}" if named else str(ranks - 1)
    stages_shown = lane_h >= text * 1.3 + small * 1.35 + 6
    stages = trace.rank_stages()
    stage_labels = [draw.stages_label(s) for s in stages] if stages_shown else []
    left = pad + max([text_width(label_text, text, bold=True)]
                     + [text_width(t, small) for t in stage_labels]) + small * 0.8
    side = lane_h >= small * 1.15
    sides = ([f"{1 - line.busy[r] / makespan:.0%} · {trace.memory.peak[r]}" for r in range(ranks)]
             if side else [])
    side_header = "idle · peak" if side else ""
    side_w = max([text_width(t, small) for t in sides + [side_header]] or [0.0])
    pill_w = round(text_width(f"t = {sig4(makespan)}", small, bold=True) + small * 1.4, 1)
    right = width - pad - (side_w + small * 1.2 if side else pill_w / 2)
    tick_w = text_width(sig4(makespan) + "0", small)
    right = min(right, width - pad - tick_w / 2)
    axis = TimeAxis(round(left, 1), round(right, 1), makespan)
    side_x = round((right + small * 1.2 + width - pad) / 2 if side else right, 1)

    band = lane_h * (0.56 if tall else 0.8)
    mem_h = lane_h * 0.28 if drawn and tall else 0.0
    lane_y = [lanes_top + r * lane_h for r in range(ranks)]
    font = small if band - 3 >= small * 1.2 else 0.0
    cursors = np.array([f.time for f in trace.frames])
    frame_of = lambda t: np.minimum(np.searchsorted(cursors[1:], np.asarray(t) - EPS, side="left") + 1,
                                    len(cursors) - 1)

    layers: list[dict[str, str]] = [{"idle": "", "memory": "", "sends": ""} for _ in trace.frames]
    passes: list[Block] = []
    arrows: list[Arrow | None] = []
    if drawn:
        passes = draw.blocks(trace, lane_y, band, axis, font)
        arrows = draw.arrows(trace, lane_y, band, axis)
        draw.memory(trace, layers, lane_y, band, mem_h, axis, frame_of)
        draw.sends(trace, layers, lane_y, band, axis, frame_of)
        draw.idle(trace, layers, lane_y, band, axis, frame_of)

    frames = []
    for f, header in zip(trace.frames[:last + 1], headers):
        marked = drawn and f.hi - f.lo <= 64
        unit = ("before the first pass" if f.step == 0 else
                f"t = {sig4(f.time)} of {sig4(makespan)}: "
                + ("done" if f.phase == "done" else f.phase))
        layer = layers[f.step]
        cursor = axis.x(f.time)
        frames.append(FrameView(f.step, header, unit, round(cursor, 1), f"t = {sig4(f.time)}",
                                round(min(max(cursor, pad + pill_w / 2), width - pad - pill_w / 2), 1),
                                0.0 if drawn else round(right - cursor, 1),
                                tuple(passes[f.lo:f.hi]), layer["idle"], layer["memory"],
                                layer["sends"],
                                tuple(a for a in arrows[f.lo:f.hi] if a) if marked else (),
                                marked and f.hi > f.lo))

    lanes = tuple(Lane(r, round(lane_y[r], 1), round(lane_h, 1),
                       (f"rank {r}" if named else str(r)) if r % every == 0 else "", text,
                       sides[r] if side else "", stage_labels[r] if stages_shown else "")
                  for r in range(ranks))
    count = max(2, min(8, int((right - left) / (tick_w + small * 2))))
    ticks = tuple((round(axis.x(t), 1), sig4(t)) for t in linear_ticks(0, makespan, count)
                  if t <= makespan + EPS)
    return Deck(width, height, box, title, title_lines, (top.header_x, top.header_y, area.head),
                drawn, lanes, ticks, tuple(frames), _placed(legend_items, legend),
                legend.swatch, note, side_header,
                _ghost(passes, round(band - 3, 1)) if drawn else (),
                {} if drawn else draw.slices(trace, lane_y, band, axis),
                round(band - 3, 1), font, small, axis_y, grid_top, round(bottom, 1), side_x,
                pill_w, axis.left, axis.right)


def _below_title(area: Box, headers: list[str], title: str, note: str
                 ) -> tuple[Heading, tuple[tuple[float, float, str], ...], float]:
    """The top band, the title's lines (and the note's under them, for a summarised timeline)
    and where the drawing below them may start."""
    width, pad, small = area.width, area.pad, area.small
    top = heading(area, headers, title)
    title_lines, below = top.title, top.top
    if note:
        lines = wrap(note, small, width - 2 * pad)
        title_lines += tuple((width - pad, round(below + small * (0.9 + LINE * k), 1), t)
                             for k, t in enumerate(lines))
        below += small * LINE * len(lines) + pad * 0.3
    return top, title_lines, below


def _header(f) -> str:
    return ("Before the first pass" if f.step == 0 else
            f"Done · t = {sig4(f.time)}" if f.phase == "done" else f"t = {sig4(f.time)} · {f.phase}")


def _ghost(passes: list[Block], band: float) -> tuple[tuple[str, str], ...]:
    """Every pass as a faint rectangle, one path per kind (I with B: the same colour)."""
    out = []
    for kinds in (("F",), ("B", "I"), ("W",)):
        mine = [b for b in passes if b.kind in kinds]
        if mine:
            out.append((pass_fill(kinds[0], 4, 8),
                        draw.rects_path([b.x for b in mine], [b.x + b.w for b in mine],
                                        [b.y for b in mine], [band] * len(mine))))
    return tuple(out)


def _legend(trace, drawn: bool, memory: bool) -> list[tuple[str, str, str]]:
    """(kind, fill, text) of each legend item."""
    kinds = sorted({KINDS[k] for k in np.unique(trace.flat.kind).tolist()}, key=KINDS.index)
    if drawn:
        short = {"F": "F forward", "B": "B backward", "I": "I backward (inputs)",
                 "W": "W backward (weights)"}
        items = [("todo", "", "faint: to come")]
        items += [(k, pass_fill(k, 4, 8), short[k]) for k in kinds]
        items.append(("mb", "", "label, shade = micro-batch"))
    else:
        items = [("F", SUMMARY_COLOURS["F"], "forward"),
                 ("B", SUMMARY_COLOURS["back"], "backward" + (" (B or I)" if "I" in kinds else ""))]
        if "W" in kinds:
            items.append(("W", SUMMARY_COLOURS["W"], "weight gradients"))
    items.append(("idle", "", "idle" if drawn else "empty: idle (bubble)"))
    if memory:
        items.append(("mem", "", "activations held"))
    if drawn and trace.params.t_comm:
        items.append(("send", "", "send"))
    return items


def _placed(items, legend: Legend) -> tuple[tuple[str, str, str, float, float], ...]:
    return tuple((kind, fill, text, x, y) for (kind, fill, text), (x, y) in zip(items, legend.at))
