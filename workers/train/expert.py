"""Expert parallelism: a top-k routed mixture of SwiGLU experts whose experts are split over the
ep ranks, tokens moved by two all-to-alls with uneven splits (Lepikhin et al. 2020, GShard;
Megatron-LM's ``MoEAlltoAllTokenDispatcher``). Dropless: every assignment is computed, so the
splits follow the router.

One layer, for this rank's n tokens (all of its TP group's tokens: under SP they are gathered
first):

    1. route     logits = x·W_r; probabilities = softmax over the E experts; each token's top-k
                 experts by logit (a stable sort: ties go to the lower expert) with their
                 probabilities as gates (Megatron's softmax-then-top-k)
    2. permute   the n·k assignments sorted by expert (token order within an expert)
    3. counts    all-to-all of the per-expert counts, so that every rank sizes its receive
    4. dispatch  all-to-all of the token vectors: rank j gets the rows for its E/ep experts
    5. experts   each local expert's SwiGLU on its rows (cut over tp like the dense MLP: the
                 outputs are partial sums), run even on zero rows so that every rank's
                 backward has the same steps
    6. combine   the all-to-all back (the dispatch's splits swapped), gates times outputs added
                 per token, then the TP sum (g, or SP's reduce-scatter)

Autograd: :class:`AllToAll`'s backward is the all-to-all with the splits swapped. Under tp > 1
the gates and the expert input enter through f (identity forward, all-reduce backward): their
gradients are partial sums of the partial expert outputs, while the router's own input path is
whole on every rank.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from workers.train import comm, tensor


class AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, send_splits, recv_splits, group):
        ctx.splits, ctx.group = (send_splits, recv_splits), group
        return comm.all_to_all(x, send_splits, recv_splits, group)

    @staticmethod
    def backward(ctx, grad):
        send_splits, recv_splits = ctx.splits
        return comm.all_to_all(grad.contiguous(), recv_splits, send_splits, ctx.group), \
            None, None, None


def swiglu(x, w1, w3, w2):
    return (F.silu(x @ w1) * (x @ w3)) @ w2


def route(x, router, top_k: int):
    """(chosen experts (n, k), gates (n, k)) of softmax-then-top-k routing."""
    logits = x @ router
    probs = torch.softmax(logits, dim=-1)
    chosen = torch.sort(logits.detach(), dim=-1, descending=True, stable=True).indices[:, :top_k]
    return chosen, probs.gather(1, chosen)


def moe(x, weights, groups, top_k: int, sp: bool) -> torch.Tensor:
    """The MoE MLP of one block; ``weights``: router (h, E) and this rank's experts
    w1, w3 (E/ep, h, f/tp), w2 (E/ep, f/tp, h)."""
    tp, ep = groups["tp"], groups["ep"]
    tokens = (x if tp.size == 1 or not sp else
              tensor.GatherTokens.apply(x, tp))                     # (n, h), same on every tp rank
    E = weights["router"].shape[1]
    local = weights["w1"].shape[0]
    chosen, gates = route(tokens, weights["router"], top_k)         # 1
    gates = tensor.copy_to(gates, tp)
    inputs = tensor.copy_to(tokens, tp)
    flat_expert = chosen.reshape(-1)                                # 2
    order = torch.sort(flat_expert, stable=True).indices
    token_of = order // top_k
    per_expert = torch.bincount(flat_expert, minlength=E)           # rows for each expert
    received_counts = comm.all_to_all_counts(per_expert, ep)        # 3: [src, my local expert]
    table = received_counts.view(ep.size, local)
    send_splits = per_expert.view(ep.size, local).sum(1).tolist()
    recv_splits = table.sum(1).tolist()
    rows = AllToAll.apply(inputs[token_of], send_splits, recv_splits, ep)   # 4
    # 5: rows arrive grouped by source, then by local expert; regroup by expert
    owner = torch.repeat_interleave(torch.arange(local).repeat(ep.size), table.reshape(-1))
    by_expert = torch.sort(owner, stable=True).indices
    grouped = rows[by_expert]
    counts = table.sum(0).tolist()                                  # rows of each local expert
    pieces, start = [], 0
    for e, count in enumerate(counts):
        pieces.append(swiglu(grouped[start:start + count], weights["w1"][e], weights["w3"][e],
                             weights["w2"][e]))
        start += count
    outputs = torch.cat(pieces)[torch.argsort(by_expert)]           # back to arrival order
    returned = AllToAll.apply(outputs, recv_splits, send_splits, ep)        # 6
    weighted = returned * gates.reshape(-1)[order][:, None]
    combined = torch.zeros_like(tokens).index_add(0, token_of, weighted)
    return tensor.leave(combined, tp, sp)
