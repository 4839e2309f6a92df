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

from app.sim.pipeline.simulate import PipelineTrace
from app.sim.pipeline.captions import EPS
from app.humanize import sig4
from app.sim.pipeline.orders import SCHEDULE_KINDS
from app.sim.pipeline.schedules import KINDS
from app.scenes.pipeline import deck_layers as draw
from app.scenes.pipeline.deck_layers import LEFT, RIGHT, SUMMARY_COLOURS, Arrow, Block, pass_fill, x_of
from app.draw.plot import linear_ticks

WIDTH, HEIGHT = 1280, 720
TOP, BOTTOM = 100.0, 648.0           # the lanes
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
    title: str
    drawn: bool
    lanes: tuple[Lane, ...]
    ticks: tuple[tuple[float, str], ...]
    frames: tuple[FrameView, ...]
    legend: tuple[tuple[str, str, str, float], ...]
    """(kind, fill, text, x)"""
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
    bottom: float
    """the bottom of the last lane"""
    left: float = LEFT
    right: float = RIGHT


def build_deck(trace: PipelineTrace, upto: int | None = None) -> Deck:
    """Every frame of ``trace`` (or frames 0…``upto`` for a standalone export)."""
    p = trace.params
    flat, line = trace.flat, trace.line
    ranks, makespan = p.stages, line.makespan
    drawn = ranks <= DRAW_RANKS and flat.ids.size <= DRAW_PASSES
    lane_h = min(140.0, (BOTTOM - TOP) / ranks)
    band = lane_h * (0.56 if lane_h >= 44 else 0.8)
    mem_h = lane_h * 0.28 if drawn and lane_h >= 44 else 0.0
    lane_y = [TOP + r * lane_h for r in range(ranks)]
    last = len(trace.frames) - 1 if upto is None else upto
    cursors = np.array([f.time for f in trace.frames])
    frame_of = lambda t: np.minimum(np.searchsorted(cursors[1:], np.asarray(t) - EPS, side="left") + 1,
                                    len(cursors) - 1)

    layers: list[dict[str, str]] = [{"idle": "", "memory": "", "sends": ""} for _ in trace.frames]
    passes: list[Block] = []
    arrows: list[Arrow | None] = []
    if drawn:
        passes = draw.blocks(trace, lane_y, band, makespan)
        arrows = draw.arrows(trace, lane_y, band, makespan)
        draw.memory(trace, layers, lane_y, band, mem_h, makespan, frame_of)
        draw.sends(trace, layers, lane_y, band, makespan, frame_of)
        draw.idle(trace, layers, lane_y, band, makespan, frame_of)

    frames = []
    for f in trace.frames[:last + 1]:
        marked = drawn and f.hi - f.lo <= 64
        header = "Before the first pass" if f.step == 0 else (
            f"Done · t = {sig4(f.time)}" if f.phase == "done" else f"t = {sig4(f.time)} · {f.phase}")
        unit = ("before the first pass" if f.step == 0 else
                f"t = {sig4(f.time)} of {sig4(makespan)}: "
                + ("done" if f.phase == "done" else f.phase))
        layer = layers[f.step]
        cursor = x_of(f.time, makespan)
        frames.append(FrameView(f.step, header, unit, round(cursor, 1), f"t = {sig4(f.time)}",
                                round(min(max(cursor, LEFT + 40), RIGHT + 40), 1),
                                0.0 if drawn else round(RIGHT - cursor, 1),
                                tuple(passes[f.lo:f.hi]), layer["idle"], layer["memory"],
                                layer["sends"],
                                tuple(a for a in arrows[f.lo:f.hi] if a) if marked else (),
                                marked and f.hi > f.lo))

    font = min(18.0, max(16.0, lane_h * 0.36))
    every = 1 if lane_h >= 14 else 4 if lane_h >= 5 else 8
    stages = trace.rank_stages()
    lanes = tuple(Lane(r, round(lane_y[r], 1), round(lane_h, 1),
                       (f"rank {r}" if lane_h >= 14 else str(r)) if r % every == 0 else "", font,
                       (f"{1 - line.busy[r] / makespan:.0%} · {trace.memory.peak[r]}"
                        if lane_h >= 14 else ""),
                       draw.stages_label(stages[r]) if lane_h >= 44 else "")
                  for r in range(ranks))
    kind = SCHEDULE_KINDS[p.schedule]
    chunks = f" × {p.chunks} chunks" if p.chunks > 1 else ""
    title = (f"{kind.title} · {ranks} rank{'s' if ranks > 1 else ''}{chunks} · "
             f"{p.microbatches} micro-batch{'es' if p.microbatches > 1 else ''}")
    note = "" if drawn else (f"{flat.ids.size:,} passes on {ranks} ranks: each lane shows, per "
                             f"slice of time, how much of it the rank spent on each kind of pass")
    ticks = tuple((round(x_of(t, makespan), 1), sig4(t)) for t in linear_ticks(0, makespan, 8)
                  if t <= makespan + EPS)
    return Deck(WIDTH, HEIGHT, title, drawn, lanes, ticks, tuple(frames),
                _legend(trace, drawn, mem_h > 0), note, "idle · peak" if lane_h >= 14 else "",
                _ghost(passes, round(band - 3, 1)) if drawn else (),
                {} if drawn else draw.slices(trace, lane_y, band, makespan),
                round(band - 3, 1), round(min(16.0, band * 0.5), 1),
                round(lane_y[-1] + lane_h, 1))


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


def _legend(trace, drawn: bool, memory: bool) -> tuple[tuple[str, str, str, float], ...]:
    kinds = sorted({KINDS[k] for k in np.unique(trace.flat.kind).tolist()}, key=KINDS.index)
    if drawn:
        short = {"F": "F forward", "B": "B backward", "I": "I backward (inputs)",
                 "W": "W backward (weights)"}
        items = [(k, pass_fill(k, 4, 8), short[k]) for k in kinds]
        items.append(("mb", "", "label, shade = micro-batch"))
    else:
        items = [("F", SUMMARY_COLOURS["F"], "forward"),
                 ("B", SUMMARY_COLOURS["back"], "backward" + (" (B or I)" if "I" in kinds else ""))]
        if "W" in kinds:
            items.append(("W", SUMMARY_COLOURS["W"], "weight gradients"))
    if drawn:
        items.insert(0, ("todo", "", "faint: to come"))
    items.append(("idle", "", "idle" if drawn else "empty: idle (bubble)"))
    if memory:
        items.append(("mem", "", "activations held"))
    if drawn and trace.params.t_comm:
        items.append(("send", "", "send"))
    def width(texts):                  # 16-unit text: at 7.8 a character the swatches touched
        return sum(28 + len(t) * 9.2 + 24 for t in texts)
    if width(t for _, _, t in items) > WIDTH - 30:
        items = [(k, f, "label = micro-batch" if k == "mb" else t) for k, f, t in items]
    out, x = [], 22.0
    for kind, fill, text in items:
        out.append((kind, fill, text, round(x, 1)))
        x += width([text])
    return tuple(out)
