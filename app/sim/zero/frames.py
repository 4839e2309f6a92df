"""One training step of the tiny model under ZeRO stage 0–3, as a sequence of ownership grids.

For every drawn rank and three rows — fp16 parameters, gradients, optimizer state (Adam's first
moment m stands for all three fp32 states) — each element of the padded layer units is in one
state: not held, held and current, held but stale (outdated or no longer needed), a local
gradient not yet reduced, or padding. Each phase of the step changes some of them:

    stage 0 (DDP)   forward · per layer: backward, all-reduce · Adam everywhere
    stage 1         forward · per layer: backward · reduce-scatter · Adam on the own shard ·
                    all-gather parameters
    stage 2         forward · per layer: backward, reduce-scatter (others freed) · Adam on the
                    own shard · all-gather parameters
    stage 3         per layer: all-gather, forward, free · per layer: all-gather, backward,
                    reduce-scatter, free · Adam on the own shard

The values are the numbers of the simulated training step (:mod:`app.sim.data_parallel.training`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sim.data_parallel.training import LastStep
from app.sim.data_parallel.sharding import Unit

EMPTY, CURRENT, STALE, LOCAL, PAD = 0, 1, 2, 3, 4
ROWS = ("params", "grads", "optimizer")


@dataclass(frozen=True)
class Column:
    unit: int
    owner: int            # the rank whose shard this element is in
    offset: int           # element index inside the padded unit
    flat: int             # index into the flat parameter vector, −1 for padding


@dataclass(frozen=True)
class Phase:
    step: int
    phase: str            # forward | backward | all_reduce | reduce_scatter | optimizer | all_gather
    unit: int             # the layer it concerns, −1 for all
    sent: int             # elements each rank sends in this phase (ring collectives)
    note: str             # what every rank does, in words


@dataclass(frozen=True)
class Grids:
    ranks: tuple[int, ...]            # the drawn ranks
    columns: tuple[Column, ...]
    status: np.ndarray                # (frames, 3, drawn ranks, columns) int8
    values: np.ndarray                # (frames, 3, drawn ranks, columns) float64
    phases: tuple[Phase, ...]         # one per frame, frame 0 the start


def drawn_ranks(dp: int, most: int = 8) -> tuple[int, ...]:
    """Every rank up to ``most``; beyond, the first ``most − 1`` and the last (which holds the
    padding)."""
    return tuple(range(dp)) if dp <= most else tuple(range(most - 1)) + (dp - 1,)


def columns(units: tuple[Unit, ...], ranks: tuple[int, ...]) -> tuple[Column, ...]:
    """The elements of the drawn ranks' shards, unit by unit, in shard order."""
    out = []
    for u in units:
        for owner in ranks:
            for k in range(u.shard):
                offset = owner * u.shard + k
                out.append(Column(u.index, owner, offset,
                                  u.start + offset if offset < u.numel else -1))
    return tuple(out)


