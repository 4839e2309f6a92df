"""Chapter 3, optimizers: ``/optimizer`` and its embed, JSON, SVG and real run."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated

from markupsafe import Markup
from pydantic import Field, model_validator

from app.params import (Dp, Invalid, LearningRate, Optimizer, ParamCount, Precision,
                        SceneParams, Seed, Steps, WeightDecay)
from app.scene import Scene, trace_of
from app.sim import model_states
from app.sim.models import PRESETS
from app.sim.optimizer import SIMULATED, divergence, simulate
from app.templating import deck_style, export_context
from app.verify.optimizer import CHECK
from app.views import optimizer as view
from app.views import optimizer_svg

VectorSize = Annotated[int, Field(ge=2, le=12, description="parameters in the vector")]
Decay = Annotated[float, Field(ge=0, lt=1, description="a decay rate in [0, 1)")]
Eps = Annotated[float, Field(gt=0, le=1, description="ε, added to √v̂")]


class OptimizerParams(SceneParams):
    optimizer: Optimizer = "adamw"            # update rule: sgd, momentum, adam, adamw
    precision: Precision = "mixed"            # mixed: bf16 weights/grads, fp32 master and states
    size: VectorSize = 6                      # parameters in the vector
    steps: Steps = 3                          # optimizer steps to animate
    lr: LearningRate = 0.1                    # η
    momentum: Decay = 0.9                     # μ of SGD with momentum
    beta1: Decay = 0.9                        # β₁: Adam's first-moment decay (torch default)
    beta2: Decay = 0.999                      # β₂: second-moment decay (torch default)
    eps: Eps = 1e-8                           # ε (torch default)
    weight_decay: WeightDecay = 0.01          # λ: L2 for SGD/Adam, decoupled for AdamW (torch's AdamW default)
    seed: Seed = 0                            # seed of the quadratic and the starting point
    param_count: ParamCount = 7_500_000_000   # Ψ for the ZeRO panel (ZeRO Table 1's 7.5B model)
    dp: Dp = 64                               # N_d for the ZeRO panel (Table 1's 64 GPUs)

    @model_validator(mode="after")
    def _consistent(self) -> OptimizerParams:
        if self.optimizer not in SIMULATED:
            raise Invalid("optimizer", f"optimizer {self.optimizer} is priced on /memory but "
                                       f"not stepped here; choose one of "
                                       f"{', '.join(SIMULATED)}")
        if self.optimizer == "adamw" and self.lr * self.weight_decay >= 1:
            raise Invalid("weight_decay", f"lr × weight_decay ({self.lr:g} × "
                                          f"{self.weight_decay:g} = "
                                          f"{self.lr * self.weight_decay:.3g}) must be below 1 "
                                          f"for AdamW: w ← w·(1 − ηλ) would flip the weights' "
                                          f"sign — use weight_decay < {1 / self.lr:.3g}")
        diverges = divergence(self)
        if diverges:
            step, stable = diverges
            raise Invalid("lr", f"lr ({self.lr:g}) makes {self.optimizer} diverge on this "
                                f"loss: the weights pass 10⁶ at step {step} of {self.steps} — "
                                f"use lr < {stable:.3g}, which is stable for its steepest "
                                f"curvature, or fewer steps")
        return self


OPTIMIZER_NAMES = {"sgd": "SGD", "momentum": "SGD with momentum", "adam": "Adam",
                   "adamw": "AdamW", "adafactor": "Adafactor", "adam8bit": "8-bit Adam"}
STAGES = ("baseline (DDP)", "P_os · ZeRO-1", "P_os+g · ZeRO-2", "P_os+g+p · ZeRO-3")


@lru_cache(maxsize=64)
def deck_of(p: OptimizerParams) -> view.OptimizerDeck:
    """The deck's geometry, every frame (cached: decks are pure functions of params)."""
    return view.build_deck(trace_of(SCENE, p))


@lru_cache(maxsize=64)
def deck_svg(p: OptimizerParams, frame: int) -> Markup:
    """The page's deck, showing ``frame`` first; later frames wait in a template."""
    return optimizer_svg.render(deck_of(p), frame)


def page_view(p: OptimizerParams, trace, frame: int) -> dict:
    return {"deck_svg": deck_svg(p, frame), "deck_title": deck_of(p).title,
            "bytes_table": bytes_table(p),
            "zero_rows": zero_rows(p, trace), "torch_code": torch_code(p),
            "torchrun": torchrun_command(p), "names": OPTIMIZER_NAMES,
            "verify_world": CHECK.world(p)}


def form_view() -> dict:
    sizes = sorted({7_500_000_000, 128_000_000_000, 1_000_000_000_000,
                    *(m.param_count() for m in PRESETS.values())})
    labels = {m.param_count(): m.name for m in PRESETS.values()}
    return {"simulated": SIMULATED, "names": OPTIMIZER_NAMES,
            "param_counts": [(n, f"{_count(n)}" + (f" ({labels[n]})" if n in labels else ""))
                             for n in sizes],
            "dps": [2**k for k in range(11)]}


def export_view(p, trace, frame: int) -> dict:
    context = export_context(deck_of(p), trace, frame)
    return {"deck_svg": optimizer_svg.render(context["deck"], frame, standalone=True,
                                             caption=tuple(context["caption"]),
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


def torchrun_command(p: OptimizerParams) -> str:
    args = " ".join(CHECK.args(p))
    return (f"torchrun --standalone --nproc-per-node {CHECK.world(p)} workers/optimizer.py "
            f"{args} --out report.json")


def _count(n: int) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


SCENE = Scene(
    slug="optimizer",
    title="Optimizers",
    chapter=3,
    summary="SGD, momentum, Adam and AdamW stepping a small parameter vector with the real "
            "numbers — m, v, bias correction, decoupled weight decay, the fp32 master copy — "
            "the bytes each keeps per parameter, and why ZeRO shards Adam's state first.",
    params=OptimizerParams,
    simulate=simulate,
    template="scenes/optimizer.html",
    view=page_view,
    form=form_view,
    svg_template="scenes/optimizer.svg",
    export=export_view,
    verify=CHECK,
    key_slider="steps",
    preview="frame=12",
)
