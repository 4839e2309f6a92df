"""Every parallel mix of a model on a cluster, its memory and its step time (chapter 11).

1. Enumerate (:func:`grid`): tp, cp, ep, pp, interleaving v, dp, ZeRO stage, micro-batch and
   recomputation, pruned by divisibility first — tp divides the heads, the key-value heads and
   the MLP; cp divides the sequence in 2·cp chunks (Megatron's causal load balancing); ep
   divides the experts and dp·cp; pp ≤ layers with the last stage keeping ≥ 1 layer (uneven
   stages as Llama 3's 126 layers on 16 stages); v divides a stage's layers; dp = world /
   (tp·cp·pp) divides the global batch; b divides a replica's share; m ≥ p. ZeRO-3 only with
   pp = 1 (neither Megatron-LM nor DeepSpeed pipelines it). DualPipe (DeepSeek-V3's schedule,
   two chunks a rank fed from both ends) for MoE models, or when pinned: p even, m ≥ p and
   even.
2. Memory (:mod:`app.sim.planner.memory`): chapter 1's ledger, vectorised over the grid.
3. Time (:mod:`app.sim.planner.cost`): per micro-batch and stage, then the step.
4. Rank: those that fit first by tokens/s, then those that do not; the list is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil

import numpy as np

from app.sim.planner.cost import Cluster, step_costs
from app.sim.planner.memory import peak_bytes
from app.sim.planner.model import PlanModel

RECOMPUTES = ("none", "selective", "full")
MAX_TP, MAX_CP, MAX_PP, MAX_V, MAX_MICRO_BATCH = 64, 64, 128, 8, 16
MAX_LISTED = 400
"""Candidates returned (fitting ones first): keeps the JSON well under 5 MB."""


@dataclass(frozen=True)
class Pins:
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    cp: int | None = None
    ep: int | None = None
    zero: int | None = None
    micro_batch: int | None = None
    recompute: str | None = None
    schedule: str | None = None     # 1f1b | interleaved_1f1b | dualpipe
    chunks: int | None = None       # v


def _pow2(high: int) -> list[int]:
    return [2 ** k for k in range(0, 20) if 2 ** k <= high]


def _ok(pin, value) -> bool:
    return pin is None or pin == value


def grid(model: PlanModel, world: int, global_batch: int, pins: Pins = Pins()
         ) -> tuple[dict[str, np.ndarray], list[tuple[str, str]]]:
    """The candidate mixes as parallel arrays, and the families refused by divisibility
    (family, reason)."""
    L, s = model.layers, model.seq
    rejected: list[tuple[str, str]] = []
    tps = []
    for t in _pow2(min(MAX_TP, world)):
        if not _ok(pins.tp, t):
            continue
        bad = [f"{n} ({v})" for n, v in (("heads", model.heads), ("kv_heads", model.kv_heads),
                                            ("ffn", model.ffn if not model.moe else model.heads))
               if v % t]
        if bad:
            rejected.append((f"tp {t}", f"tp {t} does not divide {', '.join(bad)}"))
        else:
            tps.append(t)
    cps = [c for c in _pow2(MAX_CP) if _ok(pins.cp, c) and (c == 1 or s % (2 * c) == 0)]
    eps = ([e for e in range(1, model.experts + 1) if model.experts % e == 0]
           if model.moe else [1])
    eps = [e for e in eps if _ok(pins.ep, e)]
    pps = []
    for p in range(1, min(MAX_PP, L) + 1):
        if world % p or not _ok(pins.pp, p):
            continue
        per = ceil(L / p)
        if L - (p - 1) * per < 1:
            continue
        pps.append(p)
    names = ("tp", "cp", "ep", "pp", "v", "dp", "zero", "b", "m", "rc", "dual")
    blocks: list[np.ndarray] = []   # each (rows, 11), in the order of ``names``
    dual_ok = model.moe or pins.schedule == "dualpipe"
    recomputes = np.array([r for r, rc in enumerate(RECOMPUTES) if _ok(pins.recompute, rc)],
                          dtype=np.int64)
    for t in tps:
        for c in cps:
            for p in pps:
                if world % (t * c * p):
                    continue
                d = world // (t * c * p)
                if not _ok(pins.dp, d):
                    continue
                if global_batch % d:
                    rejected.append((f"tp {t} cp {c} pp {p} dp {d}",
                                     f"dp {d} does not divide the global batch ({global_batch})"))
                    continue
                share = global_batch // d
                per = ceil(L / p)
                vs = [(1, 0)] + ([(v, 0) for v in range(2, MAX_V + 1) if per % v == 0]
                                 if p > 1 else [])
                if dual_ok and p > 1 and p % 2 == 0:
                    vs.append((1, 1))
                zeros = np.array([z for z in range(4) if _ok(pins.zero, z)
                                  and not (d * c == 1 and z) and not (z == 3 and p > 1)],
                                 dtype=np.int64)
                # the (ZeRO, b, m, recompute) rows of each v: b slowest, recompute fastest,
                # as nested loops give them; they do not depend on ep
                tails = {}
                for v, dual in vs:
                    if pins.chunks is not None and pins.chunks != (2 if dual else v):
                        continue
                    sched = "dualpipe" if dual else "interleaved_1f1b" if v > 1 else "1f1b"
                    if pins.schedule is not None and pins.schedule != sched:
                        continue
                    bs = np.array([b for b in range(1, min(MAX_MICRO_BATCH, share) + 1)
                                   if share % b == 0 and _ok(pins.micro_batch, b)
                                   and not (p > 1 and (share // b < p
                                                       or (v > 1 and (share // b) % p)
                                                       or (dual and (share // b) % 2)))],
                                  dtype=np.int64)
                    nb, nz, nr = len(bs), len(zeros), len(recomputes)
                    if nb and nz and nr:
                        b_ = np.repeat(bs, nz * nr)
                        tails[(v, dual)] = np.stack(
                            [np.tile(np.repeat(zeros, nr), nb), b_, share // b_,
                             np.tile(recomputes, nb * nz), np.full(len(b_), dual)], axis=1)
                for e in eps:
                    if (d * c) % e:
                        continue
                    for (v, _), tail in tails.items():
                        block = np.empty((len(tail), len(names)), dtype=np.int64)
                        block[:, :6] = (t, c, e, p, v, d)
                        block[:, 6:] = tail
                        blocks.append(block)
    table = (np.concatenate(blocks) if blocks
             else np.empty((0, len(names)), dtype=np.int64))
    return {k: np.ascontiguousarray(table[:, i]) for i, k in enumerate(names)}, rejected


@dataclass(frozen=True)
class Candidate:
    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    zero: int
    micro_batch: int
    recompute: str
    schedule: str
    chunks: int
    microbatches: int
    fits: bool
    peak_bytes: float
    step_s: float
    tokens_per_s: float
    tflops_per_gpu: float
    mfu: float
    bound: str
    reasons: tuple[str, ...]
    budget: dict           # seconds per kind: compute, tp, cp, ep, dp, pp, bubble, optimizer
    memory: dict           # bytes: states, activations, buffers

    def to_dict(self) -> dict:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "cp": self.cp, "ep": self.ep,
                "zero": self.zero, "micro_batch": self.micro_batch,
                "recompute": self.recompute, "schedule": self.schedule,
                "chunks": self.chunks, "microbatches": self.microbatches, "fits": self.fits,
                "peak_bytes": self.peak_bytes, "step_s": self.step_s,
                "tokens_per_s": self.tokens_per_s, "tflops_per_gpu": self.tflops_per_gpu,
                "mfu": self.mfu, "bound": self.bound, "reasons": list(self.reasons),
                "budget_s": self.budget, "memory_bytes": self.memory}


@dataclass(frozen=True)
class Plan:
    searched: int
    fitting: int
    best: Candidate | None
    candidates: tuple[Candidate, ...]
    truncated: bool
    rejected: tuple[tuple[str, str], ...]
    message: str
    points: tuple[tuple[float, float, bool], ...] = field(default=())
    """(peak GB, tokens/s, fits, breakdown) of every mix searched (sampled to about 1200) for the
    Pareto plot; the breakdown is the hover text of its point."""


KINDS = ("compute", "tp", "cp", "ep", "pp", "dp", "bubble", "optimizer")


def evaluate(model: PlanModel, cluster: Cluster, global_batch: int, g: dict[str, np.ndarray]
             ) -> dict[str, np.ndarray]:
    """Memory and time of every candidate in the grid ``g`` (arrays in, arrays out)."""
    mem = peak_bytes(model, g, cluster.gpu)
    cost = step_costs(model, cluster, global_batch, g)
    return {**mem, **cost}


def _reasons(model: PlanModel, cluster: Cluster, g, r, i) -> list[str]:
    out = []
    gb = 2 ** 30                  # GiB, as the deck's axis and the GPUs' capacities
    tp, cp, pp, dp, ep, v = (int(g[k][i]) for k in ("tp", "cp", "pp", "dp", "ep", "v"))
    gpn = cluster.gpus_per_node
    if not r["fits"][i]:
        cap = cluster.gpu.capacity
        acts, states = r["activations"][i], r["states"][i]
        where = "stage 0" if pp > 1 else "each GPU"
        big = ("activations", acts) if acts >= states else ("model states", states)
        out.append(f"pp {pp} leaves {big[1] / gb:.0f} GiB of {big[0]} on {where}: peak "
                   f"{r['peak'][i] / gb:.0f} GiB over {cap / gb:.0f} GiB")
    step = r["step"][i]
    if tp > gpn:
        out.append(f"tp {tp} crosses nodes: its all-reduces run on InfiniBand")
    if r["tp"][i] > 0.15 * step:
        out.append(f"tensor-parallel collectives take {100 * r['tp'][i] / step:.0f} % of the step")
    if tp * cp > gpn and cp > 1:
        out.append(f"cp {cp} crosses nodes: K/V all-gathers run on InfiniBand")
    if r["bubble"][i] > 0.15 * step:
        out.append(f"pipeline bubble {100 * r['bubble'][i] / step:.0f} % of the step "
                   f"(p = {pp}, m = {int(g['m'][i])}, v = {v})")
    if r["dp"][i] > 0.10 * step:
        out.append(f"exposed data-parallel traffic {100 * r['dp'][i] / step:.0f} % of the step")
    if r["ep"][i] > 0.15 * step:
        out.append(f"expert all-to-alls take {100 * r['ep'][i] / step:.0f} % of the step")
    if L_uneven(model, pp):
        out.append(f"{model.layers} layers on {pp} stages: {ceil(model.layers / pp)} on the "
                   "busiest, fewer on the last")
    return out


def L_uneven(model: PlanModel, pp: int) -> bool:
    return model.layers % pp != 0


def candidate(model, cluster, g, r, i) -> Candidate:
    v = int(g["v"][i])
    dual = "dual" in g and bool(g["dual"][i])
    return Candidate(
        tp=int(g["tp"][i]), pp=int(g["pp"][i]), dp=int(g["dp"][i]), cp=int(g["cp"][i]),
        ep=int(g["ep"][i]), zero=int(g["zero"][i]), micro_batch=int(g["b"][i]),
        recompute=RECOMPUTES[int(g["rc"][i])],
        schedule="dualpipe" if dual else "interleaved_1f1b" if v > 1 else "1f1b",
        chunks=2 if dual else v,
        microbatches=int(g["m"][i]), fits=bool(r["fits"][i]), peak_bytes=float(r["peak"][i]),
        step_s=float(r["step"][i]), tokens_per_s=float(r["tokens_per_s"][i]),
        tflops_per_gpu=float(r["tflops"][i]), mfu=float(r["mfu"][i]), bound=r["bound"][i],
        reasons=tuple(_reasons(model, cluster, g, r, i)),
        budget={k: float(r[k][i]) for k in KINDS},
        memory={k: float(r[k][i]) for k in ("states", "activations", "buffers")})


def search(model: PlanModel, cluster: Cluster, global_batch: int, pins: Pins = Pins(),
           listed: int = MAX_LISTED) -> Plan:
    world = cluster.gpus
    g, rejected = grid(model, world, global_batch, pins)
    n = len(g["tp"])
    if n == 0:
        why = "; ".join(reason for _, reason in rejected[:6]) or "no tp, pp, cp split applies"
        return Plan(0, 0, None, (), False, tuple(rejected[:50]),
                    f"no mix of tp·cp·pp·dp divides {world} GPUs, the model and a global batch "
                    f"of {global_batch} under these pins: {why}")
    r = evaluate(model, cluster, global_batch, g)
    fits = r["fits"]
    order = np.lexsort((-r["tokens_per_s"], ~fits))      # fitting first, fastest first
    shown = order[:listed]
    cands = tuple(candidate(model, cluster, g, r, int(i)) for i in shown)
    fitting = int(fits.sum())
    best = cands[0] if fitting else None
    if fitting:
        message = (f"{fitting:,} of {n:,} mixes fit; the best runs tp {best.tp} pp {best.pp} "
                   f"dp {best.dp} cp {best.cp}")
    else:
        least = cands[0] if cands else None
        message = (f"no mix fits in {cluster.gpu.capacity / 2**30:.0f} GiB: the leanest needs "
                   f"{min(r['peak']) / 2**30:.0f} GiB per GPU — more GPUs, a larger GPU or a "
                   "shorter sequence")
        del least
    for fam, reason in _families(g, r):
        rejected.append((fam, reason))
    shown_points = np.arange(0, n, max(1, n // 1200))
    pts = tuple(zip((r["peak"][shown_points] / 1e9).tolist(),
                    r["tokens_per_s"][shown_points].tolist(), fits[shown_points].tolist(),
                    _tips(g, r, shown_points)))
    return Plan(n, fitting, best, cands, n > listed, tuple(rejected[:60]), message, pts)


def _tips(g, r, idx: np.ndarray) -> list[str]:
    """Each point's breakdown in a line: the mix, its rate and memory, its largest time shares
    (the columns taken out of the grid once, as Python numbers: indexing numpy arrays one
    element at a time costs more than the formatting)."""
    mix = {k: g[k][idx].tolist() for k in ("tp", "pp", "v", "dp", "cp", "ep", "zero", "b", "rc")}
    share = {k: (r[k][idx] / r["step"][idx]).tolist() for k in KINDS}
    rate, peak, fits = (r["tokens_per_s"][idx].tolist(), (r["peak"][idx] / 2**30).tolist(),
                        r["fits"][idx].tolist())
    tips = []
    for j in range(len(idx)):
        shares = sorted(((share[k][j], k) for k in KINDS), reverse=True)
        parts = ", ".join(f"{k} {100 * f:.0f} %" for f, k in shares[:4] if f >= 0.005)
        tips.append(f"tp {mix['tp'][j]} pp {mix['pp'][j]} v {mix['v'][j]} dp {mix['dp'][j]} "
                    f"cp {mix['cp'][j]} ep {mix['ep'][j]} ZeRO {mix['zero'][j]} b {mix['b'][j]} "
                    f"{RECOMPUTES[int(mix['rc'][j])]}: {rate[j]:,.0f} tokens/s, {peak[j]:.0f} GiB"
                    f"{'' if fits[j] else ' (does not fit)'}; {parts}")
    return tips


def _families(g, r) -> list[tuple[str, str]]:
    """(tp, pp) families of which no member fits: the leanest member's reason."""
    out = []
    keys = g["tp"] * 1000 + g["pp"]
    for key in np.unique(keys):
        idx = np.nonzero(keys == key)[0]
        if r["fits"][idx].any():
            continue
        i = idx[np.argmin(r["peak"][idx])]
        tp, pp = int(g["tp"][i]), int(g["pp"][i])
        acts, states = r["activations"][i], r["states"][i]
        what = (f"{acts / 2**30:.0f} GiB of activations" if acts >= states
                else f"{states / 2**30:.0f} GiB of model states")
        where = "on stage 0" if pp > 1 else "on each GPU"
        out.append((f"tp {tp} pp {pp}", f"pp {pp} leaves {what} {where} even at its leanest "
                                        f"(peak {r['peak'][i] / 2**30:.0f} GiB)"))
    return out
