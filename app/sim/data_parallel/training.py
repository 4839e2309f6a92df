"""Training the tiny model on ``dp`` simulated ranks under each data-parallel algorithm.

Every rank computes the gradient of its own micro-batch (:mod:`app.sim.tiny_mlp`), divides it by
dp (DDP divides before it sums, so the sum is the mean), and the algorithm decides how the ranks
combine gradients and who updates what:

- ``dp``    torch.nn.DataParallel: device 0 scatters the inputs, replicates the parameters (a
            pipelined chain broadcast), gathers the outputs, scatters their gradients back and
            reduces the parameter gradients to itself (a chain reduce); only device 0 runs Adam.
- ``ddp``   DistributedDataParallel: each bucket of gradients is ring-all-reduced; every rank
            runs Adam on every parameter. ``buckets`` lists each step's buckets (tensor indices).
- ``zero0`` DDP as the ZeRO paper counts it: each layer's gradients all-reduced as the ring's two
            halves, reduce-scatter then all-gather, on the padded layer units of ZeRO-1/2/3.
- ``zero1``, ``zero2`` reduce-scatter each layer's gradients, each rank runs Adam on its shard,
            all-gather the updated parameters (ZeRO-2 frees gradients it does not own as it goes;
            the numbers are the same).
- ``zero3`` parameters are sharded too: all-gather each layer before its forward and again
            before its backward, reduce-scatter its gradients, Adam on the shard, no all-gather
            after the step (Rajbhandari et al. 2019, §5 and §7: 3Ψ instead of 2Ψ).

``zero0`` … ``zero3`` add every gradient in the same ring order on the same units, and Adam is
elementwise, so their parameters agree bit for bit after any number of steps; ``dp`` and ``ddp``
add in other orders and agree to ~1e-16. Element counts sent per rank come from the ring
schedules (:mod:`app.sim.data_parallel.sharding`), padding included.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sim.data_parallel import sharding
from app.sim.tiny_mlp import TinyMLP, adam_init, adam_update, batch, forward_backward, init_params

ALGORITHMS = ("dp", "ddp", "zero0", "zero1", "zero2", "zero3")
MAX_SAMPLES = 4096
"""dp × micro_batch: the tiny model's global batch per step."""
MAX_WORK = 1_000_000
"""dp × tiny parameters × steps: the per-rank gradients a training run adds up in ring order."""


def too_much(model: TinyMLP, dp: int, micro_batch: int, steps: int) -> tuple[str, str] | None:
    """(parameter, message) when a run would exceed the bounds above, else None."""
    samples = dp * micro_batch
    if samples > MAX_SAMPLES:
        return ("micro_batch", f"dp ({dp}) × micro_batch ({micro_batch}) = {samples:,} samples "
                               f"per step is too many for the simulation (at most "
                               f"{MAX_SAMPLES:,}): use micro_batch ≤ {max(1, MAX_SAMPLES // dp)}")
    work = dp * model.param_count * steps
    if work > MAX_WORK:
        return ("dp", f"dp ({dp}) × tiny parameters ({model.param_count}) × steps ({steps}) = "
                      f"{work:,} gradients to add up is too many (at most {MAX_WORK:,}): use "
                      f"fewer ranks, steps or a smaller MLP")
    return None


@dataclass(frozen=True)
class LastStep:
    """The numbers of the last training step, for drawing it (flat, forward order)."""

    params_before: np.ndarray       # (P,)
    local_grads: np.ndarray         # (dp, P): each rank's gradient, already divided by dp
    mean_grad: np.ndarray           # (P,): what the reduction leaves (the sum of local_grads)
    m_before: np.ndarray            # (P,): Adam's first moment before the step
    m_after: np.ndarray
    params_after: np.ndarray        # (P,)
    losses: np.ndarray              # (dp,)
    outputs: np.ndarray             # (dp, b, width): each rank's forward output


@dataclass(frozen=True)
class Training:
    algorithm: str
    final_params: np.ndarray        # (P,)
    losses: np.ndarray              # (steps, dp)
    sent: np.ndarray                # (steps, dp): elements each rank sent in each step
    last: LastStep
    units: tuple[sharding.Unit, ...]


