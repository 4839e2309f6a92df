"""The memory ledger as drawable geometry: a stacked bar against the GPU's capacity on the
left, a treemap of every ledger line on the right, one layer per category so the player builds
the ledger up — parameters, gradients, optimizer states, activations, buffers.

The treemap is squarified (Bruls, Huizing & van Wijk 2000): nested, categories first, each
category's lines inside its rectangle. Every rectangle carries its formula and tag as a
``data-tip`` (the hover text, static/js/tooltip.js); labels are drawn only where they fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.draw.box import Box
from app.draw.layout import LINE, heading, legend_rows
from app.draw.palette import CATEGORY, ramp, text_on
from app.draw.plot import linear_ticks
from app.draw.text import fits, text_width, wrap
from app.draw.widen import least_box
from app.humanize import human_bytes
from app.sim.memory.ledger import CATEGORIES, GiB, Item

MIN_WIDTH, MIN_HEIGHT = 560, 320
"""The smallest box the ledger is laid out for: a narrower frame (a phone) scrolls it; at large
type it is laid out wider for its headers and taller for its plot (:func:`least_box`)."""

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
    size: float = 16
    anchor: str = "start"
    fill: str = ""            # a colour, or "" to take the colour of ``cls`` from the theme
    weight: int = 400
    cls: str = "ink"          # ink | muted | good | bad


@dataclass(frozen=True)
class Tile:
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
    bar: Tile | None
    tiles: tuple[Tile, ...]
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
    box: Box
    """the box asked for (its bucket is the deck's ``data-box``); width × height is what it
    was laid out in (wider on a phone: :data:`MIN_WIDTH`; wider and taller at large type)"""
    label: str
    """the deck's title, whole (its accessible name)"""
    title: tuple[Text, ...]
    header: Text
    """where each layer writes its header (the text is the layer's)"""
    ticks: tuple[Text, ...]
    gridlines: tuple[float, ...]
    capacity_y: float
    capacity: tuple[Text, ...]
    layers: tuple[Layer, ...]
    swatch: float
    """the side of a legend swatch"""
    hatch_legend: Text | None = None
    bar_left: float = 0.0
    bar_right: float = 0.0
    bar_bottom: float = 0.0


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


def item_tiles(items: list[Item], category: str, rect, box: Box) -> tuple[Tile, ...]:
    items = sorted((i for i in items if i.bytes > 0), key=lambda i: -i.bytes)
    x, y, w, h = rect
    tiles = []
    for k, (item, (bx, by, bw, bh)) in enumerate(zip(items, squarify(
            [i.bytes for i in items], x, y, w, h))):
        fill = shade(COLOURS[category], k, len(items))
        ink = text_on(fill)
        labels = tile_labels(item.label, human_bytes(item.bytes), bx, by, bw, bh, ink, box)
        tiles.append(Tile(round(bx, 1), round(by, 1), round(bw, 1), round(bh, 1), fill,
                          hover(item), item.tag == "assumption", tuple(labels)))
    return tuple(tiles)


def tile_labels(label: str, value: str, x: float, y: float, w: float, h: float, ink: str,
                box: Box) -> tuple[Text, ...]:
    """The item's name (wrapped to the tile) and bytes, at the label size or the small one,
    whichever fits first; the bytes alone when the name does not; nothing when neither does
    (the hover still tells)."""
    for size in (box.text, box.small):
        inset = size * 0.45
        room_w, room_h = w - 2 * inset, h - 2 * inset
        lines = wrap(label, size, room_w, bold=True)
        rows = len(lines) + 1
        if (lines and rows * size * LINE <= room_h + size * 0.3
                and all(fits(line, size, room_w, bold=True) for line in lines)
                and fits(value, size, room_w)):
            step = size * LINE
            texts = [Text(round(x + inset, 1), round(y + inset + size * 0.9 + k * step, 1), line,
                          size, fill=ink, weight=600) for k, line in enumerate(lines)]
            return (*texts, Text(round(x + inset, 1),
                                 round(y + inset + size * 0.9 + len(lines) * step, 1), value,
                                 size, fill=ink))
    size = box.small
    inset = size * 0.45
    if h >= size * 1.25 + 2 * inset * 0.6 and fits(value, size, w - 2 * inset, bold=True):
        return (Text(round(x + inset, 1), round(y + inset * 0.6 + size * 0.95, 1), value, size,
                     fill=ink, weight=600),)
    return ()


def bar_labels(category: str, total: float, top: float, bottom: float, cap_y: float,
               left: float, right: float, box: Box) -> list[Text]:
    """Name and bytes (or bytes alone) at the top of a bar segment — or just below the
    capacity line when that line crosses where they would go."""
    size = box.small
    x, ink = (left + right) / 2, text_on(COLOURS[category])
    lines = [(LEGEND[category], 600), (human_bytes(total), 400)]
    if not fits(LEGEND[category], size, right - left - size * 0.6, bold=True):
        lines = lines[1:]
    if not fits(lines[-1][0], size, right - left - size * 0.4):
        return []
    step = size * LINE
    while lines:
        tall = step * len(lines)
        start = top if not top - 4 <= cap_y <= top + tall + 4 else cap_y + 4
        if start + tall + 2 <= bottom:
            return [Text(x, round(start + size * 0.95 + k * step, 1), text, size, "middle", ink,
                         weight) for k, (text, weight) in enumerate(lines)]
        lines = lines[1:] if len(lines) > 1 else []
    return []


def unit_of(limit: float) -> tuple[float, str]:
    for size, name in ((2**60, "EiB"), (2**50, "PiB"), (2**40, "TiB"), (GiB, "GiB"),
                       (2**20, "MiB")):
        if limit >= size:
            return size, name
    return 1024, "KiB"


def _least_height(area: Box, title: str, legend_texts: list[str]) -> float:
    """The height the ledger needs at ``area``'s type: the top band, the legend's rows, and
    between them a plot as tall as the capacity's column (the GPU's name above its line, three
    small lines under it) and at least two ticks' labels apart."""
    small, text = area.small, area.text
    top = heading(area, HEADERS, title).top
    legend = area.height - legend_rows(area, legend_texts).top
    plot = max(text * LINE + 3 * small * LINE + small, small * 5)
    return top + small * 0.6 + plot + area.pad + legend


def _least_width(area: Box, words: list[tuple[str, bool, int]]) -> float:
    """The width the ledger needs at ``area``'s type: the bar's axis (a tick as wide as
    "800 GiB"), the bar, the capacity's column (``words``: its texts, at the label size or the
    small one, and their weights) and a treemap five labels wide."""
    small, text, pad = area.small, area.text, area.pad
    column = max(text_width(t, text if label else small, bold=w > 400) for t, label, w in words)
    return (pad + text_width("800 GiB", small) + small * 0.6 + text_width("999 GiB", small)
            + small + small * 0.7 + column + pad + text * 5 + pad)


def build_deck(trace, title: str, box: Box) -> Deck:
    """The ledger laid out for ``box``: the header and title along the top, the legend's rows
    along the bottom, and between them the bar's axis, the bar, the capacity's column and the
    treemap, each as wide as its texts at the box's sizes need (the treemap takes the rest)."""
    led, gpu = trace.ledger, trace.fit.gpu
    totals = {c: led.bytes(c) for c in CATEGORIES}
    legend_texts = [f"{LEGEND[c]} {human_bytes(totals[c])}" for c in CATEGORIES]
    hatched = any(i.tag == "assumption" and i.bytes > 0 for i in led.items)
    legend_texts += ["assumption"] if hatched else []
    verdict = (f"fits: {human_bytes(trace.fit.free)} free" if trace.fit.fits
               else f"over by {human_bytes(-trace.fit.free)}")
    words = [(gpu.name, True, 700), (human_bytes(gpu.capacity), False, 400),
             (f"peak {human_bytes(led.peak)}", False, 700), (verdict, False, 700)]
    area = least_box(box, MIN_WIDTH, MIN_HEIGHT, HEADERS,
                     lambda a: _least_height(a, title, legend_texts),
                     lambda a: _least_width(a, words))
    width, height = area.width, area.height
    pad, small = area.pad, area.small
    legend = legend_rows(area, legend_texts)
    top = heading(area, HEADERS, title)
    plot_top, plot_bottom = top.top + small * 0.6, legend.top - pad
    limit = max(led.peak, gpu.capacity) * 1.06
    unit, unit_name = unit_of(limit)
    span = plot_bottom - plot_top

    def y_of(value: float) -> float:
        return plot_bottom - value / limit * span

    values = linear_ticks(0, limit / unit, max(2, min(8, int(span / (small * 2.4)))))
    tick_texts = [f"{v:g} {unit_name}" if v else "0" for v in values]
    bar_left = pad + max(text_width(t, small) for t in tick_texts) + small * 0.6
    bar_w = max(text_width("999 GiB", small) + small, min(small * 9.5, width * 0.08))
    bar_right = bar_left + bar_w
    ticks, grid = [], []
    for v, text in zip(values, tick_texts):
        y = y_of(v * unit)
        grid.append(round(y, 1))
        ticks.append(Text(round(bar_left - small * 0.6, 1), round(y + small * 0.35, 1), text,
                          small, "end", cls="muted"))
    cap_y = round(y_of(gpu.capacity), 1)
    column = [(t, area.text if label else small, w) for t, label, w in words]
    col_x = bar_right + small * 0.7
    col_w = max(text_width(t, s, bold=w > 400) for t, s, w in column)
    # the capacity's name above its line, the rest below; moved as a block to stay in the plot
    above = column[0][1] * LINE
    below = sum(s * LINE for _, s, _ in column[1:])
    first = min(max(cap_y - above * 0.35, plot_top + above * 0.75),
                plot_bottom - below - small * 0.2)
    ys, y = [], first
    for k, (_, s, _) in enumerate(column):
        ys.append(round(y, 1))
        y += (above * 0.25 + s * 1.1) if k == 0 else s * LINE
    kinds = ("ink", "ink", "ink", "good" if trace.fit.fits else "bad")
    placed = [Text(round(col_x, 1), yy, t, s, weight=w, cls=c)
              for (t, s, w), yy, c in zip(column, ys, kinds)]
    capacity, notes_at = tuple(placed[:2]), placed[2:]
    map_left = col_x + col_w + pad
    map_right, map_top, map_bottom = width - pad, top.top, plot_bottom + small * 0.6
    groups = [c for c in CATEGORIES if totals[c] > 0]
    ordered = sorted(groups, key=lambda c: -totals[c])
    rects = dict(zip(ordered, squarify([totals[c] for c in ordered], map_left, map_top,
                                       map_right - map_left, map_bottom - map_top)))
    layers, below_total = [], 0.0
    for k, category in enumerate(CATEGORIES):
        total = totals[category]
        bar = None
        if total > 0:
            seg_top, seg_bottom = y_of(below_total + total), y_of(below_total)
            labels = bar_labels(category, total, seg_top, seg_bottom, cap_y, bar_left,
                                bar_right, area)
            bar = Tile(round(bar_left, 1), round(seg_top, 1), round(bar_w, 1),
                       round(seg_bottom - seg_top, 1), COLOURS[category],
                       bar_hover(category, led.items, total), False, tuple(labels))
            below_total += total
        items = [i for i in led.items if i.category == category]
        rect = rects.get(category)
        tiles = item_tiles(items, category, rect, area) if rect else ()
        sx, sy = legend.at[k]
        text = Text(round(sx + legend.text_dx, 1), round(sy + legend.text_dy, 1),
                    legend_texts[k], small)
        layers.append(Layer(k, HEADERS[k], bar, tiles,
                            tuple(round(v, 1) for v in rect) if rect else None,
                            (text,), (sx, sy, COLOURS[category]),
                            tuple(notes_at) if k == len(CATEGORIES) - 1 else (),
                            f"ledger line {k + 1} of {len(CATEGORIES)}: {LEGEND[category]}"))
    hatch = None
    if hatched:
        sx, sy = legend.at[-1]
        hatch = Text(round(sx + legend.text_dx, 1), round(sy + legend.text_dy, 1),
                     "assumption", small)
    titles = tuple(Text(x, y, line, small, "end", cls="muted") for x, y, line in top.title)
    return Deck(width, height, box, title, titles,
                Text(top.header_x, top.header_y, "", area.head, weight=700), tuple(ticks),
                tuple(grid), cap_y, capacity, tuple(layers), legend.swatch, hatch,
                round(bar_left, 1), round(bar_right, 1), round(plot_bottom, 1))
