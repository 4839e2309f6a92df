"""Comparing a measured micro-batch (workers/checkpointing.py) with the checkpointing scene.

The worker cannot run GPT-3 on a CPU, so it runs a scaled-down copy of the chosen set-up
(:func:`scaled_params`): the memory ledger's :func:`app.scenes.memory.check.scaled_config` (same
family, hidden 128, ≤ 4 query heads per key/value head, seq ≤ 128, b ≤ 2, dp and tp ≤ 2) with
at most 4 layers, k chosen to keep the number of checkpointed segments where it can, and at
most 4 accumulation steps. The scene's own simulation (:func:`app.sim.checkpointing.simulate.simulate`)
is evaluated for that copy and set beside what the worker measured:

- per layer and micro-batch, the bytes autograd keeps with no, selective and full recompute
  must be A, S and C (Korthikanti et al. 2022, Table 2, through app.sim.memory.activations) within
  1 %: the formula leaves out only the norms' statistics (fp32 mean and 1/σ, or 1/rms, per
  token);
- for each strategy of the scene's table — none, selective, full and every k layers
  (Megatron-LM's ``--recompute-method uniform``; Chen et al. 2016) — the layers' activations
  held at the end of forward (L·A, L·S, ⌈L/k⌉·C) and their peak over forward and backward,
  including the segments that ``torch.utils.checkpoint`` recomputes, within the same 1 % —
  selective recompute's peak only below the simulation's, which is an upper bound there
  (:func:`selective_peak`);
- gradient accumulation: micro-batch × accumulation × dp sequences run as micro-batches and
  all-reduced must give the gradient of one pass over the global batch to fp32 rounding.
"""

from __future__ import annotations

import math

from app.sim.memory import activations
from app.sim.checkpointing.simulate import layer_shape, simulate
from app.sim.memory.ledger import MemoryConfig
from app.jobs.runner import Check, Verdict
from app.scenes.memory.check import LEFT_OUT, TERM_PART, model_args, scaled_config
from app.draw.fmt import exact_bytes, human_bytes

LAYERS = 4
"""Most layers in the real run: enough for several checkpointed segments."""
ACCUMULATION = 4
"""Most micro-batches per rank in the real run."""
BYTES_TOLERANCE = 0.01
"""Relative. What the formula leaves out, the norms' statistics, is 0.1–0.2 % here (under
0.7 % with the fp32 statistics of GPU kernels); one checkpoint C too many or too few in a peak
is 1.5–3 % at these shapes unless a single segment spans every layer."""
GRAD_TOLERANCE = 1e-4
"""Largest |accumulated − global-batch| gradient over each tensor's largest |gradient|. Both
runs add the same fp32 products (ε ≈ 1.2·10⁻⁷) in another order and grouping — per
micro-batch, then across micro-batches and ranks — so they differ by rounding, a few 10⁻⁶
here; a wrong accumulation (a missing 1/grad_accum, a micro-batch dropped or counted twice,
one rank left out of the average) is off by several percent."""


def scaled_params(p):
    """``p`` scaled down to run on a CPU in seconds (same class, validated)."""
    model = p.shape()
    layers = min(model.layers, LAYERS)
    small = scaled_config(MemoryConfig(model, micro_batch=p.micro_batch, dp=p.dp, tp=p.tp,
                                       sequence_parallel=p.sequence_parallel,
                                       recompute=p.recompute), layers=layers)
    m = small.model
    segments = math.ceil(model.layers / p.recompute_layers)
    k = math.ceil(layers / segments) if p.recompute == "full" else 1
    return type(p).model_validate({
        **p.model_dump(), "layers": m.layers, "hidden": m.hidden, "heads": m.heads,
        "kv_heads": m.kv_heads, "ffn": m.ffn, "vocab": m.vocab, "seq": m.seq,
        "micro_batch": small.micro_batch, "tp": small.tp, "dp": small.dp,
        "recompute_layers": k, "grad_accum": min(p.grad_accum, ACCUMULATION)})


def strategy_flag(t) -> str:
    return t.recompute if t.k == 1 else f"full:{t.k}"


def worker_argv(p) -> list[str]:
    """workers/checkpointing.py's command line for ``p``: its scaled-down copy
    (:func:`scaled_params`)."""
    return scaled_argv(scaled_params(p))


def scaled_argv(small) -> list[str]:
    """The command line of the scaled-down copy ``small`` itself."""
    trace = simulate(small)
    return (model_args(trace.model, small.micro_batch, small.tp, small.sequence_parallel)
            + ["--strategies", *(strategy_flag(t) for t in trace.strategies),
               "--recompute", small.recompute, "--every", str(trace.chosen.k),
               "--grad-accum", str(small.grad_accum)])


