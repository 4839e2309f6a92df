"""The vocabulary-parallel embedding and cross-entropy: a zero-layer language model whose input
embedding and output layer share one matrix E (V × h), cut into blocks of V/t rows.

Shoeybi et al. 2019, §3 ("Input and output embeddings"): rank r holds the rows of E for tokens
r·V/t … (r+1)·V/t − 1. The lookup E[ids] is a row-parallel product of the one-hot ids with E:
each rank fills in the tokens it owns and leaves zeros elsewhere, and an all-reduce adds the
pieces. The output layer H·Eᵀ is column-parallel over the vocabulary, and instead of gathering
the n × V logits (V is 50 k–256 k in real models), the cross-entropy is computed in place with
three all-reduces of n numbers each (Megatron-LM's ``_VocabParallelCrossEntropy``): the maximum
logit of each token, its target's logit (held by one rank), and the sum of exponentials.
The loss's gradient, softmax − one-hot, then needs no communication at all.

With sequence parallelism the embedding's all-reduce becomes a reduce-scatter (each rank keeps
its tokens' rows; the transformer layers of a real model would run here) and the output layer
all-gathers them again.
"""

from __future__ import annotations

import numpy as np

from app.sim.tensor_parallel.blocks import grads_caption
from app.sim.tensor_parallel.inputs import BlockInputs
from app.sim.tensor_parallel.linear import column_backward, column_forward, sum_partials
from app.sim.tensor_parallel.ops import all_gather, all_reduce, split
from app.humanize import caption_number
from app.sim.tensor_parallel.program import (BlockResult, FlowNode, Recorder, Step, compare, dims,
                                sum_text)
from app.sim.tensor_parallel.reference import Reference


def embedding_flow(sp: bool) -> tuple[FlowNode, ...]:
    nodes = [FlowNode("lookup", "E[ids]", "vocab-parallel: its rows of E", "tensor"),
             FlowNode("exit", "reduce-scatter" if sp else "all-reduce",
                      "fwd reduce-scatter · bwd all-gather" if sp
                      else "fwd all-reduce · bwd identity",
                      "comm")]
    if sp:
        nodes.append(FlowNode("enter", "all-gather", "fwd all-gather · bwd reduce-scatter",
                              "comm"))
    else:
        nodes.append(FlowNode("enter", "f", "fwd identity · bwd all-reduce", "comm"))
    nodes += [FlowNode("logits", "H · Eᵀ", "vocab-parallel logits", "tensor"),
              FlowNode("loss", "cross-entropy", "3 all-reduces of n numbers", "comm")]
    return tuple(nodes)


