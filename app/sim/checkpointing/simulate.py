"""Activation checkpointing and gradient accumulation: activation memory over time through one
micro-batch's forward and backward passes, what recomputation costs, and the global batch.

Per layer and micro-batch, one GPU keeps (Korthikanti et al. 2022, Table 2, computed by
:func:`app.sim.memory.activations.per_layer_bytes`, the same code as the memory ledger):

    A   every activation            sbh(34 + 5as/h) without tensor parallelism
    S   selective recompute         A without the attention scores (softmax, dropout): sbh·34
    C   the layer's input only      2sbh (full recompute keeps this checkpoint)

Strategies, with L layers:

    none          forward keeps A per layer; backward frees them              peak L·A
    selective     forward keeps S; backward first recomputes the attention core of the layer
                  (QKᵀ, softmax, dropout, ×V: 4bs²h FLOPs) then frees A       peak (L−1)S + A
    full, k       Megatron's uniform method (--recompute-method uniform --recompute-num-layers k;
                  Chen et al. 2016's segments): the input of every k-th layer is a checkpoint;
                  backward re-runs each segment's forward, keeping its k layers' A, then
                  frees them                                                   peak ≈ (L/k)·C + k·A
                  k = 1 is plain full recompute; k ≈ √(L·C/A) balances the two terms.
                  The segment's checkpoint *is* the input its first layer keeps again (one of
                  the tensors in A: torch.utils.checkpoint and Megatron re-run the segment on
                  the saved tensor itself), so re-running a segment adds k·A − C; the real run
                  (workers/checkpointing.py) measures exactly this.

Time is FLOPs (:mod:`app.sim.flops`) over the GPU's achieved throughput; backward costs twice
the forward; recomputation is the extra forward work. The logits and loss are a step with no
activation memory here (the ledger in /memory counts them). Gradient accumulation runs
``grad_accum`` micro-batches before one optimizer step: the activations rise and fall with each
micro-batch while one gradient buffer persists, so

    global batch = micro_batch × grad_accum × dp   sequences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING


from app.sim.memory import activations


from app.sim import flops


from app.sim.memory import model_states
from app.catalog.models import ModelShape
from app.sim.trace import Frame

if TYPE_CHECKING:
    from app.sim.checkpointing.params import CheckpointParams

FRAMES_TARGET = 60
"""Frames the deck aims for: long models step several layers per frame."""


@dataclass(frozen=True)
class LayerBytes:
    full: float          # A
    selective: float     # S
    checkpoint: float    # C


@dataclass(frozen=True)
class Event:
    kind: str            # "F" forward, "R" recompute, "B" backward, "H" logits and loss
    layer: int           # 0-based; -1 for "H"
    start_ms: float
    end_ms: float
    flops: float
    points: tuple[tuple[float, float], ...]   # (ms, bytes) along the event
    memory_after: float
    peak: float
    layer_state: str     # the layer's state once the event is done

    def to_dict(self) -> dict:
        return {"kind": self.kind, "layer": self.layer, "start_ms": self.start_ms,
                "end_ms": self.end_ms, "flops": self.flops,
                "memory_bytes_after": self.memory_after, "peak_bytes": self.peak,
                "layer_state": self.layer_state}


@dataclass(frozen=True)
class Timeline:
    recompute: str
    k: int
    events: tuple[Event, ...]

    @property
    def peak(self) -> float:
        return max(e.peak for e in self.events)

    @property
    def end_of_forward(self) -> float:
        return next(e.memory_after for e in self.events if e.kind == "H")

    @property
    def time_ms(self) -> float:
        return self.events[-1].end_ms

    @property
    def flops(self) -> float:
        return sum(e.flops for e in self.events)

    @property
    def recompute_flops(self) -> float:
        return sum(e.flops for e in self.events if e.kind == "R")

    @property
    def label(self) -> str:
        if self.recompute != "full":
            return self.recompute
        return "full" if self.k == 1 else f"every {self.k} layers"

    def summary(self) -> dict:
        return {"recompute": self.recompute, "k": self.k, "label": self.label,
                "peak_bytes": self.peak, "end_of_forward_bytes": self.end_of_forward,
                "flops_per_microbatch": self.flops, "recompute_flops": self.recompute_flops,
                "overhead": self.recompute_flops / (self.flops - self.recompute_flops),
                "time_ms_per_microbatch": self.time_ms}


def layer_shape(model: ModelShape, seq: int, p: CheckpointParams) -> activations.LayerShape:
    """One layer as app.sim.memory.activations counts it: 16-bit activations, dropout for GPT."""
    return activations.LayerShape(seq, p.micro_batch, model.hidden, model.heads,
                                  model.kv_heads, model.ffn, model.gated_mlp,
                                  dropout=model.family == "gpt")


def layer_bytes(model: ModelShape, seq: int, p: CheckpointParams) -> LayerBytes:
    shape = layer_shape(model, seq, p)
    per = {r: activations.per_layer_bytes(shape, p.tp, p.sequence_parallel, r)
           for r in activations.RECOMPUTE}
    return LayerBytes(per["none"], per["selective"], per["full"])


def segments(layers: int, k: int) -> list[tuple[int, int]]:
    """[first, end) of each checkpointed segment (the last one may be shorter)."""
    return [(s, min(s + k, layers)) for s in range(0, layers, k)]


def full_peak(layers: int, k: int, per: LayerBytes) -> float:
    """Closed form of the full-recompute peak: re-running the last segment, or re-running a
    full-length segment with one checkpoint fewer; a re-run segment holds its k layers' A, its
    own checkpoint among them, and the checkpoints below it (see the module docstring); checked
    against the simulated timeline in the tests."""
    segs = segments(layers, k)
    n, last = len(segs), segs[-1][1] - segs[-1][0]
    a, c = per.full, per.checkpoint
    candidates = [(n - 1) * c + last * a]
    if n > 1:
        candidates.append((n - 2) * c + k * a)
    return max(candidates)


def best_k(layers: int, per: LayerBytes) -> int:
    """The k with the lowest full-recompute peak (every k costs the same recompute work).
    Balancing (L/k)·C against k·A gives k ≈ √(L·C/A) — Chen et al.'s √L when C ≈ A."""
    return min(range(1, layers + 1), key=lambda k: (full_peak(layers, k, per), k))


