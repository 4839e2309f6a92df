"""Activation memory of one transformer layer, after Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models", §4 and Table 2.

Bytes that one layer keeps for backward, for one micro-batch, on one GPU, with 16-bit
activations and 1-byte dropout masks. s sequence, b micro-batch, h hidden, a heads, t
tensor-parallel size:

    no parallelism                  sbh(34 + 5as/h)
    tensor parallel                 sbh(10 + 24/t + 5as/(ht))
    tensor + sequence parallel      sbh/t · (34 + 5as/h)
    TP + selective recompute        sbh(10 + 24/t)
    TP + SP + selective recompute   34·sbh/t
    full recompute                  2sbh (2sbh/t with sequence parallelism)

The 34 is attention 11 + MLP 19 + two LayerNorms 4 (in units of sbh bytes); 5as/h is the
attention scores: softmax output 2, dropout mask 1, dropout output 2. The breakdown below keeps
each term by name so a page can show where the bytes go, and generalises the two places where
modern models differ from GPT-3: grouped-query attention (K and V are kv_heads/heads as large)
and a gated MLP (SwiGLU keeps gate and up projections, ffn wide each). With kv_heads = heads,
ffn = 4h, no gate and dropout on, the terms add up to Table 2 exactly. ``act_bytes`` = 4 gives
the same ledger for fp32 training (every activation twice as large, the masks still 1 byte).
"""

from __future__ import annotations

from dataclasses import dataclass

RECOMPUTE = ("none", "selective", "full")


@dataclass(frozen=True)
class LayerShape:
    seq: int                 # s
    micro_batch: int         # b
    hidden: int              # h
    heads: int               # a
    kv_heads: int | None = None   # None: as many as heads (multi-head attention)
    ffn: int | None = None        # None: 4h
    gated_mlp: bool = False       # SwiGLU: gate and up projections
    dropout: bool = True          # GPT-3 style dropout after attention, scores and MLP
    act_bytes: int = 2            # bytes per stored activation (2: 16-bit, 4: fp32)

    @property
    def kv(self) -> int:
        return self.kv_heads or self.heads

    @property
    def inner(self) -> int:
        return self.ffn or 4 * self.hidden


@dataclass(frozen=True)
class ActivationTerm:
    name: str
    bytes: float
    formula: str
    sharded_by_tp: bool        # divided by t under tensor parallelism
    kept_by_selective: bool    # still stored under selective recompute


def terms(shape: LayerShape) -> tuple[ActivationTerm, ...]:
    """Every tensor one layer keeps for backward, without any parallelism (bytes)."""
    s, b, h, a = shape.seq, shape.micro_batch, shape.hidden, shape.heads
    sbh = s * b * h
    kv = shape.kv / shape.heads
    f = shape.inner
    mask = 1 if shape.dropout else 0
    e = shape.act_bytes
    out = [
        ActivationTerm("LayerNorm 1 input", e * sbh, f"{e}sbh", False, True),
        ActivationTerm("QKV projection input", e * sbh, f"{e}sbh", False, True),
        ActivationTerm("Q", e * sbh, f"{e}sbh", True, True),
        ActivationTerm("K", e * sbh * kv, f"{e}sbh·kv/a", True, True),
        ActivationTerm("softmax output", e * a * s * s * b, f"{e}as²b", True, False),
        ActivationTerm("attention dropout mask", mask * a * s * s * b, "as²b", True, False),
        ActivationTerm("attention dropout output", mask * e * a * s * s * b, f"{e}as²b", True,
                       False),
        ActivationTerm("V", e * sbh * kv, f"{e}sbh·kv/a", True, True),
        ActivationTerm("output projection input", e * sbh, f"{e}sbh", True, True),
        ActivationTerm("attention dropout mask (residual)", mask * sbh, "sbh", False, True),
        ActivationTerm("LayerNorm 2 input", e * sbh, f"{e}sbh", False, True),
        ActivationTerm("MLP input", e * sbh, f"{e}sbh", False, True),
    ]
    if shape.gated_mlp:
        out += [
            ActivationTerm("gate projection output", e * s * b * f, f"{e}sbf", True, True),
            ActivationTerm("up projection output", e * s * b * f, f"{e}sbf", True, True),
            ActivationTerm("down projection input", e * s * b * f, f"{e}sbf", True, True),
        ]
    else:
        out += [
            ActivationTerm("GeLU input", e * s * b * f, f"{e}sbf", True, True),
            ActivationTerm("second linear input", e * s * b * f, f"{e}sbf", True, True),
        ]
    out.append(ActivationTerm("MLP dropout mask", mask * sbh, "sbh", False, True))
    return tuple(t for t in out if t.bytes)