def embedding_block(inp: BlockInputs, tp: int, sp: bool, ref: Reference) -> BlockResult:
    rec = Recorder(tp)
    e, one_hot, ids, targets = inp.weights["E"], inp.x, inp.ids, inp.targets
    n, vocab = one_hot.shape
    per = vocab // tp
    e_parts, x_parts = split(e, tp, 0), split(one_hot, tp, 1)
    ids_text = ", ".join(str(int(i)) for i in ids[:6]) + (", …" if n > 6 else "")
    rec.add(Step("setup", "setup", "what each rank holds", "", "lookup",
                 f"E ({dims(e)}) is cut into {tp} blocks of {per} rows: rank r owns tokens "
                 f"{per}r … {per}r + {per - 1}. The ids [{ids_text}] are drawn as one-hot rows; "
                 f"each rank keeps the {per} columns of the tokens it owns.",
                 (rec.sharded("onehotᵣ", x_parts, "its tokens' columns"),
                  rec.sharded("Eᵣ", e_parts, "its rows")), ("", "")))
    h_parts = [x @ ep for x, ep in zip(x_parts, e_parts)]
    owner = int(ids[0]) // per
    rec.compute("forward", "lookup", "vocab-parallel lookup", "Hᵣ = onehotᵣ · Eᵣ",
                f"Each rank looks up only the tokens it owns and writes zeros for the others: "
                f"token 0 is id {int(ids[0])}, owned by rank {owner}, so only rank {owner}'s "
                f"first row is non-zero. Each Hᵣ is a partial sum.",
                (rec.sharded("onehotᵣ", x_parts), rec.sharded("Eᵣ", e_parts)), ("·", "="),
                rec.sharded("Hᵣ", h_parts, "partial: its tokens only"))
    summed = sum_partials(
        rec, h_parts, sp, "H", "forward", "exit",
        why=("An all-reduce adds the pieces: each token's row comes from the one rank that owns "
             "it, the others add zeros.",
             f"Adding the pieces completes every embedding; with sequence parallelism each rank "
             f"keeps only its {n // tp} tokens' rows (in a real model the transformer layers run "
             f"here, on these shards)."),
        purpose=("complete the embeddings on every rank",
                 "complete the embeddings, keep each rank's tokens"))
    if sp:
        h_rows = summed
        h_op = rec.sharded("Hᵣ", h_rows, "its rows")
        hidden = all_gather(h_rows, 0)
    else:
        hidden = summed
        h_op = rec.summed("H", hidden)
    h_used, logit_parts = column_forward(rec, h_op, [p.T for p in e_parts], sp,
                                         names=("H", "Eᵀ", "Logits"), flows=("enter", "logits"))
    # cross-entropy without gathering the logits
    local_max = [lg.max(axis=1, keepdims=True) for lg in logit_parts]
    row_max = all_reduce(local_max, "max")
    rec.collective("all_reduce", "forward", "loss", "m = maxᵣ mᵣ",
                   f"Softmax needs each token's largest logit over the whole vocabulary; each rank "
                   f"knows the largest of its {per}, and an all-reduce with max combines them: "
                   f"token 0: max({', '.join(caption_number(m[0, 0]) for m in local_max[:4])}"
                   f"{', …' if tp > 4 else ''}) = {caption_number(row_max[0, 0])}.",
                   rec.sharded("mᵣ", local_max, "its largest logit"),
                   rec.summed("m", row_max, "largest over every rank"), n, "max",
                   purpose="the largest logit of each token")
    shifted = [lg - row_max for lg in logit_parts]
    target_parts = []
    for r, s in enumerate(shifted):
        mine = (targets >= r * per) & (targets < (r + 1) * per)
        column = np.where(mine, s[np.arange(n), np.clip(targets - r * per, 0, per - 1)], 0.0)
        target_parts.append(column[:, None])
    target_logit = all_reduce(target_parts)
    rec.collective("all_reduce", "forward", "loss", "zₜ = Σᵣ zₜ,ᵣ",
                   f"Only the rank that owns a token's target knows its logit; the others "
                   f"contribute 0 and an all-reduce gives it to all. Token 0's target is "
                   f"{int(targets[0])} (rank {int(targets[0]) // per}): "
                   f"{sum_text([float(p[0, 0]) for p in target_parts])}.",
                   rec.sharded("zₜ,ᵣ", target_parts, "target logit or 0"),
                   rec.summed("zₜ", target_logit), n,
                   purpose="each token's target logit, from the rank that owns it")
    sum_parts = [np.exp(s).sum(axis=1, keepdims=True) for s in shifted]
    sum_exp = all_reduce(sum_parts)
    rec.collective("all_reduce", "forward", "loss", "S = Σᵣ Sᵣ",
                   f"Each rank sums exp(logit − m) over its {per} tokens; the all-reduce gives the "
                   f"softmax denominator. Token 0: "
                   f"{sum_text([float(p[0, 0]) for p in sum_parts])}.",
                   rec.sharded("Sᵣ", sum_parts, "Σ exp over its tokens"),
                   rec.summed("S", sum_exp), n, purpose="each token's softmax denominator")
    losses = np.log(sum_exp) - target_logit                    # (n, 1)
    rec.compute("forward", "loss", "cross-entropy", "lossᵢ = log Sᵢ − zₜ,ᵢ",
                f"Every rank now computes the loss of every token — {n} numbers instead of "
                f"gathering {n} × {vocab} logits. Token 0: log {caption_number(sum_exp[0, 0])} − "
                f"({caption_number(target_logit[0, 0])}) = {caption_number(losses[0, 0])}; mean over tokens "
                f"{caption_number(losses.mean())}.",
                (rec.summed("S", sum_exp), rec.summed("zₜ", target_logit)),
                ("log · −", "="), rec.summed("loss", losses))
    logits_op = rec.gathered("Logits", logit_parts, 1, "every rank's vocabulary columns")
    h_gathered = rec.gathered("H", h_rows, 0) if sp else h_op
    checks = (compare("H", h_gathered, ref.output),
              compare("logits", logits_op, ref.extras["logits"]),
              compare("loss", rec.summed("loss", losses), ref.extras["losses"][:, None]))
    rec.check("Embeddings, logits and per-token losses against the same model on one GPU. "
              "Largest differences: " + ", ".join(f"{c.name} {c.error:.3g}" for c in checks)
              + ".", checks, "forward result")

    # backward: d loss / d logits = (softmax − one-hot) / n, on each rank's own columns
    d_logit_parts = []
    for r, s in enumerate(shifted):
        d = np.exp(s) / sum_exp
        mine = (targets >= r * per) & (targets < (r + 1) * per)
        d[np.nonzero(mine)[0], targets[mine] - r * per] -= 1.0
        d_logit_parts.append(d / n)
    rec.compute("backward", "loss", "softmax − one-hot", "dLogitsᵣ = (softmaxᵣ − onehotᵣ) / n",
                f"The loss's gradient needs nothing more from the other ranks: each has m and S, "
                f"so its softmax columns follow, minus 1 at the target (on the owning rank). "
                f"Rank 0, token 0: {caption_number(d_logit_parts[0][0, 0])}.",
                (rec.sharded("Logitsᵣ", logit_parts),), ("softmax − onehot →",),
                rec.sharded("dLogitsᵣ", d_logit_parts, "its vocabulary columns"))
    h_kept = rec.sharded("Hᵣ", h_rows, "its rows") if sp else h_op
    d_hidden, de_out_t = column_backward(rec, h_used, h_kept, d_logit_parts,
                                         [p.T for p in e_parts], sp, names=("H", "Eᵀ", "Logits"),
                                         flows=("enter", "logits"))
    if sp:
        dh_op = rec.gathered("dH", list(d_hidden), 0)
        rec.collective("all_gather", "backward", "exit", "dH = all-gather(dHᵣ)",
                       f"The reduce-scatter's backward: every rank gathers the gradient of all "
                       f"{n} tokens' embeddings ({n} × {e.shape[1]}), because any token may be one "
                       f"of its own.",
                       rec.sharded("dHᵣ", list(d_hidden), "its rows"), dh_op, n * e.shape[1],
                       purpose="gather dH for the embedding's gradient")
        d_hidden = dh_op.values[0]
    de_parts = [x.T @ d_hidden + d.T for x, d in zip(x_parts, de_out_t)]
    rec.compute("backward", "lookup", "embedding gradient",
                "dEᵣ = onehotᵣᵀ · dH + (output layer's dEᵣ)",
                f"Each rank adds the gradient of every token it owns to its {per} rows of E, on "
                f"top of its rows' gradient from the output layer (the two uses of a tied matrix "
                f"add up). No communication. Token 0 (id {int(ids[0])}) adds its gradient to row "
                f"{int(ids[0]) % per} of rank {owner}'s block.",
                (rec.sharded("onehotᵣᵀ", [x.T for x in x_parts]), rec.summed("dH", d_hidden)),
                ("·", "+ output-layer part ="),
                rec.sharded("dEᵣ", de_parts, "its rows"))
    checks = (compare("dE", rec.gathered("dE", de_parts, 0), ref.grads["E"]),)
    rec.check(grads_caption(checks), checks, "gradients")
    results = tuple(h_rows) if sp else (hidden,) * tp
    return BlockResult(tuple(rec.steps), embedding_flow(sp), h_gathered,
                       tuple({"E": p} for p in e_parts), tuple(h_parts), results,
                       {"E": np.concatenate(de_parts)}, tuple({"E": p} for p in de_parts), None,
                       {"logits": logits_op.values[0], "losses": losses[:, 0],
                        "loss": np.array(losses.mean())})
