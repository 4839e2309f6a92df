"""The parameters of the optimizer scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from app.params import (
    Control,
    Dp,
    Invalid,
    LearningRate,
    Optimizer,
    ParamCount,
    Precision,
    SceneParams,
    Seed,
    Steps,
    WeightDecay,
)
from app.sim.optimizer.problem import SIMULATED, divergence

VectorSize = Annotated[int, Field(ge=2, le=12, description="parameters in the vector")]
Decay = Annotated[float, Field(ge=0, lt=1, description="a decay rate in [0, 1)")]
Eps = Annotated[float, Field(gt=0, le=1, description="ε, added to √v̂")]


class OptimizerParams(SceneParams):
    # update rule: sgd, momentum, adam, adamw
    optimizer: Annotated[Optimizer, Control(
        "Optimizer", kind="choice",
        options={"sgd": "SGD", "momentum": "Momentum", "adam": "Adam", "adamw": "AdamW"})] = "adamw"
    # mixed: bf16 weights/grads, fp32 master and states
    precision: Annotated[Precision, Control(
        "Precision", kind="choice", options={"fp32": "fp32", "mixed": "mixed (bf16 + fp32 master)"},
        help="Mixed: the model holds bf16 weights and gradients; the optimizer holds an fp32 "
             "master copy and its states.")] = "mixed"
    # parameters in the vector
    size: Annotated[VectorSize, Control(
        "Parameters",
        help="Length of the parameter vector; element 0 is the worked example in the "
             "captions.")] = 6
    # optimizer steps to animate
    steps: Annotated[Steps, Control(
        "Steps", help="Optimizer steps to animate.", bounds=(1, 32))] = 3
    # η
    lr: Annotated[LearningRate, Control(
        "Learning rate η", kind="number", bounds=(0.0001, 10), step="any")] = 0.1
    # μ of SGD with momentum
    momentum: Annotated[Decay, Control("Momentum μ", bounds=(0, 0.99), step=0.01)] = 0.9
    # β₁: Adam's first-moment decay (torch default)
    beta1: Annotated[Decay, Control("β₁ (first moment)", bounds=(0, 0.99), step=0.01)] = 0.9
    # β₂: second-moment decay (torch default)
    beta2: Annotated[Decay, Control(
        "β₂ (second moment)", kind="number", bounds=(0, 0.99999), step="any")] = 0.999
    # ε (torch default)
    eps: Annotated[Eps, Control("ε", kind="number", step="any")] = 1e-8
    # λ: L2 for SGD/Adam, decoupled for AdamW (torch's AdamW default)
    weight_decay: Annotated[WeightDecay, Control(
        "Weight decay λ",
        help="L2 (added to the gradient) for SGD and Adam; decoupled (w ← w·(1 − ηλ)) "
             "for AdamW.",
        step=0.01)] = 0.01
    # seed of the quadratic and the starting point
    seed: Annotated[Seed, Control(
        "Seed", help="Seeds the quadratic loss and the starting point.", kind="number")] = 0
    # Ψ for the ZeRO panel (ZeRO Table 1's 7.5B model)
    param_count: Annotated[ParamCount, Control("Model parameters Ψ", kind="choice", widget="select")] = 7_500_000_000
    # N_d for the ZeRO panel (Table 1's 64 GPUs)
    dp: Annotated[Dp, Control("Data-parallel GPUs N_d", kind="choice", widget="select")] = 64

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
