"""``/planner/accuracy``: the accuracy ledger as a page — a predicted-vs-published scatter with
the y = x line and the ±15 % band, and the table of every row.

The papers report different numbers (TFLOP/s or MFU per GPU, tokens per second per GPU, an
iteration time), so the scatter puts every row in one unit, tokens per second per GPU: the
planner's prediction in that unit, and the published value turned into it by the same ratio
(a throughput scales as tokens/s, a step time as its inverse). A point on the diagonal is a
row the planner reproduces; its distance from it, the error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from urllib.parse import urlencode

from app.draw.palette import SERIES
from app.sim.planner.ledger import GOALS, Ledger, LedgerRow
from app.sim.planner.published import FAMILY_NOTES, METRICS

SHAPES = ("circle", "square", "triangle", "diamond", "cross")
"""One marker shape per paper, so the series differ in more than colour."""
WIDTH, HEIGHT = 760, 600
LEFT, RIGHT, TOP, BOTTOM = 96.0, WIDTH - 48.0, 28.0, HEIGHT - 70.0
BAND = GOALS["max_abs_error"]


def tokens_per_gpu(row: LedgerRow) -> tuple[float, float]:
    """(published, predicted) tokens/s per GPU of a row."""
    predicted = row.predicted.tokens_per_s / row.run.setup["gpus"]
    ratio = row.run.value / row.value
    published = predicted / ratio if row.run.metric == "step_s" else predicted * ratio
    return published, predicted


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    shape: str
    colour: str
    family: str
    title: str


@dataclass(frozen=True)
class Scatter:
    width: int
    height: int
    left: float
    right: float
    top: float
    bottom: float
    ticks: tuple[tuple[float, str], ...]       # decades: position along either axis, label
    diagonal: tuple[float, float, float, float]
    band: tuple[tuple[float, float, float, float], ...]
    points: tuple[Point, ...]
    legend: tuple[tuple[str, str, str], ...]   # family, shape, colour


def scatter(led: Ledger) -> Scatter:
    pairs = [tokens_per_gpu(r) for r in led.rows]
    values = [v for pair in pairs for v in pair]
    lo = 10 ** math.floor(math.log10(min(values) / (1 + BAND)))
    hi = 10 ** math.ceil(math.log10(max(values) * (1 + BAND)))
    span = math.log10(hi) - math.log10(lo)

    def sx(v):
        return LEFT + (math.log10(v) - math.log10(lo)) / span * (RIGHT - LEFT)

    def sy(v):
        return BOTTOM - (math.log10(v) - math.log10(lo)) / span * (BOTTOM - TOP)

    families = list(dict.fromkeys(r.run.family for r in led.rows))
    style = {f: (SHAPES[i % len(SHAPES)], SERIES[i % len(SERIES)]) for i, f in enumerate(families)}
    points = []
    for r, (pub, pred) in zip(led.rows, pairs):
        shape, colour = style[r.run.family]
        points.append(Point(round(sx(pub), 1), round(sy(pred), 1), shape, colour, r.run.family,
                            f"{r.run.name}: published {_value(r.run.metric, r.run.value)}, "
                            f"predicted {_value(r.run.metric, r.value)} ({100 * r.error:+.1f} %)"))
    decades = [10 ** k for k in range(round(math.log10(lo)), round(math.log10(hi)) + 1)]
    ticks = tuple((round(sx(d), 1), f"{d:,.0f}" if d >= 1 else f"{d:g}") for d in decades)
    band = tuple((sx(lo), sy(lo * f), sx(hi / f), sy(hi)) if f > 1 else
                 (sx(lo / f), sy(lo), sx(hi), sy(hi * f)) for f in (1 + BAND, 1 - BAND))
    return Scatter(WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM, ticks,
                   (sx(lo), sy(lo), sx(hi), sy(hi)), band, tuple(points),
                   tuple((f, *style[f]) for f in families))


def _value(metric: str, v: float) -> str:
    if metric == "mfu":
        return f"{100 * v:.1f} % MFU"
    if metric == "step_s":
        return f"{v:.2f} s"
    if metric == "tflops_per_gpu":
        return f"{v:.0f} TFLOP/s"
    return f"{v:,.0f} tokens/s"


def rows(led: Ledger) -> list[dict]:
    out = []
    for r in led.rows:
        pub, pred = tokens_per_gpu(r)
        b = r.best
        out.append({"row": r, "metric": METRICS[r.run.metric],
                    "published": _value(r.run.metric, r.run.value),
                    "predicted": _value(r.run.metric, r.value),
                    "error": r.error, "within": abs(r.error) <= BAND,
                    "layout": _layout(r.run.layout), "predicted_mix": r.predicted,
                    "best": f"tp {b.tp} pp {b.pp}{f' v {b.chunks}' if b.chunks > 1 else ''} "
                            f"dp {b.dp} cp {b.cp}{f' ep {b.ep}' if b.ep > 1 else ''} "
                            f"ZeRO {b.zero} b {b.micro_batch} {b.recompute}",
                    "tokens": (pub, pred), "href": planner_url(r.run.query)})
    return out


def planner_url(query: dict) -> str:
    """/planner opened on a row's query (booleans as the forms send them)."""
    return "/planner?" + urlencode({k: str(v).lower() if isinstance(v, bool) else v
                                    for k, v in query.items()})


def _layout(layout: dict) -> str:
    keys = ("tp", "pp", "chunks", "dp", "cp", "ep", "zero", "micro_batch", "schedule")
    names = {"chunks": "v", "micro_batch": "b", "zero": "ZeRO"}
    return " ".join(f"{names.get(k, k)} {layout[k]}" for k in keys if k in layout)


def view(led: Ledger) -> dict:
    within = sum(abs(r.error) <= BAND for r in led.rows)
    return {"scatter": scatter(led), "rows": rows(led), "ledger": led, "goals": GOALS,
            "within": within, "metrics": METRICS, "family_notes": tuple(FAMILY_NOTES.items()),
            "worst": max(led.rows, key=lambda r: abs(r.error)),
            "lowest_ratio": min(led.rows, key=lambda r: r.best_ratio)}