class _Clock:
    """Builds events: memory changes linearly while an event runs."""

    def __init__(self, rate_flops_per_ms: float):
        self.rate = rate_flops_per_ms
        self.t = 0.0
        self.mem = 0.0
        self.events: list[Event] = []

    def run(self, kind: str, layer: int, work: float, rise: float, keep: float,
            state: str) -> None:
        """``work`` FLOPs; memory moves by ``rise`` while it runs, then settles at ``mem +
        keep``. Forward passes keep what they store (their short-lived intermediates are not
        modelled, as in Korthikanti et al.); a backward frees its layer when it ends."""
        start, end = self.t, self.t + work / self.rate
        top = self.mem + rise
        after = self.mem + keep
        points = ((start, self.mem), (end, top)) + (((end, after),) if after != top else ())
        self.events.append(Event(kind, layer, start, end, work, points, after,
                                 max(self.mem, top, after), state))
        self.t, self.mem = end, after


def timeline(model: ModelShape, seq: int, p: CheckpointParams, recompute: str,
             k: int = 1) -> Timeline:
    per = layer_bytes(model, seq, p)
    a, s, c = per.full, per.selective, per.checkpoint
    f = flops.layer_forward_flops(model, seq, p.micro_batch) / p.tp
    core = flops.attention_core_flops(model, seq, p.micro_batch) / p.tp
    head = 3 * flops.logits_forward_flops(model, seq, p.micro_batch) / p.tp
    clock = _Clock(p.gpu_tflops * 1e9)  # FLOPs per ms
    layers = model.layers
    starts = {first for first, _ in segments(layers, k)} if recompute == "full" else set()
    # 1. forward
    for i in range(layers):
        if recompute == "none":
            clock.run("F", i, f, a, a, "full")
        elif recompute == "selective":
            clock.run("F", i, f, s, s, "selective")
        elif i in starts:
            clock.run("F", i, f, c, c, "checkpoint")
        else:
            clock.run("F", i, f, 0.0, 0.0, "dropped")
    clock.run("H", -1, head, 0.0, 0.0, "")
    # 2. backward, last layer first
    if recompute == "full":
        for first, end in reversed(segments(layers, k)):
            for i in range(first, end):   # the first layer's input is the checkpoint, held
                grow = a - (c if i == first else 0.0)
                clock.run("R", i, f, grow, grow, "recomputed")
            for i in reversed(range(first, end)):
                clock.run("B", i, 2 * f, 0.0, -a, "done")
    else:
        for i in reversed(range(layers)):
            if recompute == "selective":
                clock.run("R", i, core, a - s, a - s, "recomputed")
            clock.run("B", i, 2 * f, 0.0, -a, "done")
    return Timeline(recompute, k, tuple(clock.events))


