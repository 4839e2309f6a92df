"""The memory ledger as drawable geometry: a stacked bar against the GPU's capacity on the
left, a treemap of every ledger line on the right, one layer per category so the player builds
the ledger up — parameters, gradients, optimizer states, activations, buffers.

The treemap is squarified (Bruls, Huizing & van Wijk 2000): nested, categories first, each
category's lines inside its rectangle. Every rectangle carries its formula and tag as a
``data-tip`` (the hover text, static/js/tooltip.js); labels are drawn only where they fit.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from app.sim.memory.ledger import CATEGORIES, GiB, Item
from app.draw.palette import CATEGORY, ramp, text_on
from app.humanize import human_bytes
from app.draw.plot import linear_ticks

WIDTH, HEIGHT = 1280, 720
BAR_LEFT, BAR_RIGHT, BAR_TOP, BAR_BOTTOM = 100, 218, 84, 640
MAP_LEFT, MAP_RIGHT, MAP_TOP, MAP_BOTTOM = 404, 1262, 70, 652
LEGEND_Y = 692
CHAR, CHAR_BOLD = 0.6, 0.74     # DejaVu Sans (bold) widths per em, a little generous
"""Average glyph widths in em of DejaVu Sans (regular, bold), for deciding whether a label
fits (generous: a label that might not fit is not drawn)."""

COLOURS = CATEGORY   # categories' own scheme, never a rank's colour (DESIGN principle 15)
NAMES = {"params": "parameters", "grads": "gradients", "optimizer": "optimizer states",
         "activations": "activations", "buffers": "buffers"}
LEGEND = {"params": "parameters", "grads": "gradients", "optimizer": "optimizer",
          "activations": "activations", "buffers": "buffers"}
TAGS = {"formula": "formula", "assumption": "assumption", "measured": "measured"}
HEADERS = ("Parameters", "+ gradients", "+ optimizer states", "+ activations",
           "+ buffers: does it fit?")


@dataclass(frozen=True)
class Text:
    x: float
    y: float
    text: str
    size: int = 16
    anchor: str = "start"
    fill: str = ""            # a colour, or "" to take the colour of ``cls`` from the theme
    weight: int = 400
    cls: str = "ink"          # ink | muted | good | bad


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    w: float
    h: float
    fill: str
    title: str
    hatched: bool = False
    labels: tuple[Text, ...] = ()


@dataclass(frozen=True)
class Layer:
    index: int
    header: str
    bar: Box | None
    boxes: tuple[Box, ...]
    outline: tuple[float, float, float, float] | None   # the category's treemap rectangle
    legend: tuple[Text, ...]
    swatch: tuple[float, float, str]
    notes: tuple[Text, ...] = ()
    unit: str = ""
    """what the step is, for the player's position text (ledger line 2 of 5: gradients)"""


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    title: Text
    ticks: tuple[Text, ...]
    gridlines: tuple[float, ...]
    capacity_y: float
    capacity: tuple[Text, ...]
    layers: tuple[Layer, ...]
    hatch_legend: Text | None = None
    bar_left: float = BAR_LEFT
    bar_right: float = BAR_RIGHT
    bar_bottom: float = BAR_BOTTOM


def fits(text: str, size: float, width: float, bold: bool = False) -> bool:
    return len(text) * (CHAR_BOLD if bold else CHAR) * size <= width


def squarify(sizes: list[float], x: float, y: float, w: float, h: float
             ) -> list[tuple[float, float, float, float]]:
    """Rectangles of areas proportional to ``sizes`` (sorted descending) tiling (x, y, w, h)."""
    total = sum(sizes)
    if total <= 0 or w <= 0 or h <= 0:
        return [(x, y, 0.0, 0.0) for _ in sizes]
    areas = [s / total * w * h for s in sizes]
    out: list[tuple[float, float, float, float]] = []
    i = 0
    while i < len(areas):
        side = min(w, h)
        row = [areas[i]]
        i += 1
        while i < len(areas) and _worst(row + [areas[i]], side) <= _worst(row, side):
            row.append(areas[i])
            i += 1
        thickness = sum(row) / side if side else 0.0
        offset = 0.0
        for area in row:
            length = area / thickness if thickness else 0.0
            if w >= h:   # lay the row down the left edge
                out.append((x, y + offset, thickness, length))
            else:        # along the top edge
                out.append((x + offset, y, length, thickness))
            offset += length
        if w >= h:
            x, w = x + thickness, w - thickness
        else:
            y, h = y + thickness, h - thickness
    return out


