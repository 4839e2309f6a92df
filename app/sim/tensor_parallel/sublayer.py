"""The two halves of a transformer layer under tensor parallelism: the Megatron MLP and
self-attention with heads split across ranks, each wrapped as GPT runs it,

    out = X + Dropout(core(LayerNorm(X)))

Shoeybi et al. 2019, §3 and Fig. 3: the MLP is a column-parallel linear (h → f), GeLU on each
rank's columns, and a row-parallel linear (f → h); self-attention is a column-parallel QKV
projection that gives each rank whole heads, attention on those heads alone, and a
row-parallel output projection. Each half communicates twice per pass: f before it (identity
forward, all-reduce backward) and g after it (all-reduce forward, identity backward).

Korthikanti et al. 2022, §4.2.2 and Fig. 5: with sequence parallelism the LayerNorm, dropout and
residual run on each rank's rows of the sequence instead of on every rank in full; f becomes an
all-gather (reduce-scatter backward) and g a reduce-scatter (all-gather backward). The
LayerNorm's γ and β then see only their rank's rows, so their gradients are summed over the
tensor-parallel group once backward ends (Megatron-LM's ``finalize_model_grads``).
"""

from __future__ import annotations

import numpy as np

from app.sim.tensor_parallel.blocks import grads_caption
from app.sim.tensor_parallel.inputs import BlockInputs
from app.sim.tensor_parallel.linear import column_backward, column_forward, row_backward, row_forward, seq_shards
from app.sim.tensor_parallel.ops import (all_reduce, attention_heads, attention_heads_backward, concat_heads,
                            gelu, gelu_grad, layer_norm, layer_norm_backward, merge_heads, split,
                            split_heads, unconcat_heads)
from app.humanize import caption_number
from app.sim.tensor_parallel.program import BlockResult, FlowNode, Recorder, Step, compare, dims
from app.sim.tensor_parallel.reference import Reference


def sublayer_flow(block: str, sp: bool) -> tuple[FlowNode, ...]:
    outside = "sequence" if sp else "replicated"
    where = "on its rows" if sp else "on every rank, in full"
    enter = (FlowNode("enter", "all-gather", "fwd all-gather · bwd reduce-scatter", "comm") if sp
             else FlowNode("enter", "f", "fwd identity · bwd all-reduce", "comm"))
    exit_ = (FlowNode("exit", "reduce-scatter", "fwd reduce-scatter · bwd all-gather", "comm")
             if sp else FlowNode("exit", "g", "fwd all-reduce · bwd identity", "comm"))
    if block == "mlp":
        core = (FlowNode("col", "· A", "column-parallel", "tensor"),
                FlowNode("act", "GeLU", "its own columns", "tensor"),
                FlowNode("row", "· B", "row-parallel", "tensor"))
    else:
        core = (FlowNode("col", "· W_qkv", "column-parallel: whole heads", "tensor"),
                FlowNode("act", "attention", "its own heads", "tensor"),
                FlowNode("row", "· W_o", "row-parallel", "tensor"))
    return (FlowNode("ln", "LayerNorm", where, outside), enter, *core, exit_,
            FlowNode("drop", "dropout + X", where, outside))


