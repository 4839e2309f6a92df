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
    7. aux loss  with ``aux_loss_coeff`` > 0, the load-balancing loss of the micro-batch
                 (:func:`load_balancing_loss`: the counts summed over cp), attached to the
                 output so that its gradient joins the backward (:class:`AttachLoss`)

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


class AttachLoss(torch.autograd.Function):
    """Megatron-LM's ``MoEAuxLossAutoScaler``: the activations unchanged forward; backward also
    starts the attached loss's own backward, with gradient 1 — a loss made inside a layer joins
    the objective without the stage returning it."""

    @staticmethod
    def forward(ctx, x, loss):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad, grad.new_ones(())


def route(x, router, top_k: int):
    """(chosen experts (n, k), gates (n, k), probabilities (n, E)) of softmax-then-top-k
    routing."""
    logits = x @ router
    probs = torch.softmax(logits, dim=-1)
    chosen = torch.sort(logits.detach(), dim=-1, descending=True, stable=True).indices[:, :top_k]
    return chosen, probs.gather(1, chosen), probs


def load_balancing_loss(probs, per_expert, cp, top_k: int, weight: float) -> torch.Tensor:
    """This rank's part of ``weight`` · E · Σᵢ fᵢ·Pᵢ over one micro-batch (Switch Transformer,
    Fedus et al. 2021, eq. 4–6, with GShard's and Megatron-LM's top-k counting; /moe's
    app.sim.moe.losses.aux_loss):

        T   the micro-batch's tokens — one sequence, seq/cp of it on each cp rank (every tp rank
            of a cp rank routes the same seq/cp tokens)
        fᵢ  assignments to expert i among the T·k, summed over the cp group: a count, so no
            gradient flows through it
        Pᵢ  the mean over the T tokens of softmax(logits)ᵢ over all E experts

    The cp ranks' parts add up to the micro-batch's loss: each sums Pᵢ over its own tokens
    (``probs`` (n, E), ``per_expert`` (E,) its counts), with fᵢ and T of the whole sequence —
    the one process's micro-batch is that same sequence. Under dp and ep nothing else is
    summed: another replica's tokens are another micro-batch."""
    counts = comm.all_reduce(per_expert, cp)                        # (E,) the micro-batch's
    tokens = probs.shape[0] * cp.size                               # T
    f = counts.to(probs.dtype) / (tokens * top_k)
    return weight * probs.shape[1] * (f * probs.sum(0)).sum() / tokens


def moe(x, weights, groups, top_k: int, sp: bool, aux_weight: float = 0.0):
    """The MoE MLP of one block; ``weights``: router (h, E) and this rank's experts
    w1, w3 (E/ep, h, f/tp), w2 (E/ep, f/tp, h). Returns (output, this rank's part of the
    load-balancing loss — :func:`load_balancing_loss` with weight ``aux_weight``, attached to the
    output — or None when ``aux_weight`` is 0)."""
    tp, ep = groups["tp"], groups["ep"]
    tokens = (x if tp.size == 1 or not sp else
              tensor.GatherTokens.apply(x, tp))                     # (n, h), same on every tp rank
    E = weights["router"].shape[1]
    local = weights["w1"].shape[0]
    chosen, gates, probs = route(tokens, weights["router"], top_k)  # 1
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
    out = tensor.leave(combined, tp, sp)
    if not aux_weight:
        return out, None
    aux = load_balancing_loss(probs, per_expert, groups["cp"], top_k, aux_weight)   # 7
    return AttachLoss.apply(out, aux), aux.detach()