def scaled_or_why(p):
    """(the scaled-down copy, None), or (None, (parameter, why)) when the copy is not a valid
    set-up of this scene: the page shows the reason on its real-run panel and
    POST /api/verify answers it as a 422, never a server error."""
    try:
        return scaled_params(p), None
    except ValueError as error:   # pydantic's ValidationError and Invalid are ValueErrors
        reason = error.errors()[0]["msg"] if hasattr(error, "errors") else str(error)
        reason = reason.removeprefix("Value error, ")
        return None, ("preset", f"the real run's scaled-down copy of this set-up is not a "
                                f"valid one ({reason}); the simulation above is unaffected")


def unsupported(p):
    return scaled_or_why(p)[1]


def world(p) -> int:
    small, _ = scaled_or_why(p)
    return 1 if small is None else small.dp * small.tp


def compare(params, trace, report: dict) -> Verdict:
    small = scaled_params(params)
    sim = simulate(small)
    per, L = sim.per_layer, sim.model.layers
    ranks = report["ranks"]
    by_strategy = [{(s["recompute"], s["every"]): s for s in r["strategies"]} for r in ranks
                   if r["strategies"] is not None]   # the first dp replica's ranks measure
    rows, notes, problems, errors = [], [], [], []

    def row(label: str, want: float, got_per_rank: list[float], shown: str | None = None):
        error = max(abs(g - want) / want for g in got_per_rank) if want else float(
            any(got_per_rank))
        errors.append(error)
        got = got_per_rank[0]
        rows.append([label, exact_bytes(want), shown or exact_bytes(got),
                     f"{(got - want) / want:+.2%}" if want else ("exact" if not got else "—")])
        if error > BYTES_TOLERANCE:
            problems.append(f"{label}: measured {got:,.0f} B, simulated {want:,.0f} B")

    for label, want, key in (("A · a layer, no recompute", per.full, ("none", 1)),
                             ("S · a layer, selective", per.selective, ("selective", 1)),
                             ("C · a layer's checkpoint, full", per.checkpoint, ("full", 1))):
        layers = [layer for r in by_strategy for layer in r[key]["per_layer"]]
        shown = exact_bytes(layers[0]) if len(set(layers)) == 1 else \
            f"{exact_bytes(min(layers))} – {exact_bytes(max(layers))}"
        row(label, want, layers, shown)
    for t in sim.strategies:
        got = [r[(t.recompute, t.k)] for r in by_strategy]
        row(f"{t.label} · end of forward", t.end_of_forward,
            [g["end_of_forward"] for g in got])
        if t.recompute == "selective":
            notes.append(selective_peak(t, got, rows, problems))
        else:
            row(f"{t.label} · peak", t.peak, [g["peak"] for g in got])
    notes += left_out(small, sim, by_strategy[0])
    acc = [r["accumulation"] for r in ranks]
    grad_error = max(a["max_relative_diff"] for a in acc)
    a0 = acc[0]
    want_batch = small.micro_batch * small.grad_accum * small.dp
    rows.append(["global batch", f"{small.micro_batch} × {small.grad_accum} × {small.dp} = "
                 f"{want_batch} sequences", f"{a0['sequences']} sequences",
                 "exact" if a0["sequences"] == want_batch else "—"])
    rows.append(["gradient: micro-batches vs one batch", "equal",
                 f"largest |Δ| {a0['max_abs_diff']:.2g}", f"{grad_error:.1e} of the largest"])
    if a0["sequences"] != want_batch:
        problems.append(f"the global batch had {a0['sequences']} sequences, not {want_batch}")
    if grad_error > GRAD_TOLERANCE:
        problems.append(f"accumulated gradients differ from the global batch's by "
                        f"{grad_error:.2g} of the largest (tolerance {GRAD_TOLERANCE:g})")
    worst = max(errors)
    chosen = sim.chosen
    measured = by_strategy[0][(chosen.recompute, chosen.k)]
    first = by_strategy[0]
    detail = (
        f"Per layer, autograd kept A = {human_bytes(first[('none', 1)]['per_layer'][0])}, "
        f"S = {human_bytes(first[('selective', 1)]['per_layer'][0])} and "
        f"C = {human_bytes(first[('full', 1)]['per_layer'][0])}, as Korthikanti's formula "
        f"says for this {L}-layer copy; with recompute {chosen.label} the layers held "
        f"{human_bytes(measured['end_of_forward'])} at the end of forward and peaked at "
        f"{human_bytes(measured['peak'])} (simulated {human_bytes(chosen.peak)}"
        f"{', an upper bound' if chosen.recompute == 'selective' else ''}). Every byte count "
        f"is within {worst:.1%} of the simulation (tolerance {BYTES_TOLERANCE:.0%}). "
        f"{_count(small.dp, 'data-parallel rank')} × {_count(small.grad_accum, 'micro-batch')} × "
        f"{_count(small.micro_batch, 'sequence')}, all-reduced, gave the gradient of one "
        f"{want_batch}-sequence batch to {grad_error:.1e} of its largest value: fp32 "
        f"rounding (tolerance {GRAD_TOLERANCE:g}).")
    if problems:
        detail += " Off: " + "; ".join(problems) + "."
    table = {"caption": f"Measured beside simulated ({L} layers, h = {sim.model.hidden}, "
                        f"s = {sim.seq}, b = {small.micro_batch}, t = {small.tp}): the "
                        f"layers' activations, their peak over forward and backward",
             "header": ["", "simulation", "measured (saved-tensor hooks)", "difference"],
             "rows": rows}
    return Verdict(not problems, round(max(worst, grad_error), 6), detail,
                   {"table": table, "notes": notes, "scaled": scaled_argv(small),
                    "max_diff_text": f"{worst:.2%} in bytes, {grad_error:.1e} in gradients"})