class MlpCore:
    """GeLU(L·A)·B with A by columns and B by rows."""

    names = ("A", "B")

    def __init__(self, inp: BlockInputs, tp: int, heads: int):
        self.a_parts = split(inp.weights["A"], tp, 1)
        self.b_parts = split(inp.weights["B"], tp, 0)

    def shard_weights(self, r: int) -> dict:
        return {"A": self.a_parts[r], "B": self.b_parts[r]}

    def setup_operands(self, rec: Recorder):
        return (rec.sharded("Aᵣ", self.a_parts, "its columns"),
                rec.sharded("Bᵣ", self.b_parts, "its rows"))

    def forward(self, rec: Recorder, norm, sp: bool):
        self.norm_used, p_parts = column_forward(rec, norm, self.a_parts, sp,
                                                 names=("L", "A", "P"), flows=("enter", "col"))
        self.p_parts = p_parts
        self.h_parts = [gelu(p) for p in p_parts]
        rec.compute("forward", "act", "GeLU", "Hᵣ = GeLU(Pᵣ)",
                    f"GeLU works element by element, so each rank applies it to its own columns "
                    f"with no communication — the reason A is split by columns, not rows. "
                    f"GeLU({caption_number(p_parts[0][0, 0])}) = {caption_number(self.h_parts[0][0, 0])}.",
                    (rec.sharded("Pᵣ", p_parts),), ("GeLU →",), rec.sharded("Hᵣ", self.h_parts))
        return row_forward(rec, self.h_parts, self.b_parts, sp, names=("H", "B", "Z"),
                           flows=("row", "exit"))

    def backward(self, rec: Recorder, dz, norm_kept, sp: bool):
        dh_parts, db_parts = row_backward(rec, dz, self.h_parts, self.b_parts, sp,
                                          names=("H", "B", "Z"), flows=("row", "exit"))
        dp_parts = [dh * gelu_grad(p) for dh, p in zip(dh_parts, self.p_parts)]
        rec.compute("backward", "act", "GeLU backward", "dPᵣ = dHᵣ ⊙ GeLU′(Pᵣ)",
                    f"Through GeLU element by element, each rank on its own {dims(dh_parts[0])} "
                    f"columns: no communication. Rank 0's first element: "
                    f"{caption_number(dh_parts[0][0, 0])} × GeLU′({caption_number(self.p_parts[0][0, 0])}) = "
                    f"{caption_number(dp_parts[0][0, 0])}.", (rec.sharded("dHᵣ", dh_parts), rec.sharded(
                        "GeLU′(Pᵣ)", [gelu_grad(p) for p in self.p_parts])), ("⊙", "="),
                    rec.sharded("dPᵣ", dp_parts))
        dnorm, da_parts = column_backward(rec, self.norm_used, norm_kept, dp_parts, self.a_parts,
                                          sp, names=("L", "A", "P"), flows=("enter", "col"))
        return dnorm, {"A": da_parts, "B": db_parts}


