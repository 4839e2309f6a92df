"""The memory page around its deck: the title, the ledger's per-layer breakdown, Korthikanti's
closed form for the case on screen, links that apply a suggestion, and the real run's scaled-down
set-up and torchrun command (check.py)."""

from __future__ import annotations

from dataclasses import replace

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.draw.box import EXPORT, PAGE, Box
from app.draw.caption import CAPTION_HEIGHT, caption_lines
from app.jobs.launch import torchrun_line, torchrun_text
from app.scene import traced
from app.scenes.memory import deck_svg as memory_svg
from app.scenes.memory.check import CHECK, config_argv, scaled_config
from app.scenes.memory.deck import COLOURS, NAMES, build_deck
from app.sim.memory.activations import (
    RECOMPUTE,
    kept_terms,
    korthikanti_table2,
    per_layer_bytes,
)
from app.sim.memory.ledger import count
from app.sim.memory.params import MemoryParams
from app.sim.memory.rank_states import rank_states
from app.sim.memory.simulate import simulate
from app.catalog.models import PRESET_TEXTS
from app.param_groups import SHAPE_FIELDS
from app.templating import deck_style


def model_name(p) -> str:
    custom = any(getattr(p, f) is not None for f in (*SHAPE_FIELDS, "param_count"))
    return PRESET_TEXTS[p.preset] + (" (custom)" if custom else "")


def title(p, trace) -> str:
    c = trace.config
    parts = [model_name(p), f"b {c.micro_batch}", f"dp {c.dp}", f"tp {c.tp}", f"pp {c.pp}",
             f"ZeRO-{c.zero}"]
    if c.sequence_parallel:
        parts.append("SP")
    if c.recompute != "none":
        parts.append(f"{c.recompute} recompute")
    return " · ".join(parts)


def layer_rows(c) -> list[tuple[str, str, float]]:
    norm = "RMSNorm" if c.model.family == "llama" else "LayerNorm"
    return [(t.name.replace("LayerNorm", norm), t.formula, t.bytes)
            for t in kept_terms(c.layer_shape(), c.tp, c.sequence_parallel, c.recompute)]


def table2(c) -> tuple[str, float] | None:
    """Korthikanti's closed form for this case, when the model has Table 2's shape (multi-head
    attention, a 4h GeLU MLP, dropout, 16-bit activations)."""
    m = c.model
    if not (m.family == "gpt" and m.kv_heads == m.heads and m.ffn == 4 * m.hidden
            and c.precision == "mixed"):
        return None
    sp = c.sequence_parallel and c.tp > 1
    formula = {("none", False): "sbh(10 + 24/t + 5as/(ht))" if c.tp > 1 else "sbh(34 + 5as/h)",
               ("none", True): "(sbh/t)(34 + 5as/h)",
               ("selective", False): "sbh(10 + 24/t)" if c.tp > 1 else "34sbh",
               ("selective", True): "34sbh/t",
               ("full", False): "2sbh", ("full", True): "2sbh/t"}[(c.recompute, sp)]
    return formula, korthikanti_table2(m.seq, c.micro_batch, m.hidden, m.heads, c.tp, sp,
                                       c.recompute)


def page_context(p, trace, frame: int) -> dict:
    c = trace.config
    led = trace.ledger
    scaled = scaled_config(c)
    scaled_query = p.query(**{f: getattr(scaled.model, f) for f in SHAPE_FIELDS},
                           micro_batch=scaled.micro_batch, dp=scaled.dp, tp=scaled.tp,
                           pp=scaled.pp, param_count=None)
    world = scaled.dp * scaled.tp
    return {
        "deck_title": title(p, trace), "names": NAMES, "colours": COLOURS,
        "psi_local": count(c.psi / (c.tp * c.pp)),
        "largest_layer": count(trace.deepspeed[0].largest_layer),
        "model_name": model_name(p), "layer_rows": layer_rows(c), "table2": table2(c),
        "by_recompute": [(rc, per_layer_bytes(c.layer_shape(), c.tp, c.sequence_parallel, rc))
                         for rc in RECOMPUTE],
        "exact": rank_states(c, led.stage.name),
        "links": [(s, f"/memory?{p.query(**dict(s.changes))}") for s in trace.suggestions],
        "plan_link": (f"/memory?{p.query(**dict(trace.plan[-1].changes))}"
                      if trace.plan else ""),
        "scaled": scaled, "scaled_query": scaled_query, "scaled_world": world,
        "torchrun": torchrun_line(CHECK, p),
        "node_command": node_command(c),
    }


def node_command(c) -> str:
    """This set-up's shape measured full size on one 8-GPU node: tp as chosen (at most 8), the
    rest of the node data-parallel."""
    tp = min(c.tp, 8)
    node = replace(c, tp=tp, dp=max(1, 8 // tp))
    return torchrun_text(CHECK.worker, node.tp * node.dp, config_argv(node))


def deck_svg(p, trace, frame: int, box: Box):
    """The page's deck laid out for ``box``, showing ``frame`` first."""
    return memory_svg.render(build_deck(trace, title(p, trace), box), frame)


def export_context(p, trace, frame: int, box: Box) -> dict:
    """Frame ``frame`` as a file whose page is ``box``: the drawing above, the caption under."""
    drawing = replace(box, height=box.height - CAPTION_HEIGHT)
    return {"deck_svg": memory_svg.render(build_deck(trace, title(p, trace), drawing), frame,
                                          standalone=True,
                                          caption=caption_lines(trace.frames[frame].caption,
                                                                box.width),
                                          style=deck_style(standalone=True))}


@memoised(DECKS)
def deck_markup(p: MemoryParams, frame: int, box: Box) -> Markup:
    """The page's deck for ``box``, showing ``frame`` first (cached: a deck is a pure function
    of its params and box)."""
    return deck_svg(p, traced(simulate, p), frame, box)


def page_view(p: MemoryParams, trace, frame: int, box: Box = PAGE) -> dict:
    return {"deck_svg": deck_markup(p, frame, box), **page_context(p, trace, frame)}


def form_view() -> dict:
    return {}


def export_view(p: MemoryParams, trace, frame: int, box: Box = EXPORT) -> dict:
    return export_context(p, trace, frame, box)
