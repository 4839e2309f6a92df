"""Tensor parallelism (Megatron-LM; Shoeybi et al. 2019, §3; Korthikanti et al. 2022, §4.2.2 for
sequence parallelism): the communication operators as autograd functions, the vocab-parallel
embedding and the vocab-parallel cross-entropy.

A column-parallel linear keeps out/tp output columns and needs the whole input; a row-parallel
linear keeps in/tp input rows and gives a partial sum. An attention or MLP block is one of each,
so it communicates twice, once entering and once leaving:

    without SP   enter f: identity forward, all-reduce of the input's gradient backward
                 leave g: all-reduce forward, identity backward
    with SP      enter:   all-gather the seq/tp token shards forward, reduce-scatter backward
                 leave:   reduce-scatter into token shards forward, all-gather backward

(same bytes: an all-reduce is a reduce-scatter plus an all-gather). Between blocks, SP keeps
every norm and residual on seq/tp tokens. The router of an MoE layer reads the tokens with
:class:`GatherTokens` (all-gather forward, own shard backward: its gradient is whole on every
rank already).

The vocab-parallel loss never gathers the logits: three all-reduces of one number per token —
the row maximum, the target's logit and the sum of exponentials (Megatron-LM's
``_VocabParallelCrossEntropy``).
"""

from __future__ import annotations

import torch

from workers.train import comm


class CopyToTP(torch.autograd.Function):
    """f: identity forward, all-reduce backward (the input's gradient is partial per rank)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return comm.all_reduce(grad, ctx.group), None


class ReduceFromTP(torch.autograd.Function):
    """g: all-reduce forward (sum the partial outputs), identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        return comm.all_reduce(x, group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class GatherSeq(torch.autograd.Function):
    """SP's entry: all-gather the token shards, reduce-scatter the gradient back."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return comm.all_gather(x, 0, group)

    @staticmethod
    def backward(ctx, grad):
        return comm.reduce_scatter(grad, 0, ctx.group), None


class ScatterSeq(torch.autograd.Function):
    """SP's exit: reduce-scatter the partial outputs into token shards, all-gather backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return comm.reduce_scatter(x, 0, group)

    @staticmethod
    def backward(ctx, grad):
        return comm.all_gather(grad, 0, ctx.group), None


class GatherTokens(torch.autograd.Function):
    """All-gather the token shards; backward keeps this rank's rows of a gradient that every
    rank holds whole (the MoE router's input under SP)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group, ctx.rows = group, x.shape[0]
        return comm.all_gather(x, 0, group)

    @staticmethod
    def backward(ctx, grad):
        index = ctx.group.index(torch.distributed.get_rank()) if ctx.group.size > 1 else 0
        return grad[index * ctx.rows:(index + 1) * ctx.rows], None


def enter(x: torch.Tensor, group, sp: bool) -> torch.Tensor:
    """Into a tensor-parallel block: the whole (gathered) input, with the right backward."""
    if group.size == 1:
        return x
    return GatherSeq.apply(x, group) if sp else CopyToTP.apply(x, group)


def leave(x: torch.Tensor, group, sp: bool) -> torch.Tensor:
    """Out of a tensor-parallel block: the partial sums reduced (and, with SP, scattered)."""
    if group.size == 1:
        return x
    return ScatterSeq.apply(x, group) if sp else ReduceFromTP.apply(x, group)


def copy_to(x: torch.Tensor, group) -> torch.Tensor:
    return x if group.size == 1 else CopyToTP.apply(x, group)


def vocab_embedding(ids: torch.Tensor, table: torch.Tensor, vocab_start: int, group,
                    sp: bool) -> torch.Tensor:
    """Look up ``ids`` in this rank's rows [vocab_start, vocab_start + V/tp) of the embedding;
    others contribute zeros, and the sum over tp (g, or SP's reduce-scatter) completes every
    row."""
    rows = table.shape[0]
    outside = (ids < vocab_start) | (ids >= vocab_start + rows)
    local = (ids - vocab_start).clamp(0, rows - 1)
    partial = torch.nn.functional.embedding(local, table) * (~outside)[:, None]
    return leave(partial, group, sp)


class VocabParallelCrossEntropy(torch.autograd.Function):
    """Per-token loss from this rank's V/tp logit columns: log Σ exp − target logit."""

    @staticmethod
    def forward(ctx, logits, targets, vocab_start, group):
        n, per = logits.shape
        row_max = comm.all_reduce(logits.max(dim=1).values, group, op="max")
        shifted = logits - row_max[:, None]
        mine = (targets >= vocab_start) & (targets < vocab_start + per)
        local = (targets - vocab_start).clamp(0, per - 1)
        target = torch.where(mine, shifted[torch.arange(n), local], 0.0)
        target = comm.all_reduce(target, group)
        exp = shifted.exp()
        sum_exp = comm.all_reduce(exp.sum(dim=1), group)
        ctx.save_for_backward(exp / sum_exp[:, None], mine, local)
        return sum_exp.log() - target

    @staticmethod
    def backward(ctx, grad):
        softmax, mine, local = ctx.saved_tensors
        d = softmax.clone()
        rows = torch.nonzero(mine).flatten()
        d[rows, local[rows]] -= 1.0
        return d * grad[:, None], None, None, None
