"""The planner's deck: every mix as a point (peak memory × tokens/s), the Pareto front and the
best mix, then the best mix's time budget as a stacked bar. Frames add layers."""

from __future__ import annotations

from markupsafe import Markup

from app.draw.svg import deck_end, deck_open, esc

W, H = 960, 540
PX, PY, PW, PH = 80, 60, 520, 400
COLOURS = {"compute": "#0072B2", "tp": "#E69F00", "cp": "#56B4E9", "ep": "#009E73",
           "pp": "#F0E442", "dp": "#D55E00", "bubble": "#CC79A7", "optimizer": "#999999"}


def pareto(points):
    front, best = [], -1.0
    for mem, tps, fits in sorted((p for p in points if p[2]), key=lambda p: p[0]):
        if tps > best:
            front.append((mem, tps))
            best = tps
    return front


def render(trace, current: int, *, standalone: bool = False, caption=(), style="") -> Markup:
    plan = trace.plan
    pts = plan.points
    cap = trace.params.cluster().gpu.capacity / 1e9
    xmax = max([cap * 1.6] + [min(p[0], cap * 3) for p in pts]) if pts else cap * 2
    ymax = max([p[1] for p in pts] + [1.0]) * 1.05

    def x(m):
        return PX + PW * min(m, xmax) / xmax

    def y(t):
        return PY + PH - PH * t / ymax

    out = [deck_open(W, H, "Planner: every mix, memory against throughput", standalone=standalone,
                     style=style),
           f'<rect class="bg" x="0" y="0" width="{W}" height="{H}" fill="#fff"/>']
    layers = []
    f0 = ['<g class="frame" data-frame="0" font-size="17">',
          f'<line x1="{PX}" y1="{PY + PH}" x2="{PX + PW}" y2="{PY + PH}" stroke="#333"/>',
          f'<line x1="{PX}" y1="{PY}" x2="{PX}" y2="{PY + PH}" stroke="#333"/>',
          f'<line x1="{x(cap):.1f}" y1="{PY}" x2="{x(cap):.1f}" y2="{PY + PH}" stroke="#D55E00" '
          f'stroke-dasharray="6 4"/>',
          f'<text x="{x(cap) + 4:.1f}" y="{PY + 14}" fill="#D55E00">{cap:.0f} GB</text>',
          f'<text x="{PX + PW / 2}" y="{PY + PH + 40}" text-anchor="middle">peak memory per GPU (GB)</text>',
          f'<text x="24" y="{PY + PH / 2}" transform="rotate(-90 24 {PY + PH / 2})" '
          f'text-anchor="middle">tokens / s</text>']
    for k in range(6):
        m = xmax * k / 5
        f0.append(f'<text x="{x(m):.1f}" y="{PY + PH + 18}" text-anchor="middle">{m:.0f}</text>')
        t = ymax * k / 5
        f0.append(f'<text x="{PX - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{t / 1e3:,.0f}k</text>')
    for mem, tps, fits in pts:
        f0.append(f'<circle cx="{x(mem):.1f}" cy="{y(tps):.1f}" r="2.5" '
                  f'fill="{"#0072B2" if fits else "#bbbbbb"}" fill-opacity="0.6"/>')
    f0.append("</g>")
    layers.append(f0)
    b = plan.best
    if b:
        front = pareto(pts)
        d = " ".join(f"{'M' if i == 0 else 'L'}{x(m):.1f},{y(t):.1f}" for i, (m, t) in enumerate(front))
        layers.append(['<g class="frame" data-frame="1" font-size="17">',
                       f'<path d="{d}" fill="none" stroke="#000" stroke-width="2"/>',
                       f'<circle cx="{x(b.peak_bytes / 1e9):.1f}" cy="{y(b.tokens_per_s):.1f}" r="7" '
                       f'fill="none" stroke="#D55E00" stroke-width="3"/>',
                       f'<text x="{x(b.peak_bytes / 1e9) + 10:.1f}" y="{y(b.tokens_per_s) - 8:.1f}">'
                       f'best: tp {b.tp} pp {b.pp} dp {b.dp} cp {b.cp}</text>', "</g>"])
        bx, by, bw, bh = 660, PY, 60, PH
        f2 = ['<g class="frame" data-frame="2" font-size="17">',
              f'<text x="{bx}" y="{by - 14}">best mix: {b.step_s:.2f} s a step</text>']
        top = by
        for kind, t in b.budget.items():
            if t <= 0:
                continue
            hgt = bh * t / b.step_s
            f2.append(f'<rect x="{bx}" y="{top:.1f}" width="{bw}" height="{hgt:.1f}" '
                      f'fill="{COLOURS[kind]}" stroke="#fff"/>')
            if hgt >= 12:
                f2.append(f'<text x="{bx + bw + 8}" y="{top + hgt / 2 + 5:.1f}">{esc(kind)} '
                          f'{100 * t / b.step_s:.0f} %</text>')
            top += hgt
        f2.append("</g>")
        layers.append(f2)
    out.append('<g class="frames">')  # what static/js/player.js adds later frames to
    out += [part for layer in layers[:current + 1] for part in layer]
    out.append("</g>")
    out.append(deck_end(standalone, caption, H, (layer for layer in layers[current + 1:])))
    return Markup("".join(out))
