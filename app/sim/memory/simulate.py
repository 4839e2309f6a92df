"""The memory scene's trace: the ledger (:mod:`app.sim.memory.ledger`), the fit against a GPU
(:mod:`app.sim.memory.fit`) and five frames that build the ledger up category by category —
parameters, gradients, optimizer states, activations, buffers — so a lecturer can step through
where the memory goes. ``to_dict()`` is DESIGN.md's ``/api/memory`` contract.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dataclasses import dataclass

from app.sim.memory.ledger import CATEGORIES, MODEL_STATES, Ledger, MemoryConfig, count, ledger
from app.sim.memory.fit import (Convention, Fit, Peaks, Suggestion, deepspeed_comparison, fit,
                                plan, suggestions)
from app.sim.trace import Frame
from app.humanize import human_bytes

if TYPE_CHECKING:
    from app.sim.memory.params import MemoryParams

OPTIMIZER_NAMES = {"sgd": "SGD", "momentum": "SGD with momentum", "adam": "Adam",
                   "adamw": "AdamW", "adafactor": "Adafactor", "adam8bit": "8-bit Adam"}


@dataclass(frozen=True)
class MemoryTrace:
    config: MemoryConfig
    ledger: Ledger
    fit: Fit
    suggestions: tuple[Suggestion, ...]
    plan: tuple[Suggestion, ...]
    deepspeed: tuple[Convention, ...]
    frames: tuple[Frame, ...]

    def to_dict(self) -> dict:
        """The JSON contract of ``/api/memory`` (DESIGN.md), plus the ledger's lines."""
        led, c = self.ledger, self.config
        per_gpu = {k: number(led.bytes(k)) for k in CATEGORIES[:4]}
        return {
            "param_count": int(c.psi),
            "per_gpu_bytes": {**per_gpu, "total": number(led.total)},
            "activations_per_layer_bytes": number(led.per_layer_bytes),
            "buffers_bytes": number(led.bytes("buffers")),
            "peak_bytes": number(led.peak),
            "stage": led.stage.name,
            "layers_in_flight": led.stage.layers_in_flight,
            "items": [{"key": i.key, "category": i.category, "label": i.label,
                       "bytes": number(i.bytes), "formula": i.formula, "detail": i.detail,
                       "tag": i.tag, "source": i.source} for i in led.items],
            "gpu": {"name": self.fit.gpu.name, "capacity_bytes": self.fit.gpu.capacity,
                    "fits": self.fit.fits, "free_bytes": number(self.fit.free),
                    "max_micro_batch": self.fit.max_micro_batch},
            "suggestions": [suggestion_dict(s) for s in self.suggestions],
            "plan": [suggestion_dict(s) for s in self.plan],
            "deepspeed": [{"zero": d.zero, "paper_bytes": number(d.paper),
                           "deepspeed_bytes": number(d.deepspeed),
                           "paper_formula": d.paper_formula,
                           "deepspeed_formula": d.deepspeed_formula} for d in self.deepspeed],
            "model": {"family": c.model.family, "layers": c.model.layers,
                      "hidden": c.model.hidden, "heads": c.model.heads,
                      "kv_heads": c.model.kv_heads, "ffn": c.model.ffn,
                      "vocab": c.model.vocab, "seq": c.model.seq},
            "frames": [{"step": f.step, "caption": f.caption} for f in self.frames],
        }


def number(value: float) -> int | float:
    """Bytes as an exact JSON integer while they fit in 64 bits, else as a float."""
    return int(round(value)) if abs(value) < 2**63 else float(value)


def suggestion_dict(s: Suggestion) -> dict:
    return {"label": s.label, "changes": dict(s.changes), "peak_bytes": number(s.peak),
            "fits": s.fits}


def simulate(p: MemoryParams) -> MemoryTrace:
    """The ledger of the scene's parameters (see :func:`simulate_config`)."""
    return simulate_config(p.config())


def simulate_config(c: MemoryConfig) -> MemoryTrace:
    led = ledger(c)
    verdict = fit(c, led)
    peak_of = Peaks()
    peak_of.known[c] = led.peak
    helps = suggestions(c, led, peak_of) if not verdict.fits else ()
    steps = plan(c, peak_of=peak_of) if not verdict.fits else ()
    return MemoryTrace(c, led, verdict, helps, steps, deepspeed_comparison(c),
                       frames(c, led, verdict))


def frames(c: MemoryConfig, led: Ledger, verdict: Fit) -> tuple[Frame, ...]:
    """Five captions, one per category, with this set-up's numbers."""
    hb = human_bytes
    tp_pp = c.tp * c.pp
    dtype = "16-bit" if c.precision == "mixed" else "fp32"
    share = (f"; t·p = {tp_pp} GPUs share the model, so this one holds Ψ/{tp_pp}"
             if tp_pp > 1 else "")

    def sharded(stage: int) -> str:
        if c.zero >= stage and c.dp > 1:
            return f" ZeRO-{c.zero} splits them over the {c.dp} data-parallel GPUs."
        return ""

    states = sum(led.bytes(k) for k in MODEL_STATES)
    kept = ", ".join(i.label for i in led.items if i.category == "optimizer") or "nothing"
    largest = max((i for i in led.items if i.category == "activations"),
                  key=lambda i: i.bytes)
    recompute = {"none": "nothing is recomputed",
                 "selective": "selective recompute drops the attention scores",
                 "full": "full recompute keeps only each layer's input"}[c.recompute]
    gpu = verdict.gpu
    if verdict.fits:
        ending = (f"fits on the {gpu.name} with {hb(verdict.free)} to spare; the largest "
                  f"micro-batch that fits is {verdict.max_micro_batch}.")
    else:
        ending = (f"does not fit on the {gpu.name} ({hb(gpu.capacity)}): {hb(-verdict.free)} "
                  "over. " + (f"Micro-batch {verdict.max_micro_batch} would fit."
                              if verdict.max_micro_batch else
                              "Not even micro-batch 1 fits — see what to change."))
    captions = (
        f"Ψ = {count(c.psi)} parameters in {dtype} take {hb(led.bytes('params'))} on this "
        f"GPU{share}." + sharded(3),
        f"Backward writes one gradient per parameter: {hb(led.bytes('grads'))} in {dtype}."
        + sharded(2),
        f"{OPTIMIZER_NAMES[c.optimizer]} keeps {kept}: {hb(led.bytes('optimizer'))}."
        + sharded(1) + f" Model states so far: {hb(states)}.",
        f"The forward pass keeps {hb(led.per_layer_bytes)} per layer for backward and this GPU "
        f"holds {led.stage.layers_in_flight} layers' worth: {hb(led.bytes('activations'))} "
        f"({recompute}). The largest part is the {largest.label} ({hb(largest.bytes)}).",
        f"With {hb(led.bytes('buffers'))} of buffers the peak is {hb(led.peak)}: it {ending}",
    )
    return tuple(Frame(k, caption, phase=CATEGORIES[k]) for k, caption in enumerate(captions))
