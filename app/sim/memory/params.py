"""The parameters of the memory scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from typing import Annotated

from pydantic import field_validator, model_validator

from app.param_groups import GpuField, ModelShapeGroup
from app.params import (
    Control,
    Dp,
    Invalid,
    Optimizer,
    ParamCount,
    Pp,
    Precision,
    Recompute,
    Tp,
    ZeroStage,
    divisors_near,
    suggest,
)
from app.sim.memory.ledger import MemoryConfig


class MemoryParams(ModelShapeGroup):
    """The model shape group (preset, its sizes, seq, micro_batch), the layout and the training
    set-up of the memory ledger."""

    # Ψ for the model states (empty: from the shape)
    param_count: Annotated[ParamCount | None, Control(
        "Parameters Ψ",
        help="Overrides the count from the shape for the model states (e.g. 7500000000 "
             "for the ZeRO paper's 7.5B).",
        kind="number")] = None
    # data-parallel size N_d
    dp: Annotated[Dp, Control("Data parallel N_d", kind="choice", widget="select",
                           options=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))] = 8
    # tensor-parallel size t
    tp: Annotated[Tp, Control("Tensor parallel t", kind="choice", widget="select",
                           options=(1, 2, 4, 8, 16, 32, 64),
                           help="Must divide the heads, key/value heads and MLP size.")] = 1
    # pipeline stages p
    pp: Annotated[Pp, Control(
        "Pipeline stages p", help="Must divide the layers.", kind="number")] = 1
    # ZeRO stage: 1 optimizer, 2 + gradients, 3 + params
    zero: Annotated[ZeroStage, Control(
        "ZeRO stage", kind="choice", options=(0, 1, 2, 3),
        help="1 shards optimizer states over N_d, 2 also gradients, 3 also parameters.")] = 2
    # split norms and dropouts along s over the TP group
    sequence_parallel: Annotated[bool, Control(
        "Sequence parallelism", kind="flag",
        help="Splits norms and dropouts along s over the t GPUs.")] = False
    # activation recomputation (Korthikanti 2022)
    recompute: Annotated[Recompute, Control("Recompute", kind="choice")] = "selective"
    # what the optimizer keeps per parameter
    optimizer: Annotated[Optimizer, Control(
        "Optimizer", kind="choice", widget="select",
        options={"sgd": "SGD", "momentum": "SGD with momentum", "adam": "Adam", "adamw": "AdamW",
                 "adafactor": "Adafactor", "adam8bit": "8-bit Adam"})] = "adamw"
    # mixed: 16-bit params/grads/activations, fp32 master
    precision: Annotated[Precision, Control("Precision", kind="choice",
                                         options={"mixed": "mixed (bf16 + fp32 master)", "fp32": "fp32"})] = "mixed"
    # the GPU to fit on
    gpu: GpuField = "h100-80"

    @field_validator("param_count", mode="before")
    @classmethod
    def _blank_is_shape(cls, value):
        return None if isinstance(value, str) and value.strip() == "" else value

    def config(self) -> MemoryConfig:
        return MemoryConfig(self.shape(), self.micro_batch, self.dp, self.tp, self.pp, self.zero,
                            self.sequence_parallel, self.recompute, self.optimizer,
                            self.precision, self.gpu, self.param_count)

    @model_validator(mode="after")
    def _consistent(self) -> MemoryParams:
        m = self.shape()
        for name, value in (("heads", m.heads), ("kv_heads", m.kv_heads), ("ffn", m.ffn)):
            if value % self.tp:
                raise Invalid("tp", f"tp ({self.tp}) must divide {name} ({value})"
                                    f"{suggest(self, 'tp', divisors_near(value, self.tp))}")
        if m.layers % self.pp:
            raise Invalid("pp", f"pp ({self.pp}) must divide layers ({m.layers})"
                                f"{suggest(self, 'pp', divisors_near(m.layers, self.pp))}")
        if self.sequence_parallel and m.seq % self.tp:
            raise Invalid("seq", f"seq ({m.seq}) must be divisible by tp ({self.tp}) with "
                                 f"sequence parallelism")
        return self