def _worst(row: list[float], side: float) -> float:
    """The worst aspect ratio of a row of areas laid along ``side``."""
    s = sum(row)
    if s <= 0 or side <= 0:
        return float("inf")
    return max(max(side * side * r / (s * s), s * s / (side * side * r)) for r in row if r > 0)


def hover(item: Item) -> str:
    source = f" ({item.source})" if item.source else ""
    return (f"{item.label} = {item.formula} = {human_bytes(item.bytes)} · {TAGS[item.tag]}"
            f"{source} — {item.detail}")


def bar_hover(category: str, items, total: float) -> str:
    """A bar segment's hover: the sum of its lines' formulas (or how many lines it sums)."""
    parts = [i.formula for i in items if i.category == category and i.bytes > 0]
    sum_of = " + ".join(parts) if len(parts) <= 4 else f"the sum of {len(parts)} lines"
    return f"{NAMES[category]} = {sum_of} = {human_bytes(total)}"


def shade(colour: str, k: int, n: int) -> str:
    """The k-th of n shades of a category colour, lighter towards the end."""
    return ramp((colour, "#ffffff"), 0.45 * k / max(n - 1, 1)) if n > 1 else colour


def item_boxes(items: list[Item], category: str, rect) -> tuple[Box, ...]:
    items = sorted((i for i in items if i.bytes > 0), key=lambda i: -i.bytes)
    x, y, w, h = rect
    boxes = []
    for k, (item, (bx, by, bw, bh)) in enumerate(zip(items, squarify(
            [i.bytes for i in items], x, y, w, h))):
        fill = shade(COLOURS[category], k, len(items))
        ink = text_on(fill)
        labels = box_labels(item.label, human_bytes(item.bytes), bx, by, bw, bh, ink)
        boxes.append(Box(round(bx, 1), round(by, 1), round(bw, 1), round(bh, 1), fill,
                         hover(item), item.tag == "assumption", tuple(labels)))
    return tuple(boxes)