@dataclass(frozen=True)
class CheckpointTrace:
    params: CheckpointParams
    model: ModelShape
    seq: int
    per_layer: LayerBytes
    chosen: Timeline
    strategies: tuple[Timeline, ...]     # none, selective, full, every k
    frames: tuple[Frame, ...]
    frame_events: tuple[tuple[int, int], ...]
    """[first, end) of the chosen timeline's events that each frame shows (frame 0: none)"""
    grad_buffer_bytes: float
    best_k: int
    global_batch: int
    iteration_ms: float

    def to_dict(self) -> dict:
        p, m = self.params, self.model
        return {
            "model": {"preset": m.name, "layers": m.layers, "hidden": m.hidden,
                      "heads": m.heads, "kv_heads": m.kv_heads, "ffn": m.ffn,
                      "vocab": m.vocab, "seq": self.seq, "param_count": m.param_count()},
            "micro_batch": p.micro_batch, "grad_accum": p.grad_accum, "dp": p.dp,
            "tp": p.tp, "sequence_parallel": p.sequence_parallel,
            "recompute": p.recompute, "recompute_layers": self.chosen.k,
            "global_batch": self.global_batch,
            "tokens_per_iteration": self.global_batch * self.seq,
            "per_layer_bytes": {"none": self.per_layer.full,
                                "selective": self.per_layer.selective,
                                "full": self.per_layer.checkpoint},
            "peak_activation_bytes": self.chosen.peak,
            "best_recompute_layers": self.best_k,
            "strategies": [t.summary() for t in self.strategies],
            "timeline": [e.to_dict() for e in self.chosen.events],
            "gradient_buffer_bytes": self.grad_buffer_bytes,
            "iteration": {"micro_batches": p.grad_accum,
                          "time_ms": self.iteration_ms,
                          "flops_per_gpu": p.grad_accum * self.chosen.flops},
            "frames": [{"step": f.step, "phase": f.phase, "caption": f.caption}
                       for f in self.frames],
        }


def simulate(p: CheckpointParams) -> CheckpointTrace:
    model = p.shape()
    seq = model.seq
    k = p.recompute_layers if p.recompute == "full" else 1
    chosen = timeline(model, seq, p, p.recompute, k)
    per = layer_bytes(model, seq, p)
    # the fourth curve: the chosen k, else the best k, else Chen et al.'s √L segments
    best = best_k(model.layers, per)
    k4 = (k if (p.recompute == "full" and k > 1) else best if best > 1 else
          min(model.layers, max(2, round(math.sqrt(model.layers)))))
    strategies = tuple(timeline(model, seq, p, r, kk) for r, kk in
                       (("none", 1), ("selective", 1), ("full", 1), ("full", k4)))
    frames, spans = _frames(chosen, per, model.layers)
    grads = model_states.per_gpu(model.param_count(), tp=p.tp, precision="mixed").grads
    return CheckpointTrace(p, model, seq, per, chosen, strategies, frames, spans, grads, best,
                           p.micro_batch * p.grad_accum * p.dp,
                           p.grad_accum * chosen.time_ms)


def _gib(x: float) -> str:
    return f"{x / 2**30:.3g} GiB" if x >= 2**30 else f"{x / 2**20:.3g} MiB"