class AttentionCore:
    """softmax(QKᵀ/√d)·V per head with the heads split across ranks, then · W_o by rows."""

    names = ("W_qkv", "W_o")

    def __init__(self, inp: BlockInputs, tp: int, heads: int):
        self.heads_per_rank = heads // tp
        self.qkv_parts = split(inp.weights["W_qkv"], tp, 1)
        self.o_parts = split(inp.weights["W_o"], tp, 0)

    def shard_weights(self, r: int) -> dict:
        return {"W_qkv": self.qkv_parts[r], "W_o": self.o_parts[r]}

    def setup_operands(self, rec: Recorder):
        return (rec.sharded("W_qkvᵣ", self.qkv_parts, "its heads' columns"),
                rec.sharded("W_oᵣ", self.o_parts, "its heads' rows"))

    def forward(self, rec: Recorder, norm, sp: bool):
        hr = self.heads_per_rank
        self.norm_used, qkv_parts = column_forward(rec, norm, self.qkv_parts, sp,
                                                   names=("L", "W_qkv", "QKV"),
                                                   flows=("enter", "col"))
        self.saved = []
        for qkv in qkv_parts:
            q, k, v = split_heads(qkv, hr)
            p, c = attention_heads(q, k, v)
            self.saved.append((q, k, v, p, concat_heads(c)))
        probs = [s[3] for s in self.saved]
        context = [s[4] for s in self.saved]
        n = qkv_parts[0].shape[0]
        rec.compute("forward", "act", "attention, head by head",
                    "Pᵣ = softmax(Qᵣ·Kᵣᵀ/√d)",
                    f"Each rank holds the queries, keys and values of its own {hr} "
                    f"head{'s' if hr > 1 else ''} and computes their {n} × {n} attention "
                    f"probabilities (causal: token i sees tokens 0…i) without talking to the "
                    f"others — heads are independent. " + (
                        f"Rank 0, head 0, token 1 attends to tokens 0 and 1 with "
                        f"{caption_number(probs[0][0, 1, 0])} and {caption_number(probs[0][0, 1, 1])}." if n > 1 else
                        f"With {n} token, it attends only to itself: probability 1."),
                    (rec.sharded("QKVᵣ", qkv_parts, "its heads"),), ("softmax(QKᵀ/√d) →",),
                    rec.sharded("Pᵣ", probs, f"{hr} head{'s' if hr > 1 else ''}"))
        rec.compute("forward", "act", "context", "Cᵣ = Pᵣ · Vᵣ",
                    f"Each head's probabilities weight its values; the {hr} heads' contexts sit "
                    f"side by side as rank r's {dims(context[0])} block of columns of C.",
                    (rec.sharded("Pᵣ", probs), rec.sharded("Vᵣ", [s[2] for s in self.saved])),
                    ("·", "="), rec.sharded("Cᵣ", context, "its heads' columns"))
        return row_forward(rec, context, self.o_parts, sp, names=("C", "W_o", "Z"),
                           flows=("row", "exit"))

    def backward(self, rec: Recorder, dz, norm_kept, sp: bool):
        hr = self.heads_per_rank
        dc_parts, do_parts = row_backward(rec, dz, [s[4] for s in self.saved], self.o_parts, sp,
                                          names=("C", "W_o", "Z"), flows=("row", "exit"))
        dqkv_parts = []
        for dc, (q, k, v, p, _) in zip(dc_parts, self.saved):
            dqkv_parts.append(merge_heads(*attention_heads_backward(
                unconcat_heads(dc, hr), q, k, v, p)))
        rec.compute("backward", "act", "attention backward", "dQKVᵣ = attention′(dCᵣ)",
                    f"Back through each head's softmax and products, each rank on its own {hr} "
                    f"head{'s' if hr > 1 else ''}: no communication. The result, "
                    f"{dims(dqkv_parts[0])}, is the gradient of its heads' queries, keys and "
                    f"values.", (rec.sharded("dCᵣ", dc_parts),),
                    ("attention′ →",), rec.sharded("dQKVᵣ", dqkv_parts, "its heads"))
        dnorm, dqkv_w = column_backward(rec, self.norm_used, norm_kept, dqkv_parts,
                                        self.qkv_parts, sp, names=("L", "W_qkv", "QKV"),
                                        flows=("enter", "col"))
        return dnorm, {"W_qkv": dqkv_w, "W_o": do_parts}


