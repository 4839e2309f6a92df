"""Chapter 3, optimizers: ``/optimizer`` and its embed, JSON, SVG and real run."""

from __future__ import annotations

from dataclasses import replace

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.draw.box import EXPORT, PAGE, Box
from app.draw.caption import CAPTION_HEIGHT, caption_lines
from app.jobs.launch import torchrun_line
from app.scene import traced
from app.scenes.optimizer import deck as view
from app.scenes.optimizer import deck_svg as optimizer_svg
from app.scenes.optimizer.check import CHECK
from app.sim.memory import model_states
from app.catalog.models import PRESETS
from app.sim.optimizer.params import OptimizerParams
from app.sim.optimizer.simulate import SIMULATED, simulate
from app.templating import deck_style

OPTIMIZER_NAMES = {"sgd": "SGD", "momentum": "SGD with momentum", "adam": "Adam",
                   "adamw": "AdamW", "adafactor": "Adafactor", "adam8bit": "8-bit Adam"}
STAGES = ("baseline (DDP)", "P_os · ZeRO-1", "P_os+g · ZeRO-2", "P_os+g+p · ZeRO-3")


@memoised(DECKS)
def deck_of(p: OptimizerParams, box: Box) -> view.OptimizerDeck:
    """The deck's geometry for ``box``, every frame (cached: decks are pure functions of
    their params and box)."""
    return view.build_deck(traced(simulate, p), box)


@memoised(DECKS)
def deck_svg(p: OptimizerParams, frame: int, box: Box) -> Markup:
    """The page's deck for ``box``, showing ``frame`` first; later frames wait in a template."""
    return optimizer_svg.render(deck_of(p, box), frame)


def page_view(p: OptimizerParams, trace, frame: int, box: Box = PAGE) -> dict:
    return {"deck_svg": deck_svg(p, frame, box), "deck_title": deck_of(p, box).title,
            "bytes_table": bytes_table(p),
            "zero_rows": zero_rows(p, trace), "torch_code": torch_code(p),
            "torchrun": torchrun_line(CHECK, p), "names": OPTIMIZER_NAMES,
            "verify_world": CHECK.world(p)}


def form_view() -> dict:
    sizes = sorted({7_500_000_000, 128_000_000_000, 1_000_000_000_000,
                    *(m.param_count() for m in PRESETS.values())})
    labels = {m.param_count(): m.name for m in PRESETS.values()}
    return {"simulated": SIMULATED, "names": OPTIMIZER_NAMES,
            "param_counts": [(n, f"{_count(n)}" + (f" ({labels[n]})" if n in labels else ""))
                             for n in sizes],
            "dps": [2**k for k in range(11)]}


def export_view(p, trace, frame: int, box: Box = EXPORT) -> dict:
    """Frame ``frame`` as a file whose page is ``box``: the drawing above, the caption under."""
    drawing = replace(box, height=box.height - CAPTION_HEIGHT)
    return {"deck_svg": optimizer_svg.render(view.build_deck(trace, drawing, upto=frame), frame,
                                             standalone=True,
                                             caption=caption_lines(trace.frames[frame].caption,
                                                                   box.width),
                                             style=deck_style(standalone=True))}


def bytes_table(p: OptimizerParams) -> list[dict]:
    """Bytes per parameter for every optimizer model_states prices, fp32 and mixed."""
    rows = []
    for name in model_states.OPTIMIZERS:
        cells = {pr: model_states.per_gpu(1, optimizer=name, precision=pr)
                 for pr in model_states.PRECISIONS}
        rows.append({"key": name, "name": OPTIMIZER_NAMES[name], "cells": cells,
                     "current": name == p.optimizer})
    return rows


def zero_rows(p: OptimizerParams, trace) -> list[dict]:
    base = trace.zero[0].total
    return [{"stage": s, "label": STAGES[s], "bytes": z, "share": z.total / base}
            for s, z in enumerate(trace.zero)]


def torch_code(p: OptimizerParams) -> str:
    if p.optimizer == "sgd":
        call = f"torch.optim.SGD(params, lr={p.lr:g}, weight_decay={p.weight_decay:g})"
    elif p.optimizer == "momentum":
        call = (f"torch.optim.SGD(params, lr={p.lr:g}, momentum={p.momentum:g}, "
                f"weight_decay={p.weight_decay:g})")
    else:
        cls = "AdamW" if p.optimizer == "adamw" else "Adam"
        call = (f"torch.optim.{cls}(params, lr={p.lr:g}, betas=({p.beta1:g}, {p.beta2:g}), "
                f"eps={p.eps:g}, weight_decay={p.weight_decay:g})")
    return call


def _count(n: int) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)
