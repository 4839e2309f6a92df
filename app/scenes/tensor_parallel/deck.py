"""The tensor-parallel scene as drawable geometry: the block's data flow along the top, one lane
per rank below, and one frame per step (app/scenes/tensor_parallel/deck_frames.py draws each).

The deck is layered for static/js/player.js: frame k's group covers the frames before it, so
showing frames 0…k shows step k, and the standalone SVG of step k is its group alone. Every
frame highlights the box of the data flow its step belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.sim.tensor_parallel.simulate import TensorParallelTrace
from app.draw.palette import rank_colour
from app.scenes.tensor_parallel.deck_frames import (HEIGHT, LANES_BOTTOM, LANES_TOP, LEFT, NAMES_H, RIGHT, WIDTH,
                                 FrameView, Text, source_colour, step_frame)

FLOW_TOP, FLOW_H = 50, 66
HEADER_FONT, HEADER_EM = 21.0, 0.6
HEADER_ROOM = WIDTH - 20 - 300      # the deck's title takes the top right corner
SHORT_TITLES = {"column": "column-parallel", "row": "row-parallel", "mlp": "MLP",
                "attention": "attention", "embedding": "embedding + loss"}


@dataclass(frozen=True)
class FlowBox:
    x: float
    y: float
    w: float
    h: float
    label: str
    lines: tuple[str, ...]
    region: str


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    title: str
    flow: tuple[FlowBox, ...]
    flow_arrows: tuple[tuple[float, float, float], ...]     # x0, x1, y
    lanes: tuple[tuple[float, float], ...]                   # top, bottom of each rank's lane
    lane_labels: tuple[Text, ...]
    swatches: tuple[tuple[float, float, float, str], ...]    # cx, cy, r, colour
    frames: tuple[FrameView, ...]
    legend: tuple[tuple[str, str, float, str], ...]         # kind, text, x, colour


def _flow(trace: TensorParallelTrace) -> tuple[tuple[FlowBox, ...], tuple, dict[str, int]]:
    nodes = trace.result.flow
    label_w = [max(len(n.label) * 10.0, *(len(line) * 8.0 for line in n.detail.split(" · ")))
               + 22 for n in nodes]
    gap = 30.0
    total = sum(label_w) + gap * (len(nodes) - 1)
    squeeze = min(1.0, (RIGHT - 18) / total)
    x = 18 + max(0.0, (RIGHT - 18 - total) / 2)
    boxes, arrows, index = [], [], {}
    for k, (node, w) in enumerate(zip(nodes, label_w)):
        w *= squeeze
        boxes.append(FlowBox(round(x, 1), FLOW_TOP, round(w, 1), FLOW_H, node.label,
                             tuple(node.detail.split(" · ")), node.region))
        index[node.key] = k
        if k < len(nodes) - 1:
            arrows.append((round(x + w + 3, 1), round(x + w + gap * squeeze - 3, 1),
                           FLOW_TOP + FLOW_H / 2))
        x += w + gap * squeeze
    return tuple(boxes), tuple(arrows), index


def _lanes(tp: int) -> tuple[tuple[float, float], ...]:
    top = LANES_TOP + NAMES_H
    height = (LANES_BOTTOM - top) / tp
    gap = min(14.0, height * 0.18)
    return tuple((round(top + r * height + gap / 2, 1), round(top + (r + 1) * height - gap / 2, 1))
                 for r in range(tp))


def _names(trace: TensorParallelTrace) -> tuple[list[str], list[str]]:
    """Each step's deck header ("Forward 1/2 · column-parallel matmul:  Y = XA", the formula
    dropped when it would not fit beside the title) and its name for the player's position
    text ("forward 1 of 2: column-parallel matmul", "backward 3 of 4: all-reduce", "check:
    gradients")."""
    steps = trace.result.steps
    totals = {p: sum(1 for s in steps if s.pass_ == p) for p in ("forward", "backward")}
    seen = {"forward": 0, "backward": 0}
    headers, units = [], []
    for s in steps:
        if s.pass_ in seen:
            seen[s.pass_] += 1
            head = f"{s.pass_.capitalize()} {seen[s.pass_]}/{totals[s.pass_]} · {s.title}"
            units.append(f"{s.pass_} {seen[s.pass_]} of {totals[s.pass_]}: {s.title}")
        elif s.kind == "check":
            head = f"Check · {s.title}"
            units.append(f"check: {s.title}")
        else:
            head = "Before · what each rank holds"
            units.append("before the forward pass")
        full = head + (f":  {s.formula}" if s.formula else "")
        # the header shares the top line with the deck's title: drop the formula if too long
        headers.append(full if len(full) * HEADER_EM * HEADER_FONT <= HEADER_ROOM else head)
    return headers, units


def build_deck(trace: TensorParallelTrace, only: int | None = None) -> Deck:
    """Every frame, or frame ``only`` alone (a standalone export)."""
    p = trace.params
    tp = p.tp
    colour = source_colour(tp)
    boxes, flow_arrows, index = _flow(trace)
    lanes = _lanes(tp)
    headers, units = _names(trace)
    frames = []
    for k, step in enumerate(trace.result.steps):
        if only is not None and k != only:
            continue
        box = boxes[index[step.flow]] if step.flow in index else None
        highlight = (box.x - 4, box.y - 4, box.w + 8, box.h + 8) if box else None
        frames.append(replace(step_frame(k, step, tp, lanes, colour, headers[k], highlight),
                              unit=units[k]))
    label_size = 18.0 if tp <= 4 else 16.0
    lane_labels = tuple(Text(LEFT - 16, round((a + b) / 2 + 6, 1),
                             f"rank {r}" if tp <= 8 else f"r{r}", label_size, anchor="end",
                             weight="700") for r, (a, b) in enumerate(lanes))
    swatches = tuple((24.0, round((a + b) / 2, 1), min(9.0, (b - a) * 0.3), rank_colour(r, tp))
                     for r, (a, b) in enumerate(lanes))
    title = (f"{SHORT_TITLES[p.block]} · tp {tp} · {p.tokens} tokens"
             f"{' · SP' if p.sequence_parallel else ''}")
    return Deck(WIDTH, HEIGHT, title, boxes, flow_arrows, lanes, lane_labels, swatches,
                tuple(frames), _legend(tp))


def _legend(tp: int) -> tuple[tuple[str, str, float, str], ...]:
    items = [("ranks", "one rank's shard or partial sum"),
             ("grey", "the same on every rank"),
             ("dark", "just summed over every rank"),
             ("shade", "pale → deep: small → large value")]
    out, x = [], 22.0
    for kind, text in items:
        swatch_w = 22 * min(tp, 4) if kind == "ranks" else 22
        out.append((kind, text, x, ""))
        x += swatch_w + 8 + len(text) * 7.9 + 30
    return tuple(out)
