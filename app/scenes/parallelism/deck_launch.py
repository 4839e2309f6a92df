"""The /parallelism frames that cover the ranks and use the whole body between the header and
the legend (layout in :mod:`app.scenes.parallelism.deck`): the rank orders compared by the
bytes each puts on InfiniBand, and the launch — torchrun's lines, what each process is told,
the device meshes it builds. Text goes into columns (:class:`app.draw.column.Column`), so a
small box keeps the first lines and rows and leaves the rest out (never a smaller size).
"""

from __future__ import annotations

from app.draw.column import Column, mono_width
from app.draw.layout import LINE
from app.draw.shapes import Rect, Text
from app.draw.text import text_width
from app.scenes.parallelism.deck_geometry import LINK_COLOURS, Geometry


def gb(x: float) -> str:
    return f"{x / 1e9:.3g} GB"


def _cover(g: Geometry) -> Rect:
    f = g.frame
    return Rect(0, f.top - f.box.pad * 0.3, f.box.width,
                f.bottom - f.top + f.box.pad * 0.5, cls="cover")


def orders(trace, g: Geometry) -> list:
    f = g.frame
    text, small = f.box.text, f.box.small
    out: list = [_cover(g)]
    col = Column(f.left, f.top, f.right - f.left, f.bottom)
    col.add("InfiniBand bytes per rank per step, by order (the slowest link's load)", text,
            weight=700)
    orders = trace.orders
    valid = [o for o in orders if o.valid]
    biggest = max((o.inter_node_bytes for o in valid), default=0) or 1
    name_w = max(mono_width(o.order, text) for o in orders) + small
    gap = small * 0.5

    def value(o, crossing: bool) -> str:
        chosen = "   ← chosen" if o.order == trace.params.order else ""
        where = f" · crosses: {', '.join(o.crossing) if o.crossing else 'nothing'}"
        return (f"{gb(o.inter_node_bytes)}, {o.inter_node_s * 1e3:.3g} ms"
                + (where if crossing else "") + chosen)

    crossing = True
    value_w = max(text_width(value(o, True), small, True) for o in valid)
    if col.width - name_w - value_w - gap < small * 4:
        crossing = False
        value_w = max(text_width(value(o, False), small, True) for o in valid)
    bar_room = max(small * 2, col.width - name_w - value_w - gap)
    refusals = ("not allowed: the expert and dense layers would get different pipeline stages",
                "not allowed: expert and dense layers' stages differ", "not allowed")
    refusal = next(t for t in refusals if text_width(t, small) <= col.width - name_w
                   or t == refusals[-1])
    row = round(text * LINE * 1.2, 1)
    for o in orders:
        y = col.take(row)
        if y is None:
            break
        chosen = o.order == trace.params.order
        base = round(y + row / 2 + text * 0.35, 1)
        out.append(Text(col.x, base, o.order, text, "ink", weight=700 if chosen else 0,
                        mono=True))
        x = col.x + name_w
        if not o.valid:
            out.append(Text(round(x, 1), base, refusal, small, "muted"))
            continue
        w = max(2.0, bar_room * o.inter_node_bytes / biggest)
        out.append(Rect(round(x, 1), round(y + row * 0.15, 1), round(w, 1), round(row * 0.7, 1),
                        cls="bar infiniband" + (" current-bar" if chosen else ""),
                        fill=LINK_COLOURS["infiniband"]))
        out.append(Text(round(x + w + gap, 1), base, value(o, crossing), small, "ink",
                        weight=700 if chosen else 0))
    col.gap(small)
    col.add(trace.why_tp_first, small)
    return out + col.texts


COLUMNS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "node", "MASTER_ADDR:PORT", "device")


def torchrun(trace, g: Geometry) -> list:
    """The commands on the left (as many as fit with the device mesh under them), the
    environment each process gets on the right — or under them where the body is narrow."""
    f = g.frame
    text, small = f.box.text, f.box.small
    run, layout = trace.launch, trace.layout
    out: list = [_cover(g)]
    rows = [(p.rank, p.local_rank, p.world_size, p.node, f"{p.master_addr}:{p.master_port}",
             p.device) for p in run.processes]
    gap = small * 1.1
    widths = [max(mono_width(name, small), *(mono_width(str(r[k]), small) for r in rows[:8]))
              for k, name in enumerate(COLUMNS)]
    table_w = sum(widths) + gap * (len(COLUMNS) - 1)
    body_w = f.right - f.left
    beside = body_w - table_w - f.box.pad * 2 >= small * 24
    left_w = body_w - table_w - f.box.pad * 2 if beside else body_w
    nodes = layout.nodes
    for shown in range(min(3 if beside else 1, len(run.commands)), 0, -1):
        col = Column(f.left, f.top, left_w, f.bottom)
        done = col.add(f"On each of the {nodes} node{'s' if nodes > 1 else ''}:", text,
                       weight=700)
        for command in run.commands[:shown]:
            head, _, rest = command.partition(" --rdzv-backend")
            done &= col.add(head + " \\", small, mono=True)
            done &= col.add("--rdzv-backend" + rest, small, mono=True, indent=small * 1.2)
        if len(run.commands) > shown:
            done &= col.add(f"… and {len(run.commands) - shown} more node"
                            f"{'s' if len(run.commands) - shown > 1 else ''}, each with its "
                            f"--node-rank", small, "muted")
        col.gap(small)
        done &= col.add("Then every process builds its groups:", text, weight=700)
        for call in run.device_mesh:
            done &= col.add(call, small, mono=True)
        if done or shown == 1:
            break
    out += col.texts
    first = len(col.texts)
    table = Column(f.right - table_w, f.top, table_w, f.bottom) if beside else col
    if not beside:
        table.gap(small)
    table.add("What each process is told", text, weight=700)
    more = (f"… {{}} more processes: RANK = node × {min(layout.world, layout.gpus_per_node)} "
            f"+ LOCAL_RANK")
    fit = table.room(small) - 1
    shown_rows = min(6, len(rows), fit - (1 if len(rows) > min(6, fit - 1) else 0))
    if shown_rows >= 1:
        for r in [COLUMNS, *rows[:shown_rows]]:
            y = table.take(small * LINE)
            x = table.x
            for k, v in enumerate(r):
                out.append(Text(round(x, 1), round(y + small * 0.95, 1), str(v), small,
                                "muted" if r is COLUMNS else "ink",
                                weight=700 if r is COLUMNS else 0, mono=True))
                x += widths[k] + gap
        if len(rows) > shown_rows:
            table.add(more.format(len(rows) - shown_rows), small, "muted")
    return out + (table.texts if beside else col.texts[first:])
