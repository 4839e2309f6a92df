"""What each /parallelism frame draws over the ranks (layout in
:mod:`app.scenes.parallelism.deck`): the groups as arcs between their cells, the cells' notes,
and the frame's panel of text — placed in a :class:`app.draw.column.Column`, so a small box
keeps what matters first and leaves the rest out (never a smaller size). The orders and
torchrun frames (:mod:`app.scenes.parallelism.deck_launch`) cover the ranks and use the whole
body.
"""

from __future__ import annotations

import math

from app.draw.box import Box
from app.draw.column import Column, mono_width
from app.draw.fmt import coord
from app.draw.layout import LINE, Legend
from app.draw.shapes import Path, Rect, Text
from app.draw.text import text_width
from app.scenes.parallelism.deck_geometry import (
    AXIS_COLOURS,
    KINDS,
    LEGEND,
    LINK_COLOURS,
    LINK_NAMES,
    Geometry,
    node_box_of,
)
from app.scenes.parallelism.deck_launch import gb, orders, torchrun
from app.sim.parallelism.layout import DENSE_AXES, Layout


def frame_shapes(trace, k: int, g: Geometry) -> list:
    frame = trace.frames[k]
    phase = frame.phase
    if phase == "mesh":
        return _mesh(trace, g)
    if phase == "groups":
        return _groups(g, frame.axis)
    if phase == "nodes":
        return _nodes(g)
    if phase == "traffic":
        return _traffic(trace, g, frame.axis)
    if phase == "orders":
        return orders(trace, g)
    return torchrun(trace, g)


def _panel(g: Geometry) -> Column:
    f = g.frame
    return Column(f.panel_x, f.top, f.panel_w, f.bottom)


def _formula(layout: Layout) -> str:
    """rank = tp_i + 2·(cp_i + 1·(dp_i + 2·pp_i)) in this layout's order and sizes."""
    size = layout.dense_sizes()
    names = [n for n in layout.names if n != "ep"]
    text = f"{names[-1]}"
    for name in reversed(names[:-1]):
        text = f"{name} + {size[name]}·({text})"
    return "rank = " + text


def _cell_notes(g: Geometry, axis: str | None, coords: bool) -> list:
    """The text under each cell's rank number: its coordinate on ``axis``, or (mesh frame,
    large cells) all four dense coordinates — where the cell holds them at the small size."""
    small = g.frame.box.small
    lines = 2 if coords else 1
    if not g.cells or not (coords or axis) or not g.notes(lines):
        return []
    room = g.side - small * 0.6
    out = []
    texts = []
    for c in g.cells.values():
        co = g.layout.coords(c.rank)
        rows = ([f"t{co['tp']} c{co['cp']}", f"d{co['dp']} p{co['pp']}"] if coords
                else [f"{axis} {co[axis]}"])
        texts.append((c, rows))
    if any(text_width(t, small) > room for _, rows in texts for t in rows):
        return []
    for c, rows in texts:
        y = c.y + c.s * g.number_at + g.font * 0.45 + small * 0.96
        for k, t in enumerate(rows):
            out.append(Text(round(c.x + c.s / 2, 1), round(y + k * small * LINE, 1), t, small,
                            "muted cell-note", "middle"))
    return out


def _mesh(trace, g: Geometry) -> list:
    layout, box = trace.layout, g.frame.box
    shape, names = layout.torch_mesh()
    size = layout.size
    last = layout.world - 1
    co = layout.coords(last)
    col = _panel(g)
    text, small = box.text, box.small
    col.add(f"arange({layout.world}).reshape", text, weight=700)
    col.add(f"Order {trace.params.order}: the first name varies fastest (ep lives in the "
            f"expert layers' mesh).", small)
    col.gap(small)
    col.add(_formula(layout), small, weight=700, mono=True)
    col.gap(small)
    col.add(f"rank {last} → tp {co['tp']}, cp {co['cp']}, dp {co['dp']}, pp {co['pp']}; ep "
            f"{co['ep']}", small)
    col.gap(small)
    if col.add("torch (last dimension fastest):", small, "muted"):
        col.add(f'init_device_mesh("cuda", {tuple(shape)}, mesh_dim_names={names})', small,
                mono=True)
    col.gap(small)
    col.add(f"tp {size['tp']} × cp {size['cp']} × dp {size['dp']} × pp {size['pp']} = "
            f"{layout.world}", small, weight=700)
    notes = _cell_notes(g, None, coords=True)
    if notes:
        col.gap(small)
        col.add("In each cell: t c / d p = its tp, cp, dp, pp coordinates.", small, "muted")
    return col.texts + notes