def build(stage: int, units: tuple[Unit, ...], last: LastStep, dp: int) -> Grids:
    ranks = drawn_ranks(dp)
    cols = columns(units, ranks)
    flat = np.array([c.flat for c in cols])
    real = flat >= 0
    unit_of = np.array([c.unit for c in cols])
    own = np.array([[c.owner == r for c in cols] for r in ranks])           # (R, C)
    n_rows, n_ranks, n_cols = len(ROWS), len(ranks), len(cols)

    def pick(vector):                     # flat values → columns (0 for padding)
        return np.where(real, vector[np.maximum(flat, 0)], 0.0)

    status = np.zeros((n_rows, n_ranks, n_cols), dtype=np.int8)
    values = np.zeros((n_rows, n_ranks, n_cols))
    frames_status, frames_values, phases = [], [], []

    def held(mask, state, row=0):
        """``state`` where mask and real, PAD where mask and padding. DDP (stage 0) pads only
        its gradient buffers, which it reduces in equal chunks; ZeRO pads every flat buffer."""
        padded = stage >= 1 or row == 1
        return np.where(mask, np.where(real, state, PAD if padded else EMPTY), EMPTY)

    def snap(phase: str, unit: int, sent: int, note: str):
        frames_status.append(status.copy())
        frames_values.append(values.copy())
        phases.append(Phase(len(phases), phase, unit, sent, note))

    everyone = np.ones((n_ranks, n_cols), dtype=bool)
    shard_sends = {u.index: (u.dp - 1) * u.shard for u in units}
    total_sends = sum(shard_sends.values())
    # 0. start: parameters after the previous steps, optimizer states as they were
    status[0] = held(everyone if stage < 3 else own, CURRENT)
    values[0] = pick(last.params_before)
    status[2] = held(everyone if stage == 0 else own, CURRENT)
    values[2] = pick(last.m_before)
    snap("start", -1, 0, "before the step")

    def gather(unit, mask_rows=(0,)):
        for row in mask_rows:
            status[row][:, unit_of == unit] = held(everyone, CURRENT)[:, unit_of == unit]

    def free_others(unit, row):
        cols_u = unit_of == unit
        status[row][:, cols_u] = np.where(own[:, cols_u], status[row][:, cols_u], EMPTY)

    # 1. forward
    if stage < 3:
        snap("forward", -1, 0, "forward on its own micro-batch")
    else:
        for u in units:
            if u.index > 0:
                free_others(u.index - 1, 0)
            gather(u.index)
            snap("all_gather", u.index, shard_sends[u.index],
                 f"all-gather layer {u.index}, run its forward, then free it")
    # 2. backward, layer by layer from the last
    local = np.array([pick(last.local_grads[r]) for r in ranks])           # (R, C)
    mean = pick(last.mean_grad)
    for u in reversed(units):
        cols_u = unit_of == u.index
        if stage == 3:
            gather(u.index)   # the last layer was freed after its forward too: gathered again
        status[1][:, cols_u] = held(everyone, LOCAL, 1)[:, cols_u]
        values[1][:, cols_u] = local[:, cols_u]
        snap("backward", u.index, shard_sends[u.index] if stage == 3 else 0,
             (f"all-gather layer {u.index} again, " if stage == 3 else "")
             + f"backward of layer {u.index}: its gradient for its own micro-batch")
        if stage == 0:
            status[1][:, cols_u] = held(everyone, CURRENT, 1)[:, cols_u]
            values[1][:, cols_u] = np.broadcast_to(mean, local.shape)[:, cols_u]
            snap("all_reduce", u.index, 2 * shard_sends[u.index],
                 f"all-reduce layer {u.index}'s gradients: every rank gets the mean")
        elif stage >= 2:
            status[1][:, cols_u] = held(own, CURRENT, 1)[:, cols_u]
            values[1][:, cols_u] = np.where(own, mean, 0.0)[:, cols_u]
            if stage == 3:
                free_others(u.index, 0)
            snap("reduce_scatter", u.index, shard_sends[u.index],
                 f"reduce-scatter layer {u.index}'s gradients: each rank keeps the mean of its "
                 f"shard and frees the rest" + (", and the layer's gathered parameters"
                                                 if stage == 3 else ""))
    if stage == 1:
        status[1] = np.where(own, held(everyone, CURRENT, 1),
                             np.where(status[1] == LOCAL, STALE, status[1]))
        values[1] = np.where(own, mean, values[1])
        snap("reduce_scatter", -1, total_sends,
             "reduce-scatter every gradient: each rank gets the mean of its shard; the rest "
             "of its gradient buffer is no longer needed")
    # 3. optimizer
    new_params, new_m = pick(last.params_after), pick(last.m_after)
    mine = everyone if stage == 0 else own
    values[0] = np.where(mine, new_params, values[0])
    values[2] = np.where(mine, new_m, values[2])
    if stage in (1, 2):
        status[0] = np.where(mine, status[0], np.where(real, STALE, PAD))
    snap("optimizer", -1, 0, "Adam on every parameter" if stage == 0 else
         "Adam on its own shard (momentum, variance and the fp32 master copy live there)")
    # 4. share the updated parameters
    if stage in (1, 2):
        status[0] = held(everyone, CURRENT)
        values[0] = np.broadcast_to(new_params, values[0].shape).copy()
        snap("all_gather", -1, total_sends, "all-gather the updated parameters")
    return Grids(ranks, cols, np.stack(frames_status), np.stack(frames_values), tuple(phases))
