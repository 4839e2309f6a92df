"""Predict, then reveal: what each scene's steps compute, for the player's predict mode.

One small declaration per scene (:data:`QUESTIONS`): given the params and the trace, the number
a step computes — its question, its value and its unit — for the frames that compute one,
read from the trace the deck is drawn from. static/js/predict.js asks for them
(``GET /api/predict/<scene>?<query>``) when predict mode is switched on, hides each new step
until the room has guessed, then shows the value and how far off the guess was. A step
without a question is still hidden until it is revealed (a guess of what happens next).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Question = tuple[str, float, str]
"""(what the step computes, its value, its unit)"""

GIB, MIB = 2.0**30, 2.0**20


def _memory(p, t) -> dict[int, Question]:
    words = {"params": "parameters", "grads": "gradients", "optimizer": "optimizer states",
             "activations": "activations", "buffers": "buffers"}
    return {k: (f"How many GiB of {words[f.phase]} does one GPU hold?",
                t.ledger.bytes(f.phase) / GIB, "GiB")
            for k, f in enumerate(t.frames) if k and f.phase in words}


def _collective(p, t) -> dict[int, Question]:
    return {k: ("How many elements does rank 0 send in this step?",
                float(sum(x.elements for x in f.transfers if x.src == 0)), "elements")
            for k, f in enumerate(t.frames) if k}


def _optimizer(p, t) -> dict[int, Question]:
    keys = [r.key for r in t.rows]
    labels = {r.key: r.label for r in t.rows}
    out = {}
    for k, changed in enumerate(t.changed):
        if k == 0 or not changed:
            continue
        key = next(r for r in keys if r in changed)
        out[k] = (f"What is {labels[key]}, element 0, after this step?",
                  float(t.values[k, keys.index(key), 0]), "")
    return out


def _data_parallel(p, t) -> dict[int, Question]:
    return {k: ("At what time, in ms, does this moment of the step come?", m.t_us / 1e3, "ms")
            for k, m in enumerate(t.moments) if k and k < len(t.frames)}


def _zero(p, t) -> dict[int, Question]:
    last = len(t.frames) - 1
    return {last: (f"How many elements does each of the {p.dp} ranks send per step for the "
                   f"{p.param_count:,}-parameter model?", float(t.comm_elements), "elements")}


def _tensor_parallel(p, t) -> dict[int, Question]:
    variant = t.scale.tp_sp if p.sequence_parallel else t.scale.tp_only
    last = len(t.frames) - 1
    return {last: ("How many MiB does each GPU send per layer and micro-batch at scale (the "
                   "panel's model)?", variant.total("sent_bytes") / MIB, "MiB")}


def _pipeline(p, t) -> dict[int, Question]:
    """How many ranks sit idle at the moment a step shows: the bubble, counted."""
    start, end, rank = t.line.start, t.line.end, t.flat.rank
    out = {}
    for k, f in enumerate(t.frames):
        if k:
            now = f.time + 1e-9
            busy = len(set(rank[(start <= now) & (end > now)].tolist()))
            out[k] = (f"How many of the {p.stages} ranks are idle at this moment?",
                      float(p.stages - busy), "ranks")
    return out


def _precision(p, t) -> dict[int, Question]:
    return {k: ("What is the loss scale S after this step?", s.scale_after, "")
            for k, s in enumerate(t.scale_steps, start=1) if k < len(t.frames)}


def _checkpointing(p, t) -> dict[int, Question]:
    out = {}
    for k, (a, b) in enumerate(t.frame_events):
        if k and b > a:
            out[k] = ("How many MiB of activations are held after this step?",
                      t.chosen.events[b - 1].memory_after / MIB, "MiB")
    return out


def _context_parallel(p, t) -> dict[int, Question]:
    out = {}
    for k, f in enumerate(t.frames):
        if 0 < k < len(t.run.steps) and f.phase not in ("start", "result"):
            scores = float(t.run.steps[k].unmasked[0])
            if scores:
                out[k] = ("How many scores does rank 0 compute in this step?", scores, "scores")
    return out


def _moe(p, t) -> dict[int, Question]:
    out = {}
    for k, f in enumerate(t.frames):
        if f.phase == "softmax" and isinstance(f.data, dict) and "mean_probs" in f.data:
            out[k] = ("What mean router probability P does expert 0 get?",
                      float(f.data["mean_probs"][0]), "")
        if f.phase == "capacity" and t.drops.capacity is not None:
            out[k] = ("How many of a rank's assignments may each expert keep (its capacity)?",
                      float(t.drops.capacity), "assignments")
    return out


def _parallelism(p, t) -> dict[int, Question]:
    flows = {fl.group: fl.bytes_per_step for fl in t.flows}
    out = {}
    for k, f in enumerate(t.frames):
        if f.phase == "groups" and f.axis:
            out[k] = (f"How many {f.axis} groups are there?",
                      float(len(t.layout.groups(f.axis))), "groups")
        if f.phase == "traffic" and f.axis in flows:
            out[k] = (f"How many MiB does each rank send per step in its {f.axis} group?",
                      flows[f.axis] / MIB, "MiB")
    return out


def _planner(p, t) -> dict[int, Question]:
    best = t.plan.best
    return {1: ("What MFU does the best mix reach?", float(best.mfu), "fraction")} if best and \
        len(t.frames) > 1 else {}


QUESTIONS: dict[str, Callable[[Any, Any], dict[int, Question]]] = {
    "memory": _memory, "collective": _collective, "optimizer": _optimizer,
    "data-parallel": _data_parallel, "zero": _zero, "tensor-parallel": _tensor_parallel,
    "pipeline": _pipeline, "precision": _precision, "checkpointing": _checkpointing,
    "context-parallel": _context_parallel, "moe": _moe, "parallelism": _parallelism,
    "planner": _planner,
}


def questions(slug: str, params, trace) -> list[dict]:
    """The contract of /api/predict/<scene>: one entry per frame that computes a number."""
    declared = QUESTIONS.get(slug)
    if declared is None:
        return []
    return [{"frame": k, "question": q, "value": v, "unit": u}
            for k, (q, v, u) in sorted(declared(params, trace).items()) if v != 0]
