"""The planner's deck: every mix as a point (peak memory × tokens/s), the Pareto front and the
best mix, then the best mix's time budget as a stacked bar beside the chart (drawn dashed, and
said, before it comes). Frames add layers; each names its step in a header line (and in
``data-unit`` for the player's position text). Memory is in GiB throughout, as chapter 1's
ledger and the GPUs' capacities (an "80 GB" H100 holds 80 GiB)."""

from __future__ import annotations

import math
import re

from markupsafe import Markup

from app.draw.plot import linear_ticks
from app.draw.deck import frame_start, step_header, write_deck
from app.draw.svg import esc

GIB = 2 ** 30
HALO = 'paint-order="stroke" stroke="#fff" stroke-width="4" stroke-linejoin="round"'
"""A white outline that keeps a label legible over the scatter's points."""

W, H = 960, 540
PX, PY, PW, PH = 80, 84, 560, 380
BX, BW = 688, 56                  # the time-budget bar, beside the chart
COLOURS = {"compute": "#0072B2", "tp": "#E69F00", "cp": "#56B4E9", "ep": "#009E73",
           "pp": "#F0E442", "dp": "#D55E00", "bubble": "#CC79A7", "optimizer": "#999999"}
LABELS = {"compute": "compute", "tp": "TP comm", "cp": "CP comm", "ep": "EP all-to-all",
          "pp": "PP sends", "dp": "DP / ZeRO comm", "bubble": "bubble", "optimizer": "optimizer"}


def pareto(points):
    front, best = [], -1.0
    for mem, tps, fits, *_ in sorted((p for p in points if p[2]), key=lambda p: p[0]):
        if tps > best:
            front.append((mem, tps))
            best = tps
    return front


def _spread(ys: list[float], gap: float, lowest: float) -> list[float]:
    """Label heights moved apart by at least ``gap``, none below ``lowest`` (top to bottom)."""
    out, last = [], -math.inf
    for y in ys:
        last = max(y, last + gap)
        out.append(last)
    for i in range(len(out) - 1, -1, -1):
        out[i] = min(out[i], lowest if i == len(out) - 1 else out[i + 1] - gap)
    return out


def _rate(t: float) -> str:
    """A tokens/s tick: 0, 250k, 1.5M."""
    if t == 0:
        return "0"
    if t >= 1e6:
        return f"{t / 1e6:g}M"
    return f"{t / 1e3:g}k"


UNITS = ("every mix", "the Pareto front", "the best mix's budget")
"""What each step is (the player's position text)."""


def _header(k: int, text: str) -> str:
    """Frame k's header line, shown while it is current (the style of every deck's header)."""
    return step_header(text, x=20, y=34, size=22, only_current=True)


def _open(k: int) -> str:
    """Frame k's layer (never marked current: every layer stays drawn)."""
    return frame_start(k, -1, UNITS[k], after=' font-size="17"')