def _spans(events: tuple[Event, ...]) -> list[tuple[int, int]]:
    """[first, end) of the events each frame shows. One layer's forward or backward per frame,
    a whole recompute run (one segment) per frame; when that makes more than FRAMES_TARGET
    frames, neighbours within the forward and within the backward pass are merged evenly."""
    units, i = [], 0
    while i < len(events):
        j = i + 1
        if events[i].kind == "R":
            while j < len(events) and events[j].kind == "R":
                j += 1
        units.append((i, j))
        i = j
    head = next(u for u, (i, _) in enumerate(units) if events[i].kind == "H")
    out = []
    for part in (units[:head], units[head:head + 1], units[head + 1:]):
        size = max(1, math.ceil(len(part) / (FRAMES_TARGET // 2)))
        out += [(part[g][0], part[min(g + size, len(part)) - 1][1])
                for g in range(0, len(part), size)]
    return out


def _frames(t: Timeline, per: LayerBytes, layers: int):
    spans = _spans(t.events)
    frames = [Frame(0, _start_caption(t, per, layers), (), "start")]
    for step, (i, j) in enumerate(spans, start=1):
        evs = t.events[i:j]
        frames.append(Frame(step, _caption(t, evs, per), (), _phase(evs)))
    return tuple(frames), ((0, 0), *spans)


def _phase(evs) -> str:
    kinds = {e.kind for e in evs}
    if kinds == {"R", "B"}:
        return "recompute + backward"
    return {"F": "forward", "R": "recompute", "B": "backward",
            "H": "logits and loss"}[evs[0].kind]


def _layers(evs) -> str:
    ids = sorted({e.layer + 1 for e in evs})
    return f"layer {ids[0]}" if len(ids) == 1 else f"layers {ids[0]}–{ids[-1]}"


def _start_caption(t: Timeline, per: LayerBytes, layers: int) -> str:
    how = {"none": f"keeps every activation, {_gib(per.full)} per layer",
           "selective": f"keeps {_gib(per.selective)} per layer and drops the attention "
                        f"scores, to recompute them in backward",
           "full": (f"keeps only each layer's input, {_gib(per.checkpoint)}, and recomputes "
                    f"the layer in backward" if t.k == 1 else
                    f"keeps the input of every {t.k}th layer ({_gib(per.checkpoint)} each) and "
                    f"re-runs {t.k} layers at a time in backward")}[t.recompute]
    return (f"One micro-batch through {layers} layers. Without recompute a layer keeps "
            f"{_gib(per.full)} of activations for its backward; this run ({t.label}) {how}. "
            f"Peak: {_gib(t.peak)}.")


def _caption(t: Timeline, evs, per: LayerBytes) -> str:
    e0, last = evs[0], evs[-1]
    held = _gib(last.memory_after)
    if e0.kind == "F":
        kept = {"full": _gib(per.full), "selective": _gib(per.selective),
                "checkpoint": f"its input, {_gib(per.checkpoint)}",
                "dropped": "nothing"}
        what = "; ".join(sorted({f"{kept[e.layer_state]} kept" for e in evs}))
        return (f"Forward, {_layers(evs)}: {what} per layer. Activations held: {held}.")
    if e0.kind == "H":
        return (f"Logits and loss (forward and backward): the end of the forward pass holds "
                f"{_gib(e0.memory_after)} of activations — the backward pass starts here.")
    if {e.kind for e in evs} == {"R", "B"}:
        cost = sum(e.flops for e in evs if e.kind == "R")
        return (f"Backward with recompute, {_layers(evs)}: each layer's activations are "
                f"computed again ({cost / 1e12:.3g} TFLOP of extra work in all), used by its "
                f"backward, then freed. Peak here {_gib(max(e.peak for e in evs))}; held "
                f"now: {held}.")
    if e0.kind == "R":
        cost = sum(e.flops for e in evs)
        what = ("the attention scores (QKᵀ, softmax, dropout, ×V)" if t.recompute == "selective"
                else "the forward pass, keeping every activation")
        return (f"Recompute, {_layers(evs)}: run {what} again — {cost / 1e12:.3g} TFLOP of "
                f"extra work. Memory climbs to {_gib(max(e.peak for e in evs))}.")
    return (f"Backward, {_layers(evs)}: gradients flow down and each layer frees its "
            f"activations once its backward is done. Held now: {held}.")
