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

The operators themselves (:class:`workers.tp_ops.Conjugate`, a forward and its conjugate
backward, and the vocab-parallel cross-entropy) are written once in workers/tp_ops.py, shared
with /tensor-parallel's worker; here they run over the tp group through comm.py.
"""

from __future__ import annotations

from functools import partial

import torch

from workers.tp_ops import Conjugate, VocabParallelCrossEntropy, same
from workers.train import comm


def _all_reduce(group):
    return partial(comm.all_reduce, group=group)


def _all_gather(group):
    return partial(comm.all_gather, dim=0, group=group)


def _reduce_scatter(group):
    return partial(comm.reduce_scatter, dim=0, group=group)


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
    """Into a tensor-parallel block: the whole (gathered) input, with the right backward —
    f (identity, all-reduce backward), or with SP the all-gather (reduce-scatter backward)."""
    if group.size == 1:
        return x
    if sp:
        return Conjugate.apply(x, _all_gather(group), _reduce_scatter(group))
    return Conjugate.apply(x, same, _all_reduce(group))


def leave(x: torch.Tensor, group, sp: bool) -> torch.Tensor:
    """Out of a tensor-parallel block: the partial sums reduced — g (all-reduce, identity
    backward), or with SP reduce-scattered into token shards (all-gather backward)."""
    if group.size == 1:
        return x
    if sp:
        return Conjugate.apply(x, _reduce_scatter(group), _all_gather(group))
    return Conjugate.apply(x, _all_reduce(group), same)


def copy_to(x: torch.Tensor, group) -> torch.Tensor:
    """f alone: identity forward, all-reduce of the (partial) gradient backward."""
    return x if group.size == 1 else Conjugate.apply(x, same, _all_reduce(group))


def vocab_embedding(ids: torch.Tensor, table: torch.Tensor, vocab_start: int, group,
                    sp: bool) -> torch.Tensor:
    """Look up ``ids`` in this rank's rows [vocab_start, vocab_start + V/tp) of the embedding;
    others contribute zeros, and the sum over tp (g, or SP's reduce-scatter) completes every
    row."""
    rows = table.shape[0]
    outside = (ids < vocab_start) | (ids >= vocab_start + rows)
    local = (ids - vocab_start).clamp(0, rows - 1)
    looked_up = torch.nn.functional.embedding(local, table) * (~outside)[:, None]
    return leave(looked_up, group, sp)


def vocab_parallel_loss(logits: torch.Tensor, targets: torch.Tensor, vocab_start: int,
                        group) -> torch.Tensor:
    """Per-token cross-entropy from this rank's V/tp logit columns, reduced over ``group``."""
    return VocabParallelCrossEntropy.apply(
        logits, targets, vocab_start, lambda x, op: comm.all_reduce(x, group, op=op))
