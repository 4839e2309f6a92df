"""Memory of one rank as the context-parallel group grows, and the cp a context needs.

A rank holds c = context/cp tokens of every layer's activations (Korthikanti Table 2 via
:mod:`app.sim.context_parallel.wall`), so everything linear in s shrinks by cp. What remains
depends on ``recompute``:

    none        standard attention keeps the rank's rows of the softmax: c × context per head
                (5·a·b·c·context bytes with dropout, 2·a·b·c·context without) — cp only
                divides the s² term once, it never makes it linear
    selective   FlashAttention: no score matrix, a logsumexp per query and head (4·a·b·c)
    full        every layer keeps its input (2·b·h·c, Table 2) and one layer at a time is
                rebuilt with FlashAttention in backward

plus the method's K/V buffers for the layer being computed (16-bit):

    ring        the block it computes on and the one arriving: 2 × 2·c·H_kv·d·b
    all_gather  the whole sequence's K and V: 2·context·H_kv·d·b — grows with the context,
                not with c (affordable with GQA's few kv heads, Llama 3's choice)
    ulysses     Q, K, V and O after the all-to-all: c·(2H + 2H_kv)·d·b
    hybrid      both: the all-to-all buffers of ulysses and the ring's two blocks

Model states are not counted here (they are sharded by the other parallelisms; see the memory
ledger): these are the activations and attention buffers alone, all layers on one GPU, so the
cp found is the least that could work.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.sim.context_parallel.wall import Coefficients, coefficients
from app.catalog.gpus import GPUS
from app.catalog.models import ModelShape

ACT_BYTES = 2
MAX_CP_SEARCH = 1 << 16


@dataclass(frozen=True)
class RankMemory:
    cp: int
    activations_bytes: float      # every layer's, this rank's tokens
    buffer_bytes: float           # K/V communication buffers of one layer
    total_bytes: float
    fits: bool


def feasible(method: str, cp: int, ulysses: int, model: ModelShape) -> str | None:
    """Why ``method`` cannot run on ``cp`` ranks of this model (None: it can)."""
    if method == "ulysses" and cp > 1:
        for name, value in (("heads", model.heads), ("kv_heads", model.kv_heads)):
            if value % cp:
                return f"cp ({cp}) must divide {name} ({value}) for ulysses"
    if method == "hybrid" and cp > 1:
        for name, value in (("cp", cp), ("heads", model.heads), ("kv_heads", model.kv_heads)):
            if value % ulysses:
                return f"ulysses ({ulysses}) must divide {name} ({value})"
    return None


def a2a_degree(method: str, cp: int, ulysses: int) -> int:
    return {"ring": 1, "all_gather": 1, "ulysses": cp, "hybrid": min(ulysses, cp)}[method]


def buffer_bytes(model: ModelShape, context: int, cp: int, micro_batch: int, method: str,
                 ulysses: int) -> float:
    if cp == 1:
        return 0.0
    d = model.hidden // model.heads
    c = context / cp
    per_kv_token = model.kv_heads * d * ACT_BYTES * micro_batch          # one of K or V
    if method == "all_gather":
        return 2 * context * per_kv_token
    u = a2a_degree(method, cp, ulysses)
    out = 0.0
    if u > 1:
        out += c * (2 * model.heads + 2 * model.kv_heads) * d * ACT_BYTES * micro_batch
    if cp // u > 1:
        out += 2 * 2 * c * per_kv_token
    return out


def activation_bytes(model: ModelShape, context: int, cp: int, micro_batch: int,
                     recompute: str, coeff: Coefficients | None = None) -> float:
    coeff = coeff or coefficients(model, micro_batch)
    c = context / cp
    L = model.layers
    if recompute == "none":
        return L * (coeff.per_token * c + coeff.per_token_squared * c * context)
    if recompute == "selective":
        return L * coeff.flash(c)
    if recompute == "full":
        return L * 2 * micro_batch * model.hidden * c + coeff.flash(c)
    raise ValueError(f"recompute must be none, selective or full, got {recompute!r}")


def rank_memory(model: ModelShape, context: int, cp: int, micro_batch: int, method: str,
                ulysses: int, recompute: str, gpu: str) -> RankMemory:
    act = activation_bytes(model, context, cp, micro_batch, recompute)
    buf = buffer_bytes(model, context, cp, micro_batch, method, ulysses)
    return RankMemory(cp, act, buf, act + buf, act + buf <= GPUS[gpu].capacity)


def cp_needed(model: ModelShape, context: int, micro_batch: int, method: str, ulysses: int,
              recompute: str, gpu: str) -> tuple[int | None, str]:
    """(the smallest power-of-two cp whose ranks fit ``context`` tokens, or None; why not).

    Powers of two only: a larger one never divides the heads when a smaller one does not, so
    the search stops at the first cp the method cannot run on (Ulysses: cp ≤ kv_heads)."""
    cp = 1
    while cp <= MAX_CP_SEARCH:
        if method == "hybrid" and 1 < cp < ulysses:      # hybrid starts at cp = ulysses
            cp *= 2
            continue
        problem = feasible(method, cp, ulysses, model)
        if problem is not None:
            return None, f"{problem}, and no smaller cp fits"
        if rank_memory(model, context, cp, micro_batch, method, ulysses, recompute, gpu).fits:
            return cp, ""
        cp *= 2
    if method == "all_gather" or recompute == "none":
        return None, (f"no cp up to {MAX_CP_SEARCH:,} fits: "
                      + ("the gathered K/V of the whole sequence does not shrink with cp"
                         if method == "all_gather" else
                         "each rank's rows of the s² softmax shrink only as context²/cp"))
    return None, f"no cp up to {MAX_CP_SEARCH:,} fits"