def kept_terms(shape: LayerShape, tp: int = 1, sequence_parallel: bool = False,
               recompute: str = "none") -> tuple[ActivationTerm, ...]:
    """The terms one layer keeps on one GPU, bytes divided as tensor and sequence parallelism
    divide them and formulas carrying the divisor (``2as²b/t``). Full recompute keeps only the
    layer's input (Table 2: 2sbh, split along s under sequence parallelism)."""
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}, got {recompute!r}")
    sbh = shape.seq * shape.micro_batch * shape.hidden
    e = shape.act_bytes
    if recompute == "full":
        shard = tp if sequence_parallel else 1
        return (ActivationTerm("layer input (checkpoint)", e * sbh / shard,
                               f"{e}sbh" + ("/t" if shard > 1 else ""), sequence_parallel, True),)
    kept = []
    for term in terms(shape):
        if recompute == "selective" and not term.kept_by_selective:
            continue
        # with sequence parallelism the LayerNorm/dropout regions are split along s as well
        shard = tp if (term.sharded_by_tp or sequence_parallel) else 1
        kept.append(ActivationTerm(term.name, term.bytes / shard,
                                   term.formula + ("/t" if shard > 1 else ""),
                                   term.sharded_by_tp, term.kept_by_selective))
    return tuple(kept)


def breakdown(shape: LayerShape, tp: int = 1, sequence_parallel: bool = False,
              recompute: str = "none") -> tuple[tuple[ActivationTerm, float], ...]:
    """Every term of :func:`terms` with the bytes one GPU keeps of it (0 where selective
    recompute drops it), so rows line up across settings (the tensor-parallel scene's table)."""
    if recompute == "full":
        raise ValueError("a per-term breakdown needs recompute none or selective, got 'full'")
    kept = {t.name: t.bytes for t in kept_terms(shape, tp, sequence_parallel, recompute)}
    return tuple((term, kept.get(term.name, 0.0)) for term in terms(shape))


def per_layer_bytes(shape: LayerShape, tp: int = 1, sequence_parallel: bool = False,
                    recompute: str = "none") -> float:
    """Activation bytes one layer keeps, one micro-batch, one GPU (Korthikanti Table 2)."""
    return sum(t.bytes for t in kept_terms(shape, tp, sequence_parallel, recompute))


def korthikanti_table2(s: int, b: int, h: int, a: int, t: int, sequence_parallel: bool,
                       recompute: str) -> float:
    """The closed forms of Table 2, as printed, for checking :func:`per_layer_bytes`."""
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh / (t if sequence_parallel else 1)
    if recompute == "selective":
        return 34 * sbh / t if sequence_parallel else sbh * (10 + 24 / t)
    if sequence_parallel:
        return sbh / t * (34 + 5 * a * s / h)
    return sbh * (10 + 24 / t + 5 * a * s / (h * t))


def pipeline_in_flight(pp: int, virtual: int = 1) -> float:
    """How many layers' worth of activations the first pipeline stage holds under 1F1B, in
    units of its own L/p layers: p micro-batches in flight → L layers in all; interleaved with
    v chunks per rank: × (1 + (p−1)/(p·v)) (Korthikanti §4.2.3)."""
    if virtual <= 1:
        return float(pp)
    return pp * (1 + (pp - 1) / (pp * virtual))
