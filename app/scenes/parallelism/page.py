"""Chapters 1 and 11, the five parallelisms and the 5D rank layout: ``/parallelism`` and its
embed, JSON, SVG and real run."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.draw.box import EXPORT, PAGE, Box
from app.draw.caption import CAPTION_HEIGHT, caption_lines
from app.jobs.launch import torchrun_line
from app.scene import traced
from app.scenes.parallelism import deck as view
from app.scenes.parallelism import deck_svg as mesh_svg
from app.scenes.parallelism.deck_geometry import AXIS_COLOURS
from app.scenes.parallelism.check import CHECK
from app.catalog.models import PRESETS
from app.sim.parallelism.params import ParallelismParams
from app.sim.parallelism.simulate import simulate
from app.templating import LIGHT_COLOURS, PAGE_COLOURS, deck_style, render

RANK_ROWS = 64
"""Ranks listed in the coordinates table (the JSON has every rank)."""
NODE_COMMANDS = 8
"""torchrun lines shown, one per node (the rest differ only in --node-rank)."""


@lru_cache(maxsize=4)
def mesh_style(standalone: bool) -> Markup:
    colours = LIGHT_COLOURS if standalone else PAGE_COLOURS
    return Markup(deck_style(standalone) + render("_partials/mesh_style.css", c=colours))


@memoised(DECKS)
def deck_markup(p: ParallelismParams, frame: int, box: Box) -> Markup:
    """The page's deck laid out for ``box``, frame ``frame`` first (cached: decks are pure
    functions of their params and box)."""
    return mesh_svg.render(view.build_deck(traced(simulate, p), box), frame)


def page_view(p: ParallelismParams, trace, frame: int, box: Box = PAGE) -> dict:
    layout = trace.layout
    gbs = {"nvlink": p.intra_node_gbs, "infiniband": p.inter_node_gbs}
    flows = [{"flow": f, "ms": f.bytes_per_step / (gbs[f.link] * 1e9) * 1e3}
             for f in trace.flows]
    return {"deck_svg": deck_markup(p, frame, box), "deck_title": view.deck_title(p),
            "flows": flows, "axis_colours": AXIS_COLOURS,
            "rank_rows": [{"rank": r, "node": r // p.gpus_per_node,
                           "local_rank": r % p.gpus_per_node, **layout.coords(r)}
                          for r in range(min(layout.world, RANK_ROWS))],
            "rank_rows_max": RANK_ROWS,
            "commands": trace.launch.commands[:NODE_COMMANDS],
            "processes": trace.launch.processes[:RANK_ROWS],
            "model_name": p.preset, "model": PRESETS[p.preset],
            "torchrun": torchrun_line(CHECK, p)}


def form_view() -> dict:
    return {"style": mesh_style(False)}


def export_view(p: ParallelismParams, trace, frame: int, box: Box = EXPORT) -> dict:
    """Frame ``frame`` as a file whose page is ``box``: the drawing above, the caption under."""
    drawing = replace(box, height=box.height - CAPTION_HEIGHT)
    caption = caption_lines(trace.frames[frame].caption, box.width)
    return {"deck_svg": mesh_svg.render(view.build_deck(trace, drawing, only=frame), frame,
                                        standalone=True, caption=caption,
                                        style=mesh_style(True))}