def render(trace, current: int, *, standalone: bool = False, caption=(), style="") -> Markup:
    plan = trace.plan
    # memory in GiB, as chapter 1's ledger and the GPUs' capacities (80 GB H100 = 80 GiB)
    pts = [(m * 1e9 / GIB, t, f, tip) for m, t, f, tip in plan.points]
    gpu = trace.params.cluster().gpu
    cap = gpu.capacity / GIB
    edge = max([cap * 1.6] + [min(p[0], cap * 3) for p in pts]) if pts else cap * 2
    xticks = linear_ticks(0, edge, 5)
    xmax = xticks[-1] if xticks[-1] >= edge else xticks[-1] + (xticks[1] - xticks[0])
    xticks = linear_ticks(0, xmax, 5)
    yticks = linear_ticks(0, max([p[1] for p in pts] + [1.0]), 5)
    ymax = max([p[1] for p in pts] + [1.0])
    ymax = yticks[-1] if yticks[-1] >= ymax else yticks[-1] + (yticks[1] - yticks[0])
    yticks = linear_ticks(0, ymax, 5)
    clipped = any(p[0] > xmax for p in pts)

    def x(m):
        return PX + PW * min(m, xmax) / xmax

    def y(t):
        return PY + PH - PH * t / ymax

    layers = []
    p = trace.params
    short = re.sub(r"\s*\d+\s*GB$", "", gpu.name)      # "H100 80 GB" → "H100"
    b = plan.best
    head0 = (f"Every mix: peak memory against tokens/s" if b else
             f"Every mix: none fits in {cap:.0f} GiB")
    f0 = [_open(0), _header(0, head0),
          f'<text class="muted" x="{W - 20}" y="34" text-anchor="end">{p.gpus:,} × {esc(short)} '
          f'· {plan.searched:,} mixes</text>',
          f'<line x1="{PX}" y1="{PY + PH}" x2="{PX + PW}" y2="{PY + PH}" stroke="#333"/>',
          f'<line x1="{PX}" y1="{PY}" x2="{PX}" y2="{PY + PH}" stroke="#333"/>',
          f'<line x1="{x(cap):.1f}" y1="{PY}" x2="{x(cap):.1f}" y2="{PY + PH}" stroke="#D55E00" '
          f'stroke-dasharray="6 4"/>',
          # along the line from the bottom, clear of the best mix's label near the top
          f'<text x="{x(cap) + 18:.1f}" y="{PY + PH - 8}" fill="#D55E00" {HALO} '
          f'transform="rotate(-90 {x(cap) + 18:.1f} {PY + PH - 8})">{esc(short)} holds '
          f'{cap:.0f} GiB</text>',
          f'<text x="{PX + PW / 2}" y="{PY + PH + 42}" text-anchor="middle">peak memory per GPU '
          f'(GiB)</text>',
          f'<text x="22" y="{PY + PH / 2}" transform="rotate(-90 22 {PY + PH / 2})" '
          f'text-anchor="middle">tokens / s</text>',
          # legend: what the two colours mean
          f'<circle cx="{PX + 12}" cy="{PY - 26}" r="6" fill="#0072B2"/>',
          f'<text x="{PX + 24}" y="{PY - 20}">fits</text>',
          f'<circle cx="{PX + 80}" cy="{PY - 26}" r="6" fill="#bbbbbb"/>',
          f'<text x="{PX + 92}" y="{PY - 20}">does not fit</text>']
    if clipped:
        f0.append(f'<text x="{PX + 210}" y="{PY - 20}" fill="#555">(beyond {xmax:g} GiB: drawn at the '
                  f'edge)</text>')
    if b:   # where step 2's bar will stand, and what it will say
        f0.append(f'<rect class="blank" x="{BX}" y="{PY}" width="{BW}" height="{PH}"/>')
        f0.append(_later_note())
    for m in xticks:
        f0.append(f'<text x="{x(m):.1f}" y="{PY + PH + 20}" text-anchor="middle">{m:g}</text>')
    for t in yticks:
        f0.append(f'<text x="{PX - 6}" y="{y(t) + 5:.1f}" text-anchor="end">{_rate(t)}</text>')
    for mem, tps, fits, tip in pts:
        f0.append(f'<circle cx="{x(mem):.1f}" cy="{y(tps):.1f}" r="3" '
                  f'fill="{"#0072B2" if fits else "#bbbbbb"}" fill-opacity="0.6" '
                  f'data-tip="{esc(tip)}"/>')
    f0.append("</g>")
    layers.append(f0)
    if b:
        bmem = b.peak_bytes / GIB
        front = pareto(pts + [(bmem, b.tokens_per_s, True, "")])   # the sample may miss it
        d = " ".join(f"{'M' if i == 0 else 'L'}{x(m):.1f},{y(t):.1f}" for i, (m, t) in enumerate(front))
        layers.append([_open(1), f'<path d="{d}" fill="none" stroke="#000" stroke-width="2"/>',
                       f'<circle cx="{x(bmem):.1f}" cy="{y(b.tokens_per_s):.1f}" r="7" '
                       f'fill="none" stroke="#D55E00" stroke-width="3"/>',
                       f'<text x="{x(bmem) + (10 if x(bmem) < PX + PW - 260 else -10):.1f}" '
                       f'y="{y(b.tokens_per_s) - 10:.1f}" {HALO} text-anchor="'
                       f'{"start" if x(bmem) < PX + PW - 260 else "end"}">'
                       f'best: tp {b.tp} pp {b.pp} dp {b.dp} cp {b.cp} ZeRO {b.zero}</text>',
                       _header(1, "The Pareto front and the best mix"),
                       _later_note(), "</g>"])
        bx, by, bw, bh = BX, PY, BW, PH
        f2 = [_open(2), _header(2, f"Where the best mix's {b.step_s:.2f} s step goes"),
              f'<text x="{bx}" y="{PY + PH + 42}">best mix: {b.step_s:.2f} s a step</text>']
        top, labels = by, []
        for kind, t in b.budget.items():
            if t <= 0:
                continue
            hgt = bh * t / b.step_s
            f2.append(f'<rect x="{bx}" y="{top:.1f}" width="{bw}" height="{hgt:.1f}" '
                      f'fill="{COLOURS[kind]}" stroke="#fff"/>')
            if t >= 0.005 * b.step_s:            # a share that rounds to 1 % or more
                labels.append((top + hgt / 2 + 6, kind, 100 * t / b.step_s))
            top += hgt
        ys = _spread([yy for yy, _, _ in labels], 21, by + bh + 6)
        for yy, (mid, kind, pct) in zip(ys, labels):
            f2.append(f'<line x1="{bx + bw}" y1="{mid - 6:.1f}" x2="{bx + bw + 6}" '
                      f'y2="{yy - 6:.1f}" stroke="#666"/>')
            f2.append(f'<text x="{bx + bw + 10}" y="{yy:.1f}">{LABELS[kind]} {pct:.0f} %</text>')
        f2.append("</g>")
        layers.append(f2)
    # its own background: white under the scatter, the drawing's height even in a file
    return write_deck(W, H, "Planner: every mix, memory against throughput", layers, current,
                      list, standalone=standalone, caption=caption, style=style, bg=False,
                      under=[f'<rect class="bg" x="0" y="0" width="{W}" height="{H}" '
                             f'fill="#fff"/>'])


def _later_note() -> str:
    """Beside the dashed bar while it is empty (steps 0 and 1): what step 2 will show there."""
    lines = ("step 2: where", "the best mix's", "step time goes")
    return ('<text class="only-current muted">' + "".join(
        f'<tspan x="{BX + BW + 12}" y="{PY + PH / 2 - 22 + 22 * i}">{t}</tspan>'
        for i, t in enumerate(lines)) + "</text>")