def sublayer_block(inp: BlockInputs, tp: int, sp: bool, heads: int,
                   ref: Reference) -> BlockResult:
    rec = Recorder(tp)
    core = (MlpCore if inp.block == "mlp" else AttentionCore)(inp, tp, heads)
    x, gamma, beta, mask, dy = (inp.x, inp.weights["gamma"], inp.weights["beta"], inp.mask,
                                inp.dy)
    n = x.shape[0]
    rows = lambda a: split(a, tp, 0) if sp else [a] * tp  # noqa: E731  what each rank works on
    x_op = seq_shards(rec, "Xᵣ", x) if sp else rec.replicated("X", x, "the same on every rank")
    what = "MLP" if inp.block == "mlp" else "self-attention"
    rec.add(Step("setup", "setup", "what each rank holds", "", "ln",
                 f"The {what} block on {tp} rank{'s' if tp > 1 else ''}: "
                 f"{core.names[0]} is cut by columns and {core.names[1]} by rows. " +
                 (f"With sequence parallelism each rank holds only {n // tp} of the {n} tokens "
                  f"of X outside the block." if sp else
                  f"Every rank holds the whole input X ({dims(x)}) and the LayerNorm's γ, β."),
                 (x_op, *core.setup_operands(rec)), ("", "", "")))

    # 1. LayerNorm: on every rank in full, or on each rank's rows
    x_rows = rows(x)
    normed = [layer_norm(xr, gamma, beta) for xr in (x_rows[:1] if not sp else x_rows)]
    norm_parts = [v for v, _ in normed]
    norm_op = (rec.sharded("Lᵣ", norm_parts, "its rows") if sp
               else rec.replicated("L", norm_parts[0], "computed by every rank"))
    rec.compute("forward", "ln", "LayerNorm", "Lᵣ = LayerNorm(Xᵣ)" if sp else "L = LayerNorm(X)",
                (f"Each rank normalises only its {n // tp} tokens: LayerNorm treats every token "
                 f"on its own, so the sequence can be split — {tp}× less work and memory than "
                 f"every rank doing all {n}." if sp and tp > 1 else
                 f"Every rank normalises all {n} tokens — the same work, repeated on each of "
                 f"the {tp} ranks, and the same {dims(x)} activations stored {tp} times. "
                 f"Sequence parallelism removes this repetition."),
                (x_op,), ("LayerNorm →",), norm_op)

    # 2.–4. f, the sharded core, g
    z = core.forward(rec, norm_op, sp)
    z_rows = z if sp else rows(z)
    out_parts = [xr + zr * mr for xr, zr, mr in zip(x_rows, z_rows, rows(mask))]
    z_op = rec.summed("Zᵣ" if sp else "Z", z)
    out_op = (rec.sharded("Outᵣ", out_parts, "its rows") if sp
              else rec.replicated("Out", out_parts[0], "computed by every rank"))
    mask_op = (rec.sharded("Mᵣ", rows(mask), "its rows") if sp
               else rec.replicated("M", mask, "dropout mask"))
    rec.compute("forward", "drop", "dropout + residual",
                "Outᵣ = Xᵣ + Mᵣ ⊙ Zᵣ" if sp else "Out = X + M ⊙ Z",
                f"Dropout (p = 0.1: M is 0 or 1/0.9 = {caption_number(1 / 0.9)}) and the residual "
                + ("on each rank's rows only." if sp else
                   f"on every rank in full, again repeated {tp} times.") +
                f" Out[0, 0] = {caption_number(x[0, 0])} + {caption_number(mask[0, 0])} × {caption_number(z_rows[0][0, 0])} = "
                f"{caption_number(out_parts[0][0, 0])}.",
                (z_op, mask_op), ("⊙", "+ X ="), out_op)
    out_gathered = (rec.gathered("Out", out_parts, 0, "every rank's rows") if sp
                    else rec.replicated("Out", out_parts[0]))
    err = compare("Out", out_gathered, ref.output)
    rec.check(f"The tensor-parallel output{' assembled from every rank' if sp else ''}"
              f" next to the same block on one GPU without sharding. Largest difference: "
              f"{err.error:.3g} — floating-point rounding only (sums taken in another order).",
              (err,), "forward result")

    # backward
    dy_rows = rows(dy)
    dy_op = (rec.sharded("dOutᵣ", dy_rows, "its rows") if sp
             else rec.replicated("dOut", dy, "the same on every rank"))
    dz_rows = [d * m for d, m in zip(dy_rows, rows(mask))]
    rec.compute("backward", "drop", "dropout backward", "dZᵣ = Mᵣ ⊙ dOutᵣ" if sp
                else "dZ = M ⊙ dOut",
                f"Backward starts from dOut ({dims(dy)}). The residual passes it straight to X; "
                f"dropout multiplies it by the same mask M" +
                (", each rank on its own rows." if sp else ", on every rank."),
                (mask_op, dy_op), ("⊙", "="),
                rec.sharded("dZᵣ", dz_rows, "its rows") if sp
                else rec.replicated("dZ", dz_rows[0]))
    dnorm, core_grads = core.backward(rec, dz_rows if sp else dz_rows[0], norm_op, sp)
    dnorm_rows = dnorm if sp else [dnorm]
    ln_back = [layer_norm_backward(d, cache) for d, (_, cache) in zip(dnorm_rows, normed)]
    dx_parts = [d + dyr for (d, _, _), dyr in zip(ln_back, dy_rows)]
    dgb = [np.stack([dg, db]) for _, dg, db in ln_back]          # (2, h): dγ over dβ
    rec.compute("backward", "ln", "LayerNorm backward",
                "dXᵣ = LayerNorm′(dLᵣ) + dOutᵣ" if sp else "dX = LayerNorm′(dL) + dOut",
                "Back through LayerNorm" + (f" on each rank's {n // tp} rows" if sp
                                            else f" on every rank, all {n} rows")
                + f", plus the residual's gradient: dX[0, 0] = {caption_number(dx_parts[0][0, 0])}. "
                + ("γ and β saw only this rank's rows, so each rank's dγ, dβ are partial sums."
                   if sp and tp > 1 else "Every rank computes the same dγ, dβ."),
                (rec.sharded("dLᵣ", dnorm_rows, "its rows") if sp
                 else rec.summed("dL", dnorm),), ("LayerNorm′ →",),
                rec.sharded("dXᵣ", dx_parts, "its rows") if sp
                else rec.replicated("dX", dx_parts[0]))
    if sp:
        total = all_reduce(dgb)
        rec.collective("all_reduce", "backward", "ln", "[dγ; dβ] = Σᵣ [dγᵣ; dβᵣ]",
                       f"With sequence parallelism every rank's dγ and dβ cover only its own "
                       f"tokens: they are summed over the tensor-parallel group "
                       f"({total.size} numbers), as Megatron-LM's finalize_model_grads does "
                       f"before the optimizer step.", rec.sharded("dγβᵣ", dgb, "partial sum"),
                       rec.summed("dγβ", total), total.size,
                       purpose="sum the LayerNorm γ, β gradients of the sequence shards")
    else:
        total = dgb[0]
    grads = {name: np.concatenate(parts, axis=1 if k == 0 else 0)
             for k, (name, parts) in enumerate(core_grads.items())}
    grads.update(gamma=total[0], beta=total[1])
    dx_full = np.concatenate(dx_parts) if sp else dx_parts[0]
    first, second = core.names
    checks = (compare(f"d{first}", rec.gathered(f"d{first}", core_grads[first], 1),
                      ref.grads[first]),
              compare(f"d{second}", rec.gathered(f"d{second}", core_grads[second], 0),
                      ref.grads[second]),
              compare("dX", rec.gathered("dX", dx_parts, 0) if sp else rec.replicated(
                  "dX", dx_full), ref.input_grad),
              compare("dγ", rec.replicated("dγ", total[:1]), ref.grads["gamma"][None]),
              compare("dβ", rec.replicated("dβ", total[1:]), ref.grads["beta"][None]))
    rec.check(grads_caption(checks), checks, "gradients")
    shard_grads = tuple({first: core_grads[first][r], second: core_grads[second][r],
                         "gamma": total[0], "beta": total[1]} for r in range(tp))
    # what each rank computes before the collective that completes it: its partial sum of Z
    partial = [s.result.values for s in rec.steps
               if s.kind == "compute" and s.flow == "row" and s.pass_ == "forward"][0]
    return BlockResult(
        tuple(rec.steps), sublayer_flow(inp.block, sp), out_gathered,
        tuple({**core.shard_weights(r), "gamma": gamma, "beta": beta} for r in range(tp)),
        tuple(partial), tuple(out_parts) if sp else (out_parts[0],) * tp, grads, shard_grads,
        dx_full, {"z": np.concatenate(z) if sp else z})
