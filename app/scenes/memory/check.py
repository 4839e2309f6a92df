"""Comparing a measured training step (workers/memory.py) with the ledger.

The worker cannot train Llama-3 405B on a CPU, so it trains a scaled-down copy of the chosen
set-up (:func:`scaled_config`): the same family (GPT or Llama: GQA, SwiGLU, RMSNorm, rotary
positions, untied head), recomputation, optimizer, precision and ZeRO stage; 2 layers per
pipeline stage, hidden 128 (32 per head where 128 does not split into the heads), the MLP
at most 16 times as wide, seq ≤ 128, vocab ≤ 512; dp, tp and pp capped at 2. The ledger is
evaluated for that copy and set beside what the worker measured:

- model states must match :mod:`app.sim.memory.rank_states` (tensor by tensor) to the byte; the table
  also shows the ledger's even split Ψ/(t·p), which differs by the norms and biases every TP
  rank holds whole and by the embedding on the first stage;
- activations must be within 10 % of Korthikanti's formula; what the formula leaves out (token
  ids, norm statistics) is listed part by part.
"""

from __future__ import annotations

from dataclasses import replace

from app.sim.memory.ledger import MemoryConfig, ledger
from app.catalog.models import ModelShape
from app.sim.memory.rank_states import rank_states
from app.jobs.runner import Check, Verdict
from app.draw.fmt import exact_bytes, human_bytes

ACTIVATION_TOLERANCE = 0.10
CAP = 2                                  # most ranks per parallel dimension in the real run
FFN_RATIO = 16                           # widest MLP of the real run, in hidden sizes
PARTS = ("embedding", "norm 1", "attention", "norm 2", "MLP", "layer input (checkpoint)",
         "output")
TERM_PART = {
    "LayerNorm 1 input": "norm 1", "LayerNorm 2 input": "norm 2",
    "layer input (checkpoint)": "layer input (checkpoint)",
    "embedding": "embedding", "final_norm": "output", "head": "output", "logits": "output",
    **{name: "attention" for name in (
        "QKV projection input", "Q", "K", "V", "softmax output", "attention dropout mask",
        "attention dropout output", "output projection input",
        "attention dropout mask (residual)")},
    **{name: "MLP" for name in (
        "MLP input", "GeLU input", "second linear input", "gate projection output",
        "up projection output", "down projection input", "MLP dropout mask")},
}
LEFT_OUT = {
    "embedding": "token ids (int64) and the vocab-range mask of the vocab-parallel embedding",
    "norm 1": "the norm's saved statistics (mean and 1/σ, or 1/rms) per token",
    "norm 2": "the norm's saved statistics per token",
    "attention": "a 0-dimensional scale factor",
    "output": "target ids and mask of the vocab-parallel cross-entropy, the final norm's "
              "statistics",
}


