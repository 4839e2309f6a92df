"""The ZeRO deck's memory panel, laid out for its box: one GPU's model states for the real-sized
model (Ψ parameters, mixed-precision Adam: ZeRO's 2Ψ + 2Ψ + 12Ψ bytes) as a bar that each phase
redraws, DDP's 16Ψ as a dashed outline for scale, the phase's total and what the step has sent.

The panel is as wide as its widest text over every frame (a segment's "Adam states 22.5 GB"
beside the bar, the total, "sent this step: …"), so stepping never moves it; its title and the
model's line wrap to that width and are left out where the bar would get too short. Segment
labels keep a label's height apart, moved off their segment where segments are thin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.draw.box import Box
from app.draw.layout import LINE
from app.draw.palette import CATEGORY
from app.draw.shapes import Label
from app.draw.text import fits, text_width, wrap
from app.scenes.zero.panels import human_count, human_gb
from app.sim.memory import model_states

SEGMENTS = (("params", "params", CATEGORY["params"]), ("grads", "grads", CATEGORY["grads"]),
            ("optimizer", "Adam states", CATEGORY["optimizer"]))
"""(ModelStates field, label, colour) of the bar's segments, bottom up."""
TITLE = "GPU memory per rank"


@dataclass(frozen=True)
class Segment:
    y: float
    h: float
    colour: str


@dataclass(frozen=True)
class PanelFrame:
    segments: tuple[Segment, ...]
    labels: tuple[Label, ...]
    total: Label
    sent: tuple[Label, ...]


@dataclass(frozen=True)
class Panel:
    left: float
    bar_x: float
    bar_w: float
    title: tuple[Label, ...]          # bold
    subtitle: tuple[Label, ...]       # muted
    ghost: tuple[float, float]        # y and height of DDP's outline
    ghost_label: Label
    frames: tuple[PanelFrame, ...]


def sent_lines(trace, elements: int) -> tuple[str, ...]:
    p = trace.params
    if p.dp < 2:
        return ("one rank: nothing to send",)
    # the real model sends the same multiple of its shard as the tiny model does of its own
    shards = elements / max(1, sum(u.shard for u in trace.training.units))
    scenario = shards * math.ceil(p.param_count / p.dp) * 2
    return (f"sent this step: {elements} elements", f"(Ψ model: {human_gb(scenario)})")


def memory_panel(trace, area: Box, top: float, bottom: float, last: int) -> Panel:
    """The panel between ``top`` and ``bottom`` at the right edge of ``area``, for frames
    0 … ``last``."""
    p = trace.params
    pad, text, small = area.pad, area.text, area.small
    frames = range(len(trace.frames))
    sent, so_far = [], 0
    for k in frames:
        so_far += trace.grids.phases[k].sent
        sent.append(sent_lines(trace, so_far))
    words = [[f"{name} {human_gb(getattr(trace.memory[k], field))}"
              for field, name, _ in SEGMENTS] for k in frames]
    bar_w = round(min(max(small * 2.2, area.width * 0.03), small * 4), 1)
    gap = small * 0.45
    ddp = model_states.per_gpu(p.param_count).total
    ghost_words = f"DDP: {human_gb(ddp)}"
    panel_w = max(bar_w + gap + max(text_width(w, small) for ws in words for w in ws),
                  max(text_width(f"total {human_gb(m.total)}", text, bold=True)
                      for m in trace.memory),
                  max(text_width(line, small) for lines in sent for line in lines),
                  text_width(ghost_words, small))
    left = area.width - pad - panel_w
    bar_x = round(left, 1)
    # the bottom texts: the total, then what was sent, up from ``bottom``
    n_sent = max(len(lines) for lines in sent)
    sent_y = [bottom - small * 0.3 - (n_sent - 1 - j) * small * LINE for j in range(n_sent)]
    total_y = sent_y[0] - small * 0.35 - text * 1.0
    bar_bottom = total_y - text * 0.8 - small * 0.7
    step = small * LINE
    title = wrap(TITLE, small, panel_w, bold=True)
    model = (f"Ψ = {human_count(p.param_count)}", "mixed-precision Adam")
    subtitle = ([", ".join(model)] if fits(", ".join(model), small, panel_w)
                else [line for part in model for line in wrap(part, small, panel_w)])
    for keep in ((title, subtitle), (title, []), ([], [])):
        lines = len(keep[0]) + len(keep[1])
        ghost_y = top + small * 0.8 + lines * step
        bar_top = ghost_y + small * 0.45
        if bar_bottom - bar_top >= small * 4.2:
            break
    title, subtitle = keep
    head = [Label(bar_x, round(top + small * 0.8 + j * step, 1), line, anchor="start",
                  size=small) for j, line in enumerate(title)]
    sub = [Label(bar_x, round(top + small * 0.8 + (len(title) + j) * step, 1), line,
                 anchor="start", size=small) for j, line in enumerate(subtitle)]
    top_bytes = max([ddp] + [m.total for m in trace.memory])
    scale = (bar_bottom - bar_top) / top_bytes
    ghost = (round(bar_bottom - ddp * scale, 1), round(ddp * scale, 1))
    ghost_label = Label(bar_x, round(min(ghost_y, ghost[0] - small * 0.45), 1), ghost_words,
                        "class:muted", anchor="start", size=small)
    out = []
    for k in range(last + 1):
        m = trace.memory[k]
        segments, wanted, y = [], [], bar_bottom
        for (field, _, fill), label in zip(SEGMENTS, words[k]):
            h = getattr(m, field) * scale
            y -= h
            if getattr(m, field) > 0:
                segments.append(Segment(round(y, 1), round(h, 1), fill))
                wanted.append((y + h / 2 + small * 0.35, label))
        ys, lowest = [], bar_bottom + small * 0.2
        for want, _ in wanted:          # bottom up, a label's height apart
            y = min(want, lowest)
            ys.append(y)
            lowest = y - step
        highest = bar_top + small * 0.8      # under DDP's label: those above it are left out
        labels = [Label(round(bar_x + bar_w + gap, 1), round(y, 1), label, anchor="start",
                        size=small) for y, (_, label) in zip(ys, wanted) if y >= highest]
        out.append(PanelFrame(tuple(segments), tuple(labels),
                              Label(bar_x, round(total_y, 1), f"total {human_gb(m.total)}",
                                    anchor="start", size=text),
                              tuple(Label(bar_x, round(sent_y[j], 1), line, "class:muted",
                                          anchor="start", size=small)
                                    for j, line in enumerate(sent[k]))))
    return Panel(round(left, 1), bar_x, bar_w, tuple(head), tuple(sub), ghost, ghost_label,
                 tuple(out))