def _arcs(points: list[tuple[float, float]], bow_at_most: float) -> list[str]:
    """Curved links between consecutive members (bowed, so a link never runs through a cell it
    does not join)."""
    out = []
    for (x1, y1), (x2, y2) in zip(points, points[1:]):
        dx, dy = x2 - x1, y2 - y1
        length = math.hypot(dx, dy) or 1
        bow = min(0.25 * length, bow_at_most)
        mx, my = (x1 + x2) / 2 + dy / length * bow, (y1 + y2) / 2 - dx / length * bow
        out.append(f"M{coord(x1)},{coord(y1)} Q{coord(mx)},{coord(my)} {coord(x2)},{coord(y2)}")
    return out


def _group_shapes(g: Geometry, kind: str, colour_of) -> list:
    """Every group of ``kind`` as arcs on the drawn cells; the first group (rank 0's)
    outlined. ``colour_of(a, b)`` → (colour, dashed) of the link between ranks a and b."""
    layout, f = g.layout, g.frame
    groups = g.groups[kind]
    out: list = []
    if len(groups[0]) < 2:
        return out
    gpn = layout.gpus_per_node
    bow = f.box.text * 2.2
    for i, group in enumerate(groups):
        drawn = [r for r in group if r in g.cells]
        if not drawn:
            continue
        points = [g.centre(r) for r in drawn]
        for (a, b), d in zip(zip(drawn, drawn[1:]), _arcs(points, bow)):
            colour, dashed = colour_of(a, b)
            out.append(Path(d, stroke=colour, width=4.5 if i == 0 else 3.0, dashed=dashed,
                            cls="conn first" if i == 0 else "conn"))
        if i == 0:
            for r in drawn:
                c = g.cells[r]
                out.append(Rect(c.x + 1, c.y + 1, c.s - 2, c.s - 2, cls="first-member",
                                stroke=colour_of(group[0], group[-1])[0]))
    if not g.detailed:   # the first group's other nodes, outlined in the summary grid
        first = groups[0]
        touched: dict[int, int] = {}
        for r in first:
            touched[r // gpn] = touched.get(r // gpn, 0) + 1
        colour = colour_of(first[0], first[-1])[0]
        small = f.box.small
        for node, count in touched.items():
            box = node_box_of(g.boxes, node, False)
            if box is not None and node > 0:
                out.append(Rect(box.x, box.y, box.w, box.h, cls="first-node", stroke=colour))
                out.append(Text(round(box.x + box.w - f.inset, 1),
                                round(box.y + f.inset * 0.4 + small * 0.95, 1), f"{count}",
                                small, "ink", "end", 700))
    return out


def _axis_colour(kind: str):
    colour = AXIS_COLOURS[kind]
    return lambda a, b: (colour, False)


def _groups(g: Geometry, axis: str) -> list:
    layout, box = g.layout, g.frame.box
    text, small = box.text, box.small
    groups = g.groups[axis]
    size = len(groups[0])
    out: list = _group_shapes(g, axis, _axis_colour(axis))
    col = _panel(g)
    swatch = round(text * 1.5, 1)
    y = col.y
    col.add(f"{axis}: {len(groups)} group{'s' if len(groups) > 1 else ''} of {size}", text,
            weight=700, indent=swatch + small * 0.5)
    out.insert(0, Rect(col.x, round(y + text * 0.45, 1), swatch, round(text * 0.45, 1),
                       cls="swatch", fill=AXIS_COLOURS[axis]))
    if size == 1:
        col.add(f"{axis} = 1: every rank is alone on this axis.", small)
    else:
        col.add("crosses nodes → InfiniBand" if layout.crosses_nodes(axis)
                else "inside one node → NVLink", small, weight=700)
        col.gap(small)
        chars = int(col.width // mono_width("0", small))
        room = col.room(small) - 2                    # the gap and the note on the thick line
        shown = min(8, len(groups), room)
        if shown < len(groups):
            shown = min(shown, room - 1)              # and "… k more"
        for grp in groups[:max(0, shown)]:
            line = repr(list(grp))
            if len(line) > chars:         # whole numbers only: cut at a comma
                cut = line[:max(1, chars - 4)]
                line = (cut[:cut.rfind(",")] if "," in cut else cut) + ", …]"
            col.add(line, small, mono=True)
        if 0 < shown < len(groups):
            col.add(f"… {len(groups) - shown} more", small, "muted")
        col.gap(small)
        col.add("thick: the first group (rank 0's)", small, "muted")
    out += col.texts
    out += _cell_notes(g, axis if axis in DENSE_AXES + ("ep",) else None, coords=False)
    return out


def _link_colour(layout: Layout):
    gpn = layout.gpus_per_node

    def colour(a: int, b: int) -> tuple[str, bool]:
        link = "infiniband" if a // gpn != b // gpn else "nvlink"
        return LINK_COLOURS[link], link == "infiniband"
    return colour


def _nodes(g: Geometry) -> list:
    layout, box = g.layout, g.frame.box
    small = box.small
    out: list = [Rect(b.x, b.y, b.w, b.h, cls="node-focus") for b in g.boxes
                 if "more" not in b.cls]
    col = _panel(g)
    col.add(f"{layout.nodes} node{'s' if layout.nodes > 1 else ''} × "
            f"{min(layout.world, layout.gpus_per_node)} GPUs", box.text, weight=700)
    col.add(f"rank r → node r // {layout.gpus_per_node}, local rank r % "
            f"{layout.gpus_per_node}", small, mono=True)
    col.gap(small)
    for kind in KINDS:
        size = len(g.groups[kind][0])
        if size == 1:
            status = "size 1, no traffic"
        else:
            status = ("crosses nodes: InfiniBand" if layout.crosses_nodes(kind)
                      else "inside nodes: NVLink")
        col.add(f"{kind} ({size}): {status}", small)
    col.gap(small)
    col.add("Inside a node GPUs talk over NVLink; between nodes over InfiniBand, about 10× "
            "slower.", small, "muted")
    return out + col.texts


def _traffic(trace, g: Geometry, over: str) -> list:
    layout, box = g.layout, g.frame.box
    text, small = box.text, box.small
    flow = next(f for f in trace.flows if f.over == over)
    out: list = _group_shapes(g, over, _link_colour(layout))
    params = trace.params
    gbs = params.inter_node_gbs if flow.link == "infiniband" else params.intra_node_gbs
    col = _panel(g)
    col.add(f"{flow.group}: {flow.collective}", text, weight=700)
    col.add(f"{gb(flow.bytes_per_step)} per rank per step over {LINK_NAMES[flow.link]} "
            f"({gbs:g} GB/s → {flow.bytes_per_step / (gbs * 1e9) * 1e3:.3g} ms)", small,
            weight=700)
    col.gap(small)
    # every group kind's bytes, this one outlined: all the rows or none
    name_w = max(text_width(f.group, small, True) for f in trace.flows) + small * 0.5
    value_w = max(text_width(gb(f.bytes_per_step), small, True) for f in trace.flows)
    bar_room = col.width - name_w - value_w - small * 0.6
    row = round(small * LINE * 1.35, 1)
    if bar_room >= small * 3 and col.fits(1, small) and \
            col.y + small * LINE + row * len(trace.flows) <= col.bottom:
        col.add("bytes per rank per step, every group", small, "muted")
        biggest = max(f.bytes_per_step for f in trace.flows) or 1
        for f in trace.flows:
            y = col.take(row)
            w = max(2.0, bar_room * f.bytes_per_step / biggest)
            base = round(y + row / 2 + small * 0.35, 1)
            out.append(Text(col.x, base, f.group, small, "ink", weight=700))
            out.append(Rect(round(col.x + name_w, 1), round(y + row * 0.15, 1), round(w, 1),
                            round(row * 0.7, 1),
                            cls="bar " + f.link + (" current-bar" if f is flow else ""),
                            fill=LINK_COLOURS[f.link]))
            out.append(Text(round(col.x + name_w + w + small * 0.4, 1), base,
                            gb(f.bytes_per_step), small, "ink",
                            weight=700 if f is flow else 0))
        col.gap(small)
    col.add(flow.what + ".", small, "muted")
    return out + col.texts


def legend_shapes(area: Box, legend: Legend) -> tuple:
    """The legend's items: a line per link (InfiniBand dashed), a swatch per axis."""
    out: list = []
    small = area.small
    for k, text in enumerate(LEGEND):
        x, y = legend.at[k]
        mid = round(y + legend.swatch / 2, 1)
        if k < 2:
            link = ("nvlink", "infiniband")[k]
            out.append(Path(f"M{coord(x)},{coord(mid)} h{coord(legend.swatch)}",
                            stroke=LINK_COLOURS[link], width=4.0, dashed=link == "infiniband",
                            cls="legend-line"))
        else:
            out.append(Rect(x, y, legend.swatch, legend.swatch, cls="swatch",
                            fill=AXIS_COLOURS[KINDS[k - 2]]))
        out.append(Text(round(x + legend.text_dx, 1), round(y + legend.text_dy, 1), text, small,
                        "muted"))
    return tuple(out)

