"""Chapter 11, choosing the best mix: ``/planner`` and its embed, JSON and SVG."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.draw.box import EXPORT, PAGE, Box
from app.draw.caption import CAPTION_HEIGHT, caption_lines
from app.scene import traced
from app.scenes.planner import deck
from app.scenes.planner import deck_svg as planner_svg
from app.sim.planner.hardware import BAND, GPU_SPECS
from app.sim.planner.launch import deepspeed_config, megatron_flags, torchtitan_toml
from app.sim.planner.params import PlannerParams
from app.sim.planner.ledger import ledger
from app.sim.planner.simulate import simulate
from app.catalog.models import PRESETS
from app.templating import deck_style


def stand_in(p: PlannerParams, tp: int) -> str:
    """The dense preset the other scenes show a mix on: the planner's own, or for an MoE model
    one whose heads and key-value heads ``tp`` divides (those scenes split whole heads)."""
    if p.preset in PRESETS:
        return p.preset
    fits = [k for k, m in PRESETS.items() if m.heads % tp == 0 and m.kv_heads % tp == 0]
    return "llama3-70b" if "llama3-70b" in fits else (fits[0] if fits else "gpt3-175b")


def handoffs(p: PlannerParams, c) -> list[tuple[str, str]]:
    """Links opening candidate ``c`` in the other scenes, their parameter names in the query."""
    preset = stand_in(p, c.tp)
    mem = {"preset": preset, "seq": p.seq, "micro_batch": c.micro_batch, "dp": c.dp * c.cp,
           "tp": c.tp, "pp": c.pp, "zero": c.zero, "sequence_parallel": str(c.tp > 1).lower(),
           "recompute": c.recompute, "gpu": p.gpu}
    pipe = {"schedule": c.schedule, "stages": min(c.pp, 64), "microbatches": min(c.microbatches, 1024),
            "chunks": c.chunks if c.chunks > 1 else 2 if c.schedule != "1f1b" else 1}
    shown_tp = min(c.tp, 16)               # the TP scene draws one lane per rank, up to 16
    tpq = {"tp": shown_tp, "tokens": max(4, shown_tp), "preset": preset, "seq": p.seq, "micro_batch": c.micro_batch,
           "sequence_parallel": str(c.tp > 1).lower(), "gpus_per_node": p.gpus_per_node}
    par = {"tp": c.tp, "cp": c.cp, "dp": min(c.dp, 1024), "pp": c.pp, "ep": c.ep,
           "gpus_per_node": p.gpus_per_node, "preset": preset, "seq": p.seq,
           "micro_batch": c.micro_batch, "microbatches": min(c.microbatches, 1024)}
    out = [("memory ledger", "/memory?" + urlencode(mem)),
           ("pipeline schedule", "/pipeline?" + urlencode(pipe)),
           ("tensor-parallel block", "/tensor-parallel?" + urlencode(tpq)),
           ("rank layout", "/parallelism?" + urlencode(par))]
    run = train_handoff(c)
    return out + ([("a real run of this layout (the tiny model, /train)", run)] if run else [])


def train_handoff(c) -> str | None:
    """``/train?…`` for candidate ``c`` when its world is at most 8 ranks: the same tp, cp, pp,
    dp, ep, ZeRO (2 and 3 as 1, the stage /train runs), schedule and recomputation, on the
    tiny model scaled so that the layout divides it; None when it cannot run there."""
    from pydantic import ValidationError

    from app.sim.train.params import TrainParams
    if c.tp * c.cp * c.dp * c.pp > 8:
        return None
    values = {"tp": c.tp, "cp": c.cp, "pp": c.pp, "dp": c.dp, "ep": c.ep,
              "zero": min(c.zero, 1), "schedule": c.schedule if c.schedule in ("gpipe", "1f1b")
              else "1f1b", "recompute": c.recompute, "sequence_parallel": c.tp > 1,
              "microbatches": max(1, min(c.microbatches, 8)), "heads": 8,
              "kv_heads": max(4, c.tp), "layers": max(4, c.pp), "seq": max(32, 4 * c.cp),
              "experts": max(4, c.ep) if c.ep > 1 else 1, "top_k": 2 if c.ep > 1 else 1}
    try:
        return "/train?" + TrainParams.model_validate(values).query()
    except ValidationError:
        return None


def ledger_families() -> dict:
    """The accuracy ledger by paper: rows, mean and largest |error| (the page links the rest)."""
    led = ledger()
    families: dict[str, list] = {}
    for r in led.rows:
        families.setdefault(r.run.family, []).append(abs(r.error))
    return {"rows": len(led.rows), "mean": led.mean_abs_error, "max": led.max_abs_error,
            "families": [(name, len(e), sum(e) / len(e), max(e)) for name, e in families.items()]}


@memoised(DECKS)
def deck_markup(p: PlannerParams, frame: int, box: Box) -> Markup:
    """The page's deck laid out for ``box``, showing ``frame`` first (cached: a deck is a pure
    function of its params and box)."""
    return planner_svg.render(deck.build_deck(traced(simulate, p), box), frame)


def page_view(p: PlannerParams, trace, frame: int, box: Box = PAGE) -> dict:
    plan = trace.plan
    b = plan.best
    ctx = {"deck_svg": deck_markup(p, frame, box), "deck_title": "Planner", "plan": plan,
           "band": BAND, "ledger": ledger_families(), "gpu_spec": GPU_SPECS[p.gpu],
           "top": plan.candidates[:12]}
    if b:
        model = p.plan_model()
        ctx.update(handoffs=handoffs(p, b),
                   megatron=" \\\n  ".join(["torchrun … pretrain_gpt.py"] +
                                           megatron_flags(b, model, p.global_batch, p.seq)),
                   deepspeed=deepspeed_config(b, p.global_batch),
                   torchtitan=torchtitan_toml(b, p.global_batch, p.seq))
    return ctx


def form_view() -> dict:
    return {}


def export_view(p: PlannerParams, trace, frame: int, box: Box = EXPORT) -> dict:
    """Frame ``frame`` as a file whose page is ``box``: the drawing above, the caption under."""
    drawing = replace(box, height=box.height - CAPTION_HEIGHT)
    return {"deck_svg": planner_svg.render(
        deck.build_deck(trace, drawing), frame, standalone=True,
        caption=caption_lines(trace.frames[frame].caption, box.width),
        style=deck_style(standalone=True))}