def selective_peak(t, got: list[dict], rows: list, problems: list) -> str:
    """The selective peak is checked against bounds, not equality: the simulation recomputes a
    layer's attention scores before that layer's backward starts, (L−1)·S + A; torch re-runs
    them when the backward reaches the attention core, after the layer's MLP and second norm
    have freed their activations, so the real peak lies between L·S and that bound."""
    label = f"{t.label} · peak"
    low = min(g["end_of_forward"] for g in got)
    high = max(g["peak"] for g in got)
    inside = low <= high <= t.peak * (1 + BYTES_TOLERANCE)
    peak = got[0]["peak"]
    rows.append([label, f"at most {exact_bytes(t.peak)}", exact_bytes(peak),
                 f"{(peak - t.peak) / t.peak:+.2%}, within the bound" if inside else
                 f"{(peak - t.peak) / t.peak:+.2%}, outside"])
    if not inside:
        problems.append(f"{label}: measured {high:,} B, outside [{low:,}, {t.peak:,.0f}] B")
    return (f"Selective recompute: the simulation re-runs a layer's attention scores before "
            f"the layer's backward, peaking at (L−1)·S + A = {exact_bytes(t.peak)}; torch re-runs "
            f"them when the backward reaches the attention core, after the layer's MLP and "
            f"second norm have freed their activations, so the real peak is lower — here "
            f"{exact_bytes(peak)}{', the end of forward' if peak == got[0]['end_of_forward'] else ''}"
            f". The check asks that it lie between L·S and the simulated bound.")


def left_out(small, sim, measured: dict) -> list[str]:
    """What the formula leaves out, part by part of the last layer, and outside the layers."""
    shape = layer_shape(sim.model, sim.seq, small)
    found: dict[tuple, list[str]] = {}
    for recompute, words in (("none", "no"), ("selective", "selective")):
        want: dict[str, float] = {}
        for term in activations.kept_terms(shape, small.tp, small.sequence_parallel, recompute):
            want[TERM_PART[term.name]] = want.get(TERM_PART[term.name], 0.0) + term.bytes
        got = measured[(recompute, 1)]["last_layer_parts"]
        extra = tuple(sorted((name, got.get(name, 0) - want.get(name, 0.0))
                             for name in {*want, *got}))
        found.setdefault(tuple((n, d) for n, d in extra if d), []).append(words)
    notes = []
    for extra, words in found.items():
        if extra:
            parts = "; ".join(f"{name} {diff:+,.0f} B — {LEFT_OUT.get(name, 'unexplained')}"
                              for name, diff in extra)
            notes.append(f"Per layer ({' and '.join(words)} recompute) the formula leaves "
                         f"out: {parts}.")
    outside = measured[("none", 1)]["outside_layers"]
    notes.append(f"Outside the layers the embedding and the loss kept {exact_bytes(outside)} more "
                 f"(token ids, the loss's fp32 softmax): this scene leaves them out, the "
                 f"memory ledger (/memory) counts them.")
    notes.append("The peak counts the tensors autograd keeps; on a GPU the gradients flowing "
                 "backward and each operation's temporary buffers come on top.")
    return notes


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'es' if noun.endswith('h') and n != 1 else 's' if n != 1 else ''}"



CHECK = Check(
    worker="workers/checkpointing.py",
    world=world,
    args=worker_argv,
    compare=compare,
    unsupported=unsupported,
)
