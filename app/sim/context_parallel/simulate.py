"""Context parallelism on real numbers: ``simulate(params) → ContextParallelTrace``.

1. draw the seeded Q, K, V (:mod:`.inputs`) and lay the tokens out over the ranks
   (:mod:`.layout`: contiguous or zigzag);
2. run the chosen method step by step on the simulated ranks (:mod:`.methods`), moving the real
   K/V blocks and all-to-all pieces between them and merging with the online softmax
   (:mod:`.attention`);
3. compare the gathered output with plain attention computed on the whole sequence
   (:func:`.attention.reference_attention`) — ``max_abs_error``;
4. count what each rank sent (the sum of its transfers, which the tests check against the
   formulas of :mod:`.volumes`) and the unmasked scores it computed;
5. at the scale of the preset model and ``context`` tokens: the s² wall (:mod:`.wall`), memory
   per rank as cp grows (:mod:`.memory`), the α–β time of a layer and the overlap condition
   (:mod:`.cost`).

References: Liu, Zaharia & Abbeel 2023, "Ring Attention with Blockwise Transformers for
Near-Infinite Context"; Jacobs et al. 2023, "DeepSpeed Ulysses"; Megatron-LM / Transformer
Engine context parallelism (cp_comm_type p2p, all_gather, a2a, a2a+p2p); Meta 2024, "The Llama 3
Herd of Models" §3.3 (all-gather CP); Korthikanti et al. 2022, Table 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from app.caches import TRACES, memoised
from app.sim.context_parallel import captions, cost, memory
from app.sim.context_parallel.attention import reference_attention
from app.sim.context_parallel.inputs import make_inputs
from app.sim.context_parallel.layout import tokens_table
from app.sim.context_parallel.methods import Rows, Run, Step, run
from app.sim.context_parallel.params import ContextParallelParams
from app.sim.context_parallel.volumes import elements_sent
from app.sim.context_parallel.wall import CONTEXTS, Wall, wall
from app.catalog.gpus import GPUS
from app.catalog.models import PRESETS
from app.sim.trace import Frame, plain, readonly

NEEDED_AT = (131072, 1048576)
"""Contexts whose cp the wall panel answers (Llama 3's 128k; a million tokens)."""


@dataclass(frozen=True)
class RankSummary:
    rank: int
    tokens: tuple[int, ...]          # positions it holds (its input rows and output rows)
    unmasked_scores: int             # scores it computes, over all steps and its query heads
    elements_sent: int               # the sum of its transfers in one forward of one layer
    query_tokens: tuple[int, ...]    # positions of its queries when it attends
    query_heads: tuple[int, ...]     # its query heads then
    kv_heads: tuple[int, ...]        # its key/value heads then

    def to_dict(self) -> dict:
        return {"rank": self.rank, "tokens": list(self.tokens),
                "unmasked_scores": self.unmasked_scores, "elements_sent": self.elements_sent,
                "query_tokens": list(self.query_tokens), "query_heads": list(self.query_heads),
                "kv_heads": list(self.kv_heads)}


@dataclass(frozen=True)
class RankFrame:
    rank: int
    kv_block: int | None             # where the block it computes on started (ring origin)
    holds: tuple[int, ...]           # ranks whose tokens' K/V it holds
    computed: bool                   # it computed scores this step
    skipped: bool                    # it had a block but all of it lay above the causal diagonal
    unmasked_scores: int             # scores computed this step
    rows: tuple[dict, ...]           # running max / sum of a few query rows, before and after

    def to_dict(self) -> dict:
        return {"rank": self.rank, "kv_block": self.kv_block, "holds": list(self.holds),
                "computed": self.computed, "skipped": self.skipped,
                "unmasked_scores": self.unmasked_scores, "rows": list(self.rows)}


@dataclass(frozen=True)
class ContextParallelFrame(Frame):
    source: Step | None = field(default=None, repr=False)
    """The simulation's step this frame shows; :attr:`ranks` are read from it when asked for
    (a trace of 64 ranks × 66 steps holds one step object per frame, not 4,224 rank objects
    with their rows as dicts — cheaper to build, and to size for the trace cache)."""

    @property
    def ranks(self) -> tuple[RankFrame, ...]:
        step = self.source
        if step is None:
            return ()
        rows = _rows(step)
        return tuple(RankFrame(r, b, h, w > 0, b is not None and w == 0, w, rows[r])
                     for r, (b, h, w) in enumerate(zip(step.kv_block, step.held, step.unmasked)))

    def rank(self, r: int) -> RankFrame:
        """``ranks[r]`` alone (the deck reads a few ranks' rows of every frame)."""
        step = self.source
        b, w = step.kv_block[r], step.unmasked[r]
        return RankFrame(r, b, step.held[r], w > 0, b is not None and w == 0, w,
                         _rows(step, r)[0])

    def to_dict(self) -> dict:
        return {"step": self.step, "phase": self.phase, "caption": self.caption,
                "transfers": [{"src": t.src, "dst": t.dst, "elements": t.elements,
                               "label": t.label} for t in self.transfers],
                "ranks": [r.to_dict() for r in self.ranks]}


@dataclass(frozen=True)
class AtScale:
    """The memory and time panels: the preset model with ``context`` tokens."""

    wall: Wall
    tflops: float
    memory: tuple[tuple[int, memory.RankMemory | None, str], ...]  # (cp, memory, why not)
    cp_needed: tuple[tuple[int, str, int | None, str], ...]       # (context, method, cp, why)
    placements: dict[str, cost.LayerTime | None]
    methods: tuple[tuple[str, cost.LayerTime | None, str], ...]
    sweep: tuple[tuple[int, str, cost.LayerTime | None, str], ...]
    overlap: cost.Overlap
    why_not: str                      # why the chosen method cannot run at this cp on the preset


@dataclass(frozen=True)
class ContextParallelTrace:
    params: ContextParallelParams
    q: np.ndarray                     # (seq, heads, d)
    k: np.ndarray                     # (seq, kv_heads, d)
    v: np.ndarray
    output: np.ndarray                # (seq, heads, d), the CP way, token order
    reference: np.ndarray             # plain attention
    max_abs_error: float
    ranks: tuple[RankSummary, ...]
    frames: tuple[ContextParallelFrame, ...]
    run: Run = field(repr=False)
    scale: AtScale = field(repr=False)

    @property
    def elements_formula(self) -> str:
        return volume_formula(self.params)

    def to_dict(self) -> dict:
        p = self.params
        return {
            "method": p.method, "cp": p.cp, "ulysses": p.ulysses, "ring_size": p.ring_size,
            "seq": p.example_tokens, "heads": p.heads, "kv_heads": p.kv_heads, "head_dim": p.head_dim,
            "causal": p.causal, "balance": p.balance, "seed": p.seed,
            "q": plain(self.q), "k": plain(self.k), "v": plain(self.v),
            "output": plain(self.output), "max_abs_error": self.max_abs_error,
            "logsumexp": plain(self.run.lse),
            "ranks": [r.to_dict() for r in self.ranks],
            "elements_formula": self.elements_formula,
            "frames": [f.to_dict() for f in self.frames],
            "scale": scale_dict(p, self.scale),
        }


def volume_formula(p) -> str:
    n, d, h, kv, cp = p.example_tokens // p.cp, p.head_dim, p.heads, p.kv_heads, p.cp
    value = elements_sent(p.method, cp, p.example_tokens, h, kv, d, p.ulysses)
    if p.method in ("ring", "all_gather"):
        return f"2·(cp−1)·(seq/cp)·kv_heads·head_dim = 2·{cp - 1}·{n}·{kv}·{d} = {value:,}"
    if p.method == "ulysses":
        return (f"(cp−1)/cp·(seq/cp)·head_dim·(2·heads + 2·kv_heads) = {cp - 1}/{cp}·{n}·{d}·"
                f"{2 * h + 2 * kv} = {value:,}")
    u, ring = p.ulysses, cp // p.ulysses
    return (f"(u−1)/u·(seq/cp)·head_dim·(2·heads + 2·kv_heads) + 2·(cp/u−1)·(seq/cp)·kv_heads·"
            f"head_dim = {u - 1}/{u}·{n}·{d}·{2 * h + 2 * kv} + 2·{ring - 1}·{n}·{kv}·{d} = "
            f"{value:,}")


def _rows(step, only: int | None = None) -> list[tuple[dict, ...]]:
    """Per rank, the shown rows of its running softmax as JSON-ready dicts (``only``: of that
    rank alone, a list of one)."""
    rows = step.rows
    if rows is None:
        return [()] * (len(step.unmasked) if only is None else 1)
    if only is not None:
        rows = Rows(*(a[only:only + 1] for a in (rows.tokens, rows.m_before, rows.m_after,
                                                  rows.l_before, rows.l_after, rows.correction)))
    tokens = rows.tokens.tolist()
    m0 = np.where(np.isfinite(rows.m_before), rows.m_before, np.nan).tolist()
    m1, l0, l1 = rows.m_after.tolist(), rows.l_before.tolist(), rows.l_after.tolist()
    f = rows.correction.tolist()
    rescaled = (rows.l_before * rows.correction).tolist()
    # JSON has no −∞: a row that has seen no key yet has m_before None
    return [tuple({"token": tokens[r][i], "m_before": None if m0[r][i] != m0[r][i] else m0[r][i],
                   "m_after": m1[r][i], "l_before": l0[r][i], "l_rescaled": rescaled[r][i],
                   "l_after": l1[r][i], "correction": f[r][i]}
                  for i in range(len(tokens[r])))
            for r in range(len(tokens))]


def frames_of(p, result: Run, error: float, sent: list[int]) -> tuple[ContextParallelFrame, ...]:
    texts = captions.captions(p, result, error, sent)
    return tuple(ContextParallelFrame(k, text, step.transfers, step.phase, step)
                 for k, (step, text) in enumerate(zip(result.steps, texts)))


@memoised(TRACES)
def plain_attention(seq: int, heads: int, kv_heads: int, head_dim: int, seed: int,
                    causal: bool) -> np.ndarray:
    """The reference of the seeded inputs (read-only): it depends on neither cp, the method nor
    the layout, so moving those (cp is the key slider) reuses it."""
    return readonly(reference_attention(*make_inputs(seq, heads, kv_heads, head_dim, seed),
                                        causal))


def simulate(p: ContextParallelParams) -> ContextParallelTrace:
    q, k, v = make_inputs(p.example_tokens, p.heads, p.kv_heads, p.head_dim, p.seed)
    tokens = tokens_table(p.example_tokens, p.cp, p.balance)
    result = run(p.method, q, k, v, tokens, p.ulysses, p.causal)
    ref = plain_attention(p.example_tokens, p.heads, p.kv_heads, p.head_dim, p.seed, p.causal)
    error = float(np.abs(result.output - ref).max())
    sent = [0] * p.cp
    for step in result.steps:
        for t in step.transfers:
            sent[t.src] += t.elements
    unmasked = np.sum([s.unmasked for s in result.steps], axis=0)
    ranks = tuple(RankSummary(r, tuple(int(x) for x in tokens[r]), int(unmasked[r]), sent[r],
                              tuple(int(x) for x in result.q_tokens[r]),
                              tuple(int(x) for x in result.q_heads[r]),
                              tuple(int(x) for x in result.kv_heads[r]))
                  for r in range(p.cp))
    for array in (q, k, v):
        readonly(array)
    return ContextParallelTrace(p, q, k, v, readonly(result.output), ref, error, ranks,
                                frames_of(p, result, error, sent), result, at_scale(p))


# --- at scale ---------------------------------------------------------------------------------

def _scale_key(p: ContextParallelParams) -> tuple:
    return (p.method, p.cp, p.ulysses, p.causal, p.balance, p.preset, p.seq, p.micro_batch,
            p.recompute, p.gpu, p.gpu_tflops, p.alpha_us, p.intra_node_gbs, p.inter_node_gbs,
            p.gpus_per_node)


def at_scale(p: ContextParallelParams) -> AtScale:
    return _at_scale(*_scale_key(p))


@lru_cache(maxsize=64)
def _at_scale(method, cp, ulysses, causal, balance, preset, context, micro_batch, recompute,
              gpu, gpu_tflops, alpha_us, intra_gbs, inter_gbs, gpus_per_node) -> AtScale:
    model = PRESETS[preset]
    tflops = cost.peak_tflops(gpu, gpu_tflops)
    sc = cost.Scale(model, context, micro_batch, balance, causal, tflops, alpha_us, intra_gbs,
                    inter_gbs, gpus_per_node)
    the_wall = wall(model, micro_batch, causal, gpu, context)
    mem = []
    for c in cost.CP_SWEEP:
        why = memory.feasible(method, c, ulysses, model) or (
            f"ulysses ({ulysses}) is more than cp ({c})"
            if method == "hybrid" and 1 < c < ulysses else "")
        mem.append((c, None if why else memory.rank_memory(model, context, c, micro_batch,
                                                            method, ulysses, recompute, gpu),
                    why))
    needed = []
    for n in sorted({*NEEDED_AT, context}):
        for m in cost.METHODS:
            cp_n, why = memory.cp_needed(model, n, micro_batch, m, ulysses, recompute, gpu)
            needed.append((n, m, cp_n, why))
    why_not = memory.feasible(method, cp, ulysses, model) or ""
    placements = {pl: None if why_not else cost.layer_time(sc, method, cp, ulysses, pl)
                  for pl in ("nvlink", "infiniband", "placed")}
    sweep = cost.sweep(sc, ulysses)
    methods = tuple((m, lt, why) for c, m, lt, why in sweep if c == cp) if cp in cost.CP_SWEEP \
        else tuple((m, None if memory.feasible(m, cp, ulysses, model) else
                    cost.layer_time(sc, m, cp, ulysses, "placed"),
                    memory.feasible(m, cp, ulysses, model) or "") for m in cost.METHODS)
    return AtScale(the_wall, tflops, tuple(mem), tuple(needed), placements, methods, sweep,
                   cost.overlap(sc, method, cp, ulysses), why_not)


def _time(lt: cost.LayerTime | None) -> dict | None:
    if lt is None:
        return None
    return {"compute_us": lt.compute_us, "comm_us": lt.comm_us, "total_us": lt.total_us,
            "exposed_us": lt.exposed_us, "rest_of_layer_us": lt.rest_us, "ring_steps": lt.steps,
            "step_comm_us": lt.step_comm_us}


def _memory(m: memory.RankMemory) -> dict:
    return {"activations_bytes": m.activations_bytes, "buffer_bytes": m.buffer_bytes,
            "total_bytes": m.total_bytes, "fits": m.fits}


def scale_dict(p: ContextParallelParams, s: AtScale) -> dict:
    w = s.wall

    def point(pt) -> dict:
        return {"context": pt.context, "score_bytes": pt.score_bytes,
                "flash_stats_bytes": pt.flash_stats_bytes, "attention_flops": pt.attention_flops,
                "other_flops": pt.other_flops, "activations_bytes": pt.activations_bytes,
                "activations_flash_bytes": pt.activations_flash_bytes,
                "model_activations_bytes": pt.model_activations_bytes,
                "model_flash_bytes": pt.model_flash_bytes}

    return {
        "preset": p.preset, "context": p.seq, "micro_batch": p.micro_batch, "gpu": p.gpu,
        "gpu_name": GPUS[p.gpu].name, "gpu_tflops": s.tflops,
        "capacity_bytes": w.capacity_bytes, "layers": w.model.layers,
        "head_dim": w.model.hidden // w.model.heads, "model_heads": w.model.heads,
        "model_kv_heads": w.model.kv_heads,
        "wall": {"contexts": list(CONTEXTS), "points": [point(x) for x in w.points],
                 "at_context": point(w.at_context), "scores_limit": w.scores_limit,
                 "activations_limit": w.activations_limit, "flash_limit": w.flash_limit,
                 "attention_dominates_from": w.attention_dominates_from},
        "memory": {"recompute": p.recompute, "method": p.method,
                   "per_cp": [{"cp": c, "why_not": why, **({} if m is None else _memory(m))}
                              for c, m, why in s.memory],
                   "cp_needed": [{"context": n, "method": m, "cp": c, "why_not": why}
                                 for n, m, c, why in s.cp_needed]},
        "time": {"why_not": s.why_not,
                 "placements": {k: _time(v) for k, v in s.placements.items()},
                 "methods": [{"method": m, "why_not": why, "time": _time(lt),
                              "memory": None if lt is None else _memory(
                                  memory.rank_memory(w.model, p.seq, p.cp, p.micro_batch, m,
                                                     p.ulysses, p.recompute, p.gpu))}
                             for m, lt, why in s.methods],
                 "sweep": [{"cp": c, "method": m, "why_not": why, "time": _time(lt)}
                           for c, m, lt, why in s.sweep]},
        "overlap": {"method": s.overlap.method, "applies": s.overlap.applies,
                    "block_tokens": s.overlap.block_tokens, "half_block": s.overlap.half_block,
                    "links": [{"link": o.link, "gbs": o.gbs, "flops_per_byte": o.flops_per_byte,
                               "crossover_tokens": o.crossover_tokens,
                               "crossover_alpha_tokens": o.crossover_alpha_tokens,
                               "crossover_causal_tokens": o.crossover_causal_tokens,
                               "step_compute_us": o.step_compute_us,
                               "step_comm_us": o.step_comm_us, "hides": o.hides}
                              for o in s.overlap.links]},
    }