def train(model: TinyMLP, algorithm: str, dp: int, micro_batch: int, steps: int, seed: int,
          buckets: tuple[tuple[tuple[int, ...], ...], ...] = ()) -> Training:
    """Train for ``steps`` steps. ``buckets[k]``: step k's DDP buckets (tensor indices), only
    for ``ddp``."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    units = sharding.units((model.unit_size,) * model.layers, dp)
    first_rank = _ring_start(units)
    params = init_params(model, seed)
    state = adam_init(model.param_count)
    losses = np.zeros((steps, dp))
    sent = np.zeros((steps, dp), dtype=np.int64)
    last = None
    for k in range(steps):
        x, y = batch(model, seed, k, dp, micro_batch)
        loss, grads = forward_backward(model, params, x, y)
        local = grads / dp                                        # (dp, P)
        if algorithm == "dp":
            mean = sharding.chain_reduce(local, root=0)
        elif algorithm == "ddp":
            mean = _bucketed_all_reduce(model, local, buckets[k])
        else:
            mean = sharding.rotated_sum(local, first_rank)
        new_params, new_state = adam_update(params, mean, state)
        sent[k] = _sent(algorithm, model, units, dp, micro_batch, buckets[k] if buckets else ())
        losses[k] = loss
        if k == steps - 1:
            outputs = _outputs(model, params, x)
            last = LastStep(params, local, mean, state.m, new_state.m, new_params, loss, outputs)
        params, state = new_params, new_state
    return Training(algorithm, params, losses, sent, last, units)


def _ring_start(units: tuple[sharding.Unit, ...]) -> np.ndarray:
    """For every parameter, the rank where its ring reduce-scatter starts: element e of a unit
    lies in shard e // s, whose sum starts on the next rank (``sharding.ring_reduce_scatter``).
    The padding's sums are zeros and never touch a real element, so only real ones are added;
    the all-gather that follows (or ZeRO-3's next gathers) puts the shards side by side."""
    return np.concatenate([(np.arange(u.numel) // u.shard + 1) % u.dp for u in units])


def _bucketed_all_reduce(model: TinyMLP, local: np.ndarray,
                         buckets: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """DDP: each bucket is a flat buffer of its tensors (in bucket order), ring-all-reduced."""
    bounds = np.concatenate([[0], np.cumsum(model.tensor_sizes())])
    mean = np.empty(model.param_count)
    for bucket in buckets:
        spans = [(int(bounds[t]), int(bounds[t + 1])) for t in bucket]
        flat = np.concatenate([local[:, lo:hi] for lo, hi in spans], axis=1)   # (dp, numel)
        reduced = sharding.ring_all_reduce(flat)
        offset = 0
        for lo, hi in spans:
            mean[lo:hi] = reduced[offset:offset + hi - lo]
            offset += hi - lo
    return mean


def _outputs(model: TinyMLP, params: np.ndarray, x: np.ndarray) -> np.ndarray:
    from app.sim.tiny_mlp import unflatten
    h = x
    for l, (weight, bias) in enumerate(unflatten(model, params)):
        h = h @ weight.T + bias
        if l < model.layers - 1:
            h = np.tanh(h)
    return h


def sent_per_step(algorithm: str, model: TinyMLP, dp: int, micro_batch: int,
                  buckets: tuple[tuple[int, ...], ...] = ()) -> np.ndarray:
    """Elements each rank sends in one step of ``algorithm`` (dp,)."""
    return _sent(algorithm, model, sharding.units((model.unit_size,) * model.layers, dp), dp,
                 micro_batch, buckets)


def _sent(algorithm, model, units, dp, micro_batch, buckets) -> np.ndarray:
    if dp == 1:
        return np.zeros(1, dtype=np.int64)
    sharded = sum(sharding.sharded_sends(u) for u in units)    # one RS or AG of every layer
    if algorithm in ("zero0", "zero1", "zero2"):
        return np.full(dp, 2 * sharded, dtype=np.int64)
    if algorithm == "zero3":
        return np.full(dp, 3 * sharded, dtype=np.int64)
    if algorithm == "ddp":
        sizes = model.tensor_sizes()
        return sum((sharding.all_reduce_sends(sum(sizes[t] for t in b), dp) for b in buckets),
                   np.zeros(dp, dtype=np.int64))
    # dp: inputs and output gradients scattered from device 0, outputs gathered to it,
    # parameters broadcast down a chain and gradients reduced up it
    activations = micro_batch * model.width
    sends = (sharding.chain_sends(model.param_count, dp, 0, towards_root=False)
             + sharding.chain_sends(model.param_count, dp, 0, towards_root=True))
    sends[0] += 2 * (dp - 1) * activations
    sends[1:] += activations
    return sends
