"""Model-state bytes of one GPU counted tensor by tensor — the exact answer that the ledger's
even split Ψ/(t·p) approximates.

A GPU of pipeline stage ``stage`` and tensor-parallel rank 0 holds, Megatron-style: the
embeddings on the first stage, the final norm and untied output head on the last, L/p layers in
between; column-parallel and vocab-parallel weights cut along their rows, row-parallel weights
along their columns, norms and the row-parallel biases whole on every TP rank
(:meth:`app.catalog.models.ModelShape.tensors`); a vocabulary that t does not divide is padded, as
Megatron pads it to a multiple of 128·t. ZeRO then cuts each tensor along its first
dimension into N_d shards (FSDP-style; a partial last shard is padded), and the optimizer keeps
its states per shard: torch.optim's Adam/AdamW two fp32 tensors and a step counter, SGD with
momentum one buffer, Adafactor a row and a column vector per matrix (every element for vectors)
and a step counter. This is what ``workers/memory.py`` builds, so its measurement must match
these numbers to the byte.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.sim.memory import model_states
from app.sim.memory.ledger import MemoryConfig

STEP_COUNTER_BYTES = 4
"""torch.optim keeps ``state["step"]`` as a float32 scalar tensor per parameter tensor."""
COUNTED_STEPS = ("adam", "adamw", "adafactor")


@dataclass(frozen=True)
class RankStates:
    params: int
    grads: int
    optimizer: int            # the states the ledger counts (master copy included)
    step_counters: int        # torch.optim's per-tensor step scalars, which the ledger leaves out
    param_count: int          # parameters of this GPU before ZeRO sharding
    tensors: int              # parameter tensors of this GPU


def local_shapes(c: MemoryConfig, stage: str) -> list[tuple[int, ...]]:
    """Shapes of the parameter tensors one GPU of ``stage`` holds after tensor parallelism."""
    m = c.model
    shapes = []
    for t in m.tensors():
        if t.place == "first" and stage not in ("only", "first"):
            continue
        if t.place == "last" and stage not in ("only", "last"):
            continue
        shape = list(t.shape)
        if t.tp_dim is not None:   # a vocabulary t does not divide is padded (Megatron)
            shape[t.tp_dim] = math.ceil(shape[t.tp_dim] / c.tp)
        shapes += [tuple(shape)] * (m.layers // c.pp if t.place == "layer" else 1)
    return shapes


def shard(shape: tuple[int, ...], parts: int) -> tuple[int, ...]:
    """One ZeRO shard: dimension 0 cut into ``parts`` (rounded up, as a padded shard)."""
    return (math.ceil(shape[0] / parts), *shape[1:])


def optimizer_elements(optimizer: str, shape: tuple[int, ...]) -> int:
    """fp32 state entries torch.optim keeps for one tensor (master copy not included)."""
    numel = math.prod(shape)
    if optimizer == "adafactor":
        return sum(shape) if len(shape) >= 2 else numel
    return {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2, "adam8bit": 0}[optimizer] * numel


def rank_states(c: MemoryConfig, stage: str = "first") -> RankStates:
    """Model-state bytes of TP rank 0 / DP rank 0 of ``stage`` ("only" when pp = 1)."""
    if c.pp == 1:
        stage = "only"
    shapes = local_shapes(c, stage)
    pb = model_states.param_bytes(c.precision)
    gb = model_states.grad_bytes(c.precision)
    master = 4 if c.precision == "mixed" else 0
    params = grads = optimizer = 0
    for shape in shapes:
        params_shape = shard(shape, c.dp) if c.zero >= 3 else shape
        grads_shape = shard(shape, c.dp) if c.zero >= 2 else shape
        opt_shape = shard(shape, c.dp) if c.zero >= 1 else shape
        params += pb * math.prod(params_shape)
        grads += gb * math.prod(grads_shape)
        optimizer += master * math.prod(opt_shape) + 4 * optimizer_elements(c.optimizer,
                                                                            opt_shape)
        if c.optimizer == "adam8bit":
            optimizer += 2 * math.prod(opt_shape)
    steps = STEP_COUNTER_BYTES * len(shapes) if c.optimizer in COUNTED_STEPS else 0
    return RankStates(params, grads, optimizer, steps, sum(math.prod(s) for s in shapes),
                      len(shapes))
