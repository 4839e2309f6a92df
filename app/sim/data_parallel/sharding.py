"""Sharding a model over data-parallel ranks, and the ring collectives on its gradients, with real
float64 numbers.

**Units and padding.** FSDP (``FlatParameter``) and DeepSpeed ZeRO flatten the tensors of each
wrapped unit (here: one layer) into one vector and cut it into ``dp`` equal shards. When the
length does not divide, the vector is padded with zeros at its end up to ``dp · ⌈numel / dp⌉``
(FSDP ``_get_shard`` / ``FlatParamHandle`` pads to a multiple of the world size; ZeRO-3 pads each
partition to ``⌈numel / dp⌉``). Rank r owns elements ``r·s … (r+1)·s − 1`` of the padded vector,
s = ⌈numel/dp⌉; the last ranks' shards may be partly or wholly padding, which every rank still
allocates, sends and receives.

**Ring order.** The collectives add the ranks' contributions in the order the ring of
:mod:`app.sim.collectives.schedules` does, so the numbers are bit for bit what executing those
schedules gives (the tests run both); they are computed here with one vector operation per ring
step instead of one ``Move`` per rank, so that 1024 ranks stay fast:

- reduce-scatter (``build("reduce_scatter", "ring", …)``): chunk c starts on rank c+1 and
  travels c+1 → c+2 → … → c, each rank adding its own contribution: g_{c+1} + g_{c+2} + … + g_c.
- all-reduce (``build("all_reduce", "ring", …)``, chunks cut as ``np.array_split``): chunk c
  starts on rank c; its sum is g_c + g_{c+1} + … + g_{c−1}; then an all-gather copies it around.
- reduce to a root (``build("reduce", "ring", …)``): a chain root+1 → root+2 → … → root.

Elements each rank sends come from the same schedules in closed form (tested against counting
their moves): a ring reduce-scatter or all-gather of dp shards of s sends (dp − 1)·s per rank;
a ring all-reduce of ``count`` elements sends 2·count − |chunk r+1| − |chunk r+2| from rank r.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

import numpy as np

from app.sim.collectives.schedules import chunk_bounds


@dataclass(frozen=True)
class Unit:
    """One flattened, padded unit (a layer) sharded over ``dp`` ranks."""

    index: int
    start: int                      # where the unit starts in the model's flat parameter vector
    numel: int                      # real parameters
    dp: int

    @property
    def shard(self) -> int:
        """Elements each rank owns, padding included: ⌈numel / dp⌉."""
        return ceil(self.numel / self.dp)

    @property
    def padded(self) -> int:
        return self.shard * self.dp

    @property
    def padding(self) -> int:
        return self.padded - self.numel

    def real_in_shard(self, rank):
        """How many of rank ``rank``'s shard elements are real parameters (not padding); ranks
        may be an array."""
        return np.clip(self.numel - np.asarray(rank) * self.shard, 0, self.shard)

    def pad(self, values: np.ndarray) -> np.ndarray:
        """(…, numel) → (…, padded) with zeros at the end."""
        out = np.zeros(values.shape[:-1] + (self.padded,), dtype=values.dtype)
        out[..., :self.numel] = values
        return out


def units(sizes: tuple[int, ...], dp: int) -> tuple[Unit, ...]:
    """Units of ``sizes`` consecutive elements each, sharded over ``dp`` ranks."""
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    return tuple(Unit(i, int(start), int(size), dp) for i, (start, size) in
                 enumerate(zip(starts, sizes)))


def rotated_sum(contribs: np.ndarray, first_rank: np.ndarray) -> np.ndarray:
    """contribs (dp, E) → (E,): element e summed over the ranks in ring order, starting at rank
    ``first_rank[e]``: ((g_f + g_{f+1}) + g_{f+2}) + …, every element at once."""
    dp, count = contribs.shape
    order = (first_rank[None, :] + np.arange(dp)[:, None]) % dp            # (dp, E)
    rotated = np.take_along_axis(contribs, order, axis=0)                 # row k: the k-th adder
    acc = rotated[0].copy()
    for k in range(1, dp):
        acc = rotated[k] + acc
    return acc


def ring_reduce_scatter(contribs: np.ndarray) -> np.ndarray:
    """contribs (dp, dp·s) → (dp, s): rank r's shard r of the sum, added in ring order
    g_{r+1} + g_{r+2} + … + g_r (``build("reduce_scatter", "ring", dp, dp·s)``)."""
    dp, count = contribs.shape
    chunk = np.arange(count) // (count // dp)
    return rotated_sum(contribs, (chunk + 1) % dp).reshape(dp, -1)


def ring_all_reduce(contribs: np.ndarray) -> np.ndarray:
    """contribs (dp, count) → (count,): the sum every rank holds after
    ``build("all_reduce", "ring", dp, count)`` (chunk c: g_c + g_{c+1} + … + g_{c−1})."""
    dp, count = contribs.shape
    chunk = np.searchsorted(chunk_bounds(count, dp), np.arange(count), side="right") - 1
    return rotated_sum(contribs, chunk)


def chain_reduce(contribs: np.ndarray, root: int = 0) -> np.ndarray:
    """contribs (dp, count) → the root's sum after ``build("reduce", "ring", dp, count, root)``:
    g_{root+1} + g_{root+2} + … + g_root."""
    dp, count = contribs.shape
    return rotated_sum(contribs, np.full(count, (root + 1) % dp))


# --- elements each rank sends (per rank, closed forms of the ring schedules) -----------------

def sharded_sends(unit: Unit) -> int:
    """A ring reduce-scatter or all-gather of ``unit``: (dp − 1) shards from every rank."""
    return (unit.dp - 1) * unit.shard


def all_reduce_sends(count: int, dp: int) -> np.ndarray:
    """Elements rank r sends in a ring all-reduce of ``count``: every chunk but r+1 in the
    reduce-scatter half, every chunk but r+2 in the all-gather half."""
    if dp == 1:
        return np.zeros(1, dtype=np.int64)
    sizes = np.diff(chunk_bounds(count, dp))
    rank = np.arange(dp)
    return 2 * count - sizes[(rank + 1) % dp] - sizes[(rank + 2) % dp]


def chain_sends(count: int, dp: int, root: int, towards_root: bool) -> np.ndarray:
    """Elements each rank sends in a pipelined chain broadcast from (or reduce to) ``root``:
    every rank but the chain's last sends the whole tensor once."""
    sends = np.full(dp, count, dtype=np.int64)
    last = root if towards_root else (root - 1) % dp
    sends[last] = 0
    return sends