def scaled_config(c: MemoryConfig, layers: int | None = None) -> MemoryConfig:
    """A copy of ``c`` that trains on a CPU in seconds, every size divisible as ZeRO and tensor
    parallelism need it (so no shard is padded): ``layers`` layers (default 2 per pipeline
    stage; /checkpointing's real run keeps more, to have segments to checkpoint)."""
    m = c.model
    tp, dp, pp = min(c.tp, CAP), min(c.dp, CAP), min(c.pp, CAP)
    if m.kv_heads == m.heads:
        heads = kv_heads = 4
    else:   # keep grouped-query attention: 2 key/value heads, up to 4 queries each
        kv_heads = 2
        heads = kv_heads * min(m.heads // m.kv_heads, 4)
    # 128 wide, or 32 per head where 128 does not split into the heads (3 queries per
    # key/value head: 6 heads)
    hidden = 128 if 128 % heads == 0 else 32 * heads
    step = 32 * tp
    # the MLP keeps the model's ratio to the width, up to FFN_RATIO (a 24-wide model with a
    # 524,288-wide MLP would otherwise scale to 2.8 M: neither a valid size nor seconds)
    ratio = min(m.ffn / m.hidden, FFN_RATIO)
    ffn = max(step, round(ratio * hidden / step) * step)
    vocab = max(64, min(m.vocab, 512) // 64 * 64)
    seq = min(m.seq, 128)
    if seq % 2 and (dp > 1 or tp > 1):
        seq += 1
    shape = ModelShape(m.name, m.family, layers or 2 * pp, hidden, heads, kv_heads, ffn, vocab,
                       seq)
    return replace(c, model=shape, micro_batch=min(c.micro_batch, 2), dp=dp, tp=tp, pp=pp,
                   param_count=None)


def model_args(m: ModelShape, micro_batch: int, tp: int, sequence_parallel: bool) -> list[str]:
    """The model's flags, as workers/memory.py's ``model_arguments`` reads them."""
    return ["--family", m.family, "--layers", str(m.layers), "--hidden", str(m.hidden),
            "--heads", str(m.heads), "--kv-heads", str(m.kv_heads), "--ffn", str(m.ffn),
            "--vocab", str(m.vocab), "--seq", str(m.seq), "--micro-batch", str(micro_batch),
            "--tp", str(tp)] + (["--sequence-parallel"] if sequence_parallel else [])


def config_argv(c: MemoryConfig) -> list[str]:
    """workers/memory.py's command line for the set-up ``c`` (the real run's scaled copy, or
    the page's one-node command)."""
    return model_args(c.model, c.micro_batch, c.tp, c.sequence_parallel) + [
        "--pp", str(c.pp), "--zero", str(c.zero), "--recompute", c.recompute,
        "--optimizer", c.optimizer, "--precision", c.precision]


def predicted_parts(items) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        if item.category == "activations":
            name = item.key.split(".", 1)[1]
            out[TERM_PART[name]] = out.get(TERM_PART[name], 0.0) + item.bytes
    return out


def compare(params, trace, report: dict) -> Verdict:
    scaled = scaled_config(params.config())
    led = ledger(scaled)
    stage = led.stage if led.stage.name in ("only", "first") else led.other
    exact = rank_states(scaled, stage.name)
    ranks = report["ranks"]
    rows, notes, problems, worst = [], [], [], 0
    for key, label in (("params", "parameters"), ("grads", "gradients"),
                       ("optimizer", "optimizer states")):
        measured = [r[key] for r in ranks]
        want = getattr(exact, key)
        if any(m is None for m in measured):
            rows.append([label, human_bytes(stage.bytes(key)), exact_bytes(want), "not measured",
                         "—"])
            notes.append("8-bit Adam needs bitsandbytes' GPU kernels; its states are predicted "
                         "only (1 byte each for m and v).")
            continue
        diff = max(abs(m - want) for m in measured)
        worst = max(worst, diff)
        rows.append([label, human_bytes(stage.bytes(key)), exact_bytes(want), exact_bytes(measured[0]),
                     "exact" if diff == 0 else f"{diff:,} B off"])
        if diff:
            problems.append(f"{label}: measured {measured} B, expected {want:,} B")
    predicted = stage.bytes("activations")
    acts = [r["activations"] for r in ranks]
    error = (acts[0] - predicted) / predicted
    rows.append(["activations", human_bytes(predicted), "—", exact_bytes(acts[0]),
                 f"{error:+.1%}"])
    within = abs(error) <= ACTIVATION_TOLERANCE
    if not within:
        problems.append(f"activations differ by {error:+.1%} (tolerance "
                        f"{ACTIVATION_TOLERANCE:.0%})")
    expected_parts = predicted_parts(stage.items)
    measured_parts = ranks[0]["activations_by_part"]
    for name in PARTS:
        want, got = expected_parts.get(name, 0.0), measured_parts.get(name, 0)
        if want or got:
            rows.append([f"· {name}", human_bytes(want), "—", exact_bytes(got),
                         f"{got - want:+,.0f} B"])
            if got > want and name in LEFT_OUT:
                notes.append(f"{name}: {got - want:+,.0f} B that the formula leaves out — "
                             f"{LEFT_OUT[name]}.")
    if exact.step_counters:
        notes.append(f"torch.optim also keeps a 4-byte step counter per tensor "
                     f"({exact.tensors} tensors: {exact.step_counters} B), left out of the "
                     f"formula and of the optimizer row.")
    if stage.bytes("params") != exact.params:
        notes.append("The ledger splits Ψ evenly over t·p; this GPU holds "
                     f"{exact.param_count:,} parameters before ZeRO: norms and row-parallel "
                     "biases are whole on every TP rank, and the first stage also holds the "
                     "embedding.")
    passed = worst == 0 and within and not problems
    detail = (f"Model states {'match' if worst == 0 else 'do not match'} the tensor-by-tensor "
              f"count{' to the byte' if worst == 0 else ''}; activations measured "
              f"{human_bytes(acts[0])} against {human_bytes(predicted)} from Korthikanti's "
              f"formula ({error:+.1%}, tolerance {ACTIVATION_TOLERANCE:.0%}), "
              f"{len(ranks)} rank{'s' if len(ranks) > 1 else ''}.")
    if problems:
        detail += " " + "; ".join(problems)
    columns = ["", "ledger (formula)", "this GPU, tensor by tensor", "measured", "difference"]
    table = {"caption": "Measured beside predicted, per category", "header": columns,
             "rows": rows}
    return Verdict(passed, worst, detail, {"table": table, "notes": notes,
                                           "scaled": config_argv(scaled)})



def worker_argv(p) -> list[str]:
    """workers/memory.py's command line for ``p``: its scaled-down copy (:func:`scaled_config`)."""
    return config_argv(scaled_config(p.config()))


CHECK = Check(
    worker="workers/memory.py",
    world=lambda p: scaled_config(p.config()).dp * scaled_config(p.config()).tp,
    args=worker_argv,
    compare=compare,
)
