"""Chapter 9, long context: ``/context-parallel`` — the wall, the deck (Ring Attention, all-gather
KV, Ulysses, hybrid on real numbers), the cost panels and the real run's command line."""

from __future__ import annotations

from dataclasses import replace

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.draw.box import EXPORT, PAGE, Box
from app.draw.caption import CAPTION_HEIGHT, caption_lines
from app.humanize import human_bytes, human_time_us
from app.draw.plot import line_chart
from app.jobs.launch import torchrun_line
from app.scene import traced
from app.scenes.context_parallel import deck as view
from app.scenes.context_parallel import deck_svg as cp_svg
from app.scenes.context_parallel.check import CHECK
from app.sim.context_parallel.captions import METHOD_NAMES
from app.sim.context_parallel.params import MAX_SEQ, ContextParallelParams
from app.sim.context_parallel.simulate import scale_dict, simulate
from app.catalog.models import PRESETS
from app.templating import deck_style


@memoised(DECKS)
def deck_svg(p: ContextParallelParams, frame: int, box: Box) -> Markup:
    """The page's deck laid out for ``box``, showing ``frame`` first; later frames wait in a
    template (cached: a deck is a pure function of its params and box)."""
    return cp_svg.render(view.build_deck(traced(simulate, p), box), frame)


def tokens(n: float) -> str:
    """131072 → "128k", 1048576 → "1M", 3000 → "3k"."""
    n = int(n)
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10}k"
    return f"{n:,}"


def page_view(p: ContextParallelParams, trace, frame: int, box: Box = PAGE) -> dict:
    scale = scale_dict(p, trace.scale)
    return {"deck_svg": deck_svg(p, frame, box), "deck_title": view.deck_title(p),
            "scale": scale, "model_name": PRESETS[p.preset].name,
            "wall_chart": wall_chart(p, scale), "flops_chart": flops_chart(p, scale),
            "memory_chart": memory_chart(p, scale), "needed": needed_rows(scale),
            "method_names": METHOD_NAMES, "tokens": tokens,
            "torchrun": torchrun_line(CHECK, p)}


def form_view() -> dict:
    return {"max_seq": MAX_SEQ}


def export_view(p: ContextParallelParams, trace, frame: int, box: Box = EXPORT) -> dict:
    """Frame ``frame`` as a file whose page is ``box``: the drawing above, the caption under."""
    drawing = replace(box, height=box.height - CAPTION_HEIGHT)
    return {"deck_svg": cp_svg.render(view.build_deck(trace, drawing), frame, standalone=True,
                                      caption=caption_lines(trace.frames[frame].caption,
                                                            box.width),
                                      style=deck_style(standalone=True))}


def wall_chart(p, scale: dict):
    """Bytes of one rank's attention against the context, on one GPU."""
    w = scale["wall"]
    xs = [pt["context"] for pt in w["points"]]
    data = [("s² scores, 1 layer", xs, [pt["score_bytes"] for pt in w["points"]]),
            ("all layers, standard", xs, [pt["model_activations_bytes"] for pt in w["points"]]),
            ("all layers, FlashAttention", xs, [pt["model_flash_bytes"] for pt in w["points"]]),
            ("FlashAttention stats, 1 layer", xs,
             [pt["flash_stats_bytes"] for pt in w["points"]]),
            (f"{scale['gpu_name']} memory", xs, [scale["capacity_bytes"]] * len(xs))]
    markers = [(w["activations_limit"], f"standard fits to {tokens(w['activations_limit'])}"),
               (w["flash_limit"], f"Flash fits to {tokens(w['flash_limit'])}"),
               (p.seq, f"context {tokens(p.seq)}")]
    return line_chart(data, x_label="tokens of one sequence s", y_label="bytes",
                      title=f"{PRESETS[p.preset].name}, b = {p.micro_batch}: activation memory "
                            f"on one GPU",
                      x_log=True, y_log=True, x_format=tokens, y_format=human_bytes,
                      x_tick_base=2, x_tick_every=2, markers=markers, width=680, height=380)


def flops_chart(p, scale: dict):
    w = scale["wall"]
    xs = [pt["context"] for pt in w["points"]]
    data = [("attention QKᵀ, PV" + (" (causal)" if p.causal else ""), xs,
             [pt["attention_flops"] for pt in w["points"]]),
            ("projections + MLP", xs, [pt["other_flops"] for pt in w["points"]])]
    return line_chart(data, x_label="tokens of one sequence s", y_label="FLOPs, one layer forward",
                      title="Attention's s² against the rest of the layer's s",
                      x_log=True, y_log=True, x_format=tokens, y_format=lambda v: f"{v:.0e}",
                      x_tick_base=2, x_tick_every=2,
                      markers=[(w["attention_dominates_from"],
                                f"attention larger from {tokens(w['attention_dominates_from'])}")],
                      width=680, height=340)


def memory_chart(p, scale: dict):
    """Bytes per rank against cp, the chosen method, at the context."""
    rows = [r for r in scale["memory"]["per_cp"] if "total_bytes" in r]
    if len(rows) < 2:
        return None
    cps = [r["cp"] for r in rows]
    data = [("activations", cps, [r["activations_bytes"] for r in rows]),
            ("K/V buffers", cps, [max(r["buffer_bytes"], 1.0) for r in rows]),
            ("total", cps, [r["total_bytes"] for r in rows]),
            (f"{scale['gpu_name']}", cps, [scale["capacity_bytes"]] * len(cps))]
    return line_chart(data, x_label="context-parallel size cp", y_label="bytes per rank",
                      title=f"{METHOD_NAMES[p.method]}: memory per rank at "
                            f"{tokens(p.seq)} tokens ({p.recompute} recompute)",
                      x_log=True, y_log=True, x_format=lambda v: f"{v:g}",
                      y_format=human_bytes, x_tick_base=2, width=680, height=340)


def needed_rows(scale: dict) -> list[dict]:
    """One row per context: the cp each method needs (or why it cannot)."""
    out: dict[int, dict] = {}
    for e in scale["memory"]["cp_needed"]:
        out.setdefault(e["context"], {"context": e["context"]})[e["method"]] = e
    return list(out.values())


__all__ = ["page_view", "form_view", "export_view", "human_time_us"]
