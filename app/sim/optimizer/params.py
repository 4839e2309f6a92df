"""The parameters of the optimizer scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from app.params import (
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
from app.sim.optimizer.simulate import SIMULATED, divergence

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
