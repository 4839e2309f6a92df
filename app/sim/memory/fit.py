"""Will it fit? The ledger of :mod:`app.sim.memory.ledger` against a GPU: the peak against the
capacity, the largest micro-batch that fits, what to change when it does not, and DeepSpeed's
estimator beside the ZeRO paper.

Every activation term and the logits buffer grow linearly with the micro-batch b while the
model states do not, so each stage's peak is A + B·b and the largest micro-batch that fits is
⌊(capacity − A) / B⌋ (the smallest over the pipeline's two ends).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from app.catalog.gpus import GPUS, Gpu
from app.sim.memory import model_states
from app.sim.memory.activations import RECOMPUTE
from app.sim.memory.ledger import Ledger, MemoryConfig, ledger, model_state_items, stage_ledger

MAX_MICRO_BATCH = 4096


@dataclass(frozen=True)
class Fit:
    gpu: Gpu
    peak: float
    fits: bool
    free: float                     # capacity − peak (negative: over by that much)
    max_micro_batch: int            # 0: not even one sample fits


@dataclass(frozen=True)
class Suggestion:
    label: str
    changes: tuple[tuple[str, object], ...]   # query parameter → new value
    peak: float
    fits: bool


def stage_peaks(c: MemoryConfig) -> list[float]:
    states = model_state_items(c)
    names = ("only",) if c.pp == 1 else ("first", "last")
    return [stage_ledger(c, name, states).peak for name in names]


def max_micro_batch(c: MemoryConfig, capacity: float) -> int:
    """The largest b whose peak fits in ``capacity`` (0 when even b = 1 does not)."""
    one = stage_peaks(replace(c, micro_batch=1))
    two = stage_peaks(replace(c, micro_batch=2))
    best = MAX_MICRO_BATCH
    for p1, p2 in zip(one, two):
        slope, fixed = p2 - p1, 2 * p1 - p2
        if slope <= 0:
            best = min(best, MAX_MICRO_BATCH if fixed <= capacity else 0)
            continue
        best = min(best, max(0, math.floor((capacity - fixed) / slope)))
    # guard against rounding at the boundary: the answer must fit, the next one must not
    while best > 0 and max(stage_peaks(replace(c, micro_batch=best))) > capacity:
        best -= 1
    return best


def fit(c: MemoryConfig, led: Ledger) -> Fit:
    gpu = GPUS[c.gpu]
    return Fit(gpu, led.peak, led.peak <= gpu.capacity, gpu.capacity - led.peak,
               max_micro_batch(c, gpu.capacity))


def _divides(n: int, *values: int) -> bool:
    return all(v % n == 0 for v in values)


def candidates(c: MemoryConfig, capacity: float) -> list[tuple[str, dict]]:
    """Single changes that lower the peak, as (label, changes)."""
    m = c.model
    out: list[tuple[str, dict]] = []
    if c.dp > 1:
        for stage in range(c.zero + 1, 4):
            what = {1: "optimizer states", 2: "gradients too", 3: "parameters too"}[stage]
            out.append((f"ZeRO-{stage}: shard the {what} over the {c.dp} data-parallel GPUs",
                        {"zero": stage}))
    if c.dp == 1:
        out.append(("dp 8 + ZeRO-3: shard every state over 8 data-parallel GPUs",
                    {"dp": 8, "zero": 3}))
    if c.zero >= 1 and c.dp * 2 <= 1024:
        out.append((f"dp {c.dp * 2}: twice the GPUs share the sharded states", {"dp": c.dp * 2}))
    for rc, why in (("selective", "recompute the attention scores (the s² terms)"),
                    ("full", "keep only each layer's input, recompute the rest")):
        if RECOMPUTE.index(rc) > RECOMPUTE.index(c.recompute):
            out.append((f"{rc} recompute: {why}", {"recompute": rc}))
    if c.tp > 1 and not c.sequence_parallel and m.seq % c.tp == 0:
        out.append(("sequence parallelism: split norms and dropouts along s",
                    {"sequence_parallel": True}))
    for t in (2, 4, 8, 16, 32, 64):
        if t >= 2 * c.tp and _divides(t, m.heads, m.kv_heads, m.ffn) and \
                (not c.sequence_parallel or m.seq % t == 0):
            out.append((f"tp {t}: split every layer over {t} GPUs", {"tp": t}))
            break
    for p in range(2 * c.pp, min(m.layers, 64) + 1):
        if m.layers % p == 0:
            out.append((f"pp {p}: {m.layers // p} layers per stage", {"pp": p}))
            break
    if c.micro_batch > 1:
        b = max(1, max_micro_batch(c, capacity))
        if b < c.micro_batch:
            out.append((f"micro-batch {b} (gradient accumulation keeps the global batch)",
                        {"micro_batch": b}))
    if c.optimizer in ("adam", "adamw"):
        out.append(("8-bit Adam: 1-byte momentum and variance", {"optimizer": "adam8bit"}))
        out.append(("Adafactor: factored second moments, no momentum",
                    {"optimizer": "adafactor"}))
    if c.precision == "fp32":
        out.append(("mixed precision: 16-bit activations", {"precision": "mixed"}))
    return out


class Peaks:
    """The peak of each set-up asked for, each computed once: the suggestions and the plan's
    first round try the same changes."""

    def __init__(self):
        self.known: dict[MemoryConfig, float] = {}

    def __call__(self, c: MemoryConfig) -> float:
        if c not in self.known:
            self.known[c] = ledger(c).peak
        return self.known[c]


def suggestions(c: MemoryConfig, led: Ledger, peak_of=None) -> tuple[Suggestion, ...]:
    """What to change when the peak is over the GPU: each single change that helps, those that
    fit first, then a larger GPU."""
    peak_of = peak_of or Peaks()
    capacity = GPUS[c.gpu].capacity
    found = []
    for label, changes in candidates(c, capacity):
        peak = peak_of(replace(c, **changes))
        if peak < led.peak * 0.995:
            found.append(Suggestion(label, tuple(changes.items()), peak, peak <= capacity))
    found.sort(key=lambda s: (not s.fits, s.peak))
    for gpu in GPUS.values():
        if gpu.capacity > capacity and led.peak <= gpu.capacity:
            found.append(Suggestion(f"a larger GPU: {gpu.name}", (("gpu", gpu.key),),
                                    led.peak, True))
            break
    return tuple(found)


def plan(c: MemoryConfig, steps: int = 8, peak_of=None) -> tuple[Suggestion, ...]:
    """Greedy: apply the change that lowers the peak most until it fits (same GPU)."""
    peak_of = peak_of or Peaks()
    capacity = GPUS[c.gpu].capacity
    taken: list[Suggestion] = []
    changes: dict = {}
    peak = peak_of(c)
    while peak > capacity and len(taken) < steps:
        options = [(peak_of(replace(c, **{**changes, **step})), label, step)
                   for label, step in candidates(replace(c, **changes), capacity)]
        if not options:
            break
        best_peak, label, step = min(options, key=lambda o: o[0])
        if best_peak >= peak * 0.995:
            break
        changes.update(step)
        peak = best_peak
        taken.append(Suggestion(label, tuple(changes.items()), peak, peak <= capacity))
    return tuple(taken)


@dataclass(frozen=True)
class Convention:
    zero: int
    paper: float
    deepspeed: float
    paper_formula: str
    deepspeed_formula: str
    largest_layer: float          # Φ_max, parameters of the largest layer on this GPU


def deepspeed_comparison(c: MemoryConfig) -> tuple[Convention, ...]:
    """Model-state bytes per GPU for ZeRO-2 and ZeRO-3 with mixed-precision Adam, the paper's
    way and DeepSpeed's estimator's (which counts fp32 gradients: 18 bytes per parameter
    partitioned, plus 4 bytes × the largest layer under ZeRO-3). Ψ is this GPU's share
    Ψ/(t·p); N_d the data-parallel size."""
    local = c.psi / (c.tp * c.pp)
    largest = max(t.numel / (c.tp if t.tp_dim is not None else 1) for t in c.model.tensors())
    out = []
    for stage in (2, 3):
        paper = model_states.per_gpu(local, dp=c.dp, zero=stage, optimizer="adam",
                                     precision="mixed").total
        out.append(Convention(
            stage, paper, model_states.deepspeed_convention(local, c.dp, stage, largest),
            "2Ψ + 14Ψ/N_d" if stage == 2 else "16Ψ/N_d",
            "2Ψ + 18Ψ/N_d" if stage == 2 else "4·Φ_max + 18Ψ/N_d", largest))
    return tuple(out)
