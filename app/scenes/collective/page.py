"""Chapter 2, collective communication: ``/collective`` and its embed, JSON, SVG and real run."""

from __future__ import annotations

from dataclasses import replace

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.draw.box import EXPORT, PAGE, Box
from app.draw.deck import CAPTION_HEIGHT, caption_lines
from app.humanize import human_bytes, human_time_us
from app.draw.plot import line_chart
from app.jobs.launch import torchrun_line
from app.scene import traced
from app.scenes.collective import deck as view
from app.scenes.collective import deck_svg as collective_svg
from app.scenes.collective.check import CHECK, torch_call
from app.sim.collectives.cost import BYTES_PER_ELEMENT
from app.sim.collectives.params import CollectiveParams
from app.sim.collectives.schedules import SPLITTING_OPS, SUPPORTED
from app.sim.collectives.simulate import SEMANTICS, simulate
from app.templating import deck_style


@memoised(DECKS)
def deck_svg(p: CollectiveParams, frame: int, box: Box) -> Markup:
    """The page's deck for ``box``, showing ``frame`` first (cached: decks are pure functions
    of their params and box)."""
    return collective_svg.render(view.build_deck(simulate_cached(p), box), frame)


def page_view(p: CollectiveParams, trace, frame: int, box: Box = PAGE) -> dict:
    factor = {"all_reduce": "2(n−1)/n", "broadcast": "1", "reduce": "1"}.get(p.op, "(n−1)/n")
    return {"deck_svg": deck_svg(p, frame, box), "deck_title": view.deck_title(p),
            "chart_geometry": cost_chart(p, trace),
            "semantics": SEMANTICS[p.op], "torch_call": torch_call(p.op, p.root),
            "stats_bytes": p.count * BYTES_PER_ELEMENT[p.dtype],
            "busbw_formula": f"{factor} = {trace.stats.busbw_factor:.3g}",
            "panel_sent_bytes": max(trace.stats.elements_sent) / p.count * p.cost_bytes,
            "swatches": view.rank_swatches(p.world),
            "torchrun": torchrun_line(CHECK, p, gpus_per_node=p.gpus_per_node)}


def form_view() -> dict:
    return {"supported": SUPPORTED, "splitting": SPLITTING_OPS,
            "sizes": [(2**k, human_bytes(2**k)) for k in range(10, 35)]}


def export_view(p: CollectiveParams, trace, frame: int, box: Box = EXPORT) -> dict:
    """Frame ``frame`` as a file whose page is ``box``: the drawing above, the caption under."""
    drawing = replace(box, height=box.height - CAPTION_HEIGHT)
    caption = caption_lines(trace.frames[frame].caption, box.width)
    return {"deck_svg": collective_svg.render(view.build_deck(trace, drawing, upto=frame), frame,
                                              standalone=True, caption=caption,
                                              style=deck_style(standalone=True))}


def simulate_cached(p: CollectiveParams):
    return traced(simulate, p)


def cost_chart(p: CollectiveParams, trace):
    markers = [(p.cost_bytes, f"{human_bytes(p.cost_bytes)}")]
    if trace.cost.crossover_bytes:
        markers.append((trace.cost.crossover_bytes, "ring faster from here"))
    return line_chart(
        [(c.algorithm.replace("_", "-"), c.sizes, c.times_us) for c in trace.cost.curves],
        x_label="message size", y_label="time (α–β model)",
        title=f"{p.op} on {p.world} ranks: time against message size",
        x_log=True, y_log=True, x_format=human_bytes, y_format=human_time_us,
        x_tick_base=4, x_tick_every=2, markers=markers)