def box_labels(label: str, value: str, x: float, y: float, w: float, h: float, ink: str
               ) -> tuple[Text, ...]:
    """The item's name (wrapped to the box) and bytes, at the largest size that fits; the bytes
    alone when the name does not; nothing when neither does (the hover still tells)."""
    for size in (17, 16):
        width = int((w - 12) / (CHAR_BOLD * size))
        lines = textwrap.wrap(label, width, break_long_words=False) if width > 0 else []
        rows = int((h - 8) // (size + 4))
        if lines and len(lines) + 1 <= rows and all(len(line) <= width for line in lines) \
                and len(value) <= width:
            texts = [Text(x + 6, y + 4 + (k + 1) * (size + 4) - 4, line, size, fill=ink,
                          weight=600) for k, line in enumerate(lines)]
            return (*texts, Text(x + 6, y + 4 + (len(lines) + 1) * (size + 4) - 4, value, size,
                                 fill=ink))
    if h >= 24 and fits(value, 16, w - 12, bold=True):
        return (Text(x + 6, y + 20, value, 16, fill=ink, weight=600),)
    return ()


def bar_labels(category: str, total: float, top: float, bottom: float, cap_y: float
               ) -> list[Text]:
    """Name and bytes (or bytes alone) at the top of a bar segment — or just below the
    capacity line when that line crosses where they would go."""
    x, ink = (BAR_LEFT + BAR_RIGHT) / 2, text_on(COLOURS[category])
    lines = [(LEGEND[category], 600), (human_bytes(total), 400)]
    if not fits(LEGEND[category], 16, BAR_RIGHT - BAR_LEFT - 8, bold=True):
        lines = lines[1:]
    while lines:
        start = top if not top - 4 <= cap_y <= top + 18 * len(lines) + 4 else cap_y + 4
        if start + 18 * len(lines) + 2 <= bottom:
            return [Text(x, round(start + 17 * (k + 1), 1), text, 16, "middle", ink, weight)
                    for k, (text, weight) in enumerate(lines)]
        lines = lines[1:] if len(lines) > 1 else []
    return []


def unit_of(limit: float) -> tuple[float, str]:
    for size, name in ((2**60, "EiB"), (2**50, "PiB"), (2**40, "TiB"), (GiB, "GiB"),
                       (2**20, "MiB")):
        if limit >= size:
            return size, name
    return 1024, "KiB"


def build_deck(trace, title: str) -> Deck:
    led, gpu = trace.ledger, trace.fit.gpu
    totals = {c: led.bytes(c) for c in CATEGORIES}
    limit = max(led.peak, gpu.capacity) * 1.06
    unit, unit_name = unit_of(limit)
    span = BAR_BOTTOM - BAR_TOP

    def y_of(value: float) -> float:
        return BAR_BOTTOM - value / limit * span

    ticks, grid = [], []
    for v in linear_ticks(0, limit / unit):
        y = y_of(v * unit)
        grid.append(round(y, 1))
        ticks.append(Text(BAR_LEFT - 10, round(y + 5, 1), f"{v:g} {unit_name}" if v else "0",
                          16, "end"))
    cap_y = round(y_of(gpu.capacity), 1)
    capacity = (Text(BAR_RIGHT + 8, cap_y - 8, gpu.name, 16, weight=600),
                Text(BAR_RIGHT + 8, cap_y + 18, human_bytes(gpu.capacity), 16))
    groups = [c for c in CATEGORIES if totals[c] > 0]
    ordered = sorted(groups, key=lambda c: -totals[c])
    rects = dict(zip(ordered, squarify([totals[c] for c in ordered], MAP_LEFT, MAP_TOP,
                                       MAP_RIGHT - MAP_LEFT, MAP_BOTTOM - MAP_TOP)))
    layers, below, legend_x = [], 0.0, 24.0
    for k, category in enumerate(CATEGORIES):
        total = totals[category]
        bar = None
        if total > 0:
            top, bottom = y_of(below + total), y_of(below)
            labels = bar_labels(category, total, top, bottom, cap_y)
            bar = Box(BAR_LEFT, round(top, 1), BAR_RIGHT - BAR_LEFT, round(bottom - top, 1),
                      COLOURS[category], bar_hover(category, led.items, total),
                      False, tuple(labels))
            below += total
        items = [i for i in led.items if i.category == category]
        rect = rects.get(category)
        boxes = item_boxes(items, category, rect) if rect else ()
        text = f"{LEGEND[category]} {human_bytes(total)}"
        legend = (Text(legend_x + 26, LEGEND_Y + 13, text, 16),)
        swatch = (legend_x, LEGEND_Y, COLOURS[category])
        legend_x += 26 + len(text) * CHAR * 16 + 22
        notes = ()
        if k == len(CATEGORIES) - 1:
            verdict = (f"fits: {human_bytes(trace.fit.free)} free" if trace.fit.fits
                       else f"over by {human_bytes(-trace.fit.free)}")
            notes = (Text((BAR_LEFT + BAR_RIGHT) / 2, round(y_of(led.peak) - 10, 1),
                          f"peak {human_bytes(led.peak)}", 17, "middle", weight=700),
                     Text(BAR_RIGHT + 8, cap_y + 38, verdict, 16, weight=700,
                          cls="good" if trace.fit.fits else "bad"))
        layers.append(Layer(k, HEADERS[k], bar, boxes,
                            tuple(round(v, 1) for v in rect) if rect else None,
                            legend, swatch, notes,
                            f"ledger line {k + 1} of {len(CATEGORIES)}: {LEGEND[category]}"))
    hatch = None
    if any(b.hatched for layer in layers for b in layer.boxes):
        hatch = Text(legend_x + 26, LEGEND_Y + 13, "assumption", 16)
    size = min(20, int((WIDTH - 420) / (CHAR * max(len(title), 1))))
    return Deck(WIDTH, HEIGHT, Text(WIDTH - 18, 34, title, size, "end"), tuple(ticks),
                tuple(grid), cap_y, capacity, tuple(layers), hatch)


