"""How DistributedDataParallel groups gradients into buckets (PyTorch
``torch/nn/parallel/distributed.py`` and ``torch/csrc/distributed/c10d/reducer.cpp``).

DDP all-reduces gradients bucket by bucket, so communication can start while backward is still
running: a bucket's all-reduce is launched as soon as the last gradient in it is ready.

- **Filling** (``compute_bucket_assignment_by_size``): tensors are taken in order and added to
  the current bucket; once the bucket holds at least its size limit it is closed — the tensor
  that crossed the limit stays in it, so a bucket may end up larger than the cap, and a tensor
  is never split. The first bucket may have its own limit: 1 MiB when ``bucket_cap_mb`` is left
  at its default of 25 MiB, the cap itself when the user sets one.
- **First iteration**: DDP cannot know in which order gradients will arrive, so it starts with
  a single bucket holding every parameter (in ``model.parameters()`` order).
- **Rebuild**: during the first backward the reducer records the order in which gradients
  became ready, and from the second iteration on buckets are rebuilt in that order with the
  limits above. For a stack of layers that is the forward order reversed; inside an
  ``nn.Linear`` the bias's gradient arrives before the weight's (observed on torch 2.13).

Bytes per element are those of the gradients (fp32 unless the model itself is 16-bit).
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024
DEFAULT_CAP_MB = 25          # torch's _DEFAULT_BUCKET_CAP_MB
FIRST_BUCKET_BYTES = MIB     # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES


@dataclass(frozen=True)
class Bucket:
    index: int
    tensors: tuple[int, ...]     # indices into the model's parameter list, in bucket order
    elements: int
    bytes: int
    limit_bytes: int


def cap_bytes(bucket_mb: float) -> int:
    """``int(bucket_cap_mb · 2²⁰)``, as DDP converts it."""
    return int(bucket_mb * MIB)


def assign(sizes_bytes: list[int] | tuple[int, ...], order: list[int] | tuple[int, ...],
           limits: tuple[int, ...]) -> list[list[int]]:
    """Buckets of tensor indices: tensors taken in ``order``; a bucket closes once its bytes
    reach its limit; the first bucket uses ``limits[0]``, later ones the next limit, the last
    limit repeating."""
    buckets, current, size, which = [], [], 0, 0
    for t in order:
        current.append(t)
        size += sizes_bytes[t]
        if size >= limits[which]:
            buckets.append(current)
            current, size = [], 0
            which = min(which + 1, len(limits) - 1)
    if current:
        buckets.append(current)
    return buckets


def ready_order(names: list[str] | tuple[str, ...]) -> list[int]:
    """The order gradients become ready in backward: parameters in reverse, which puts each
    module's bias before its weight."""
    return list(range(len(names) - 1, -1, -1))


def buckets(sizes_elements: tuple[int, ...], element_bytes: int, bucket_mb: float | None,
            first_iteration: bool = False) -> tuple[Bucket, ...]:
    """DDP's buckets for parameters of ``sizes_elements`` (in ``model.parameters()`` order).
    ``bucket_mb`` None: DDP's default (25 MiB, first bucket 1 MiB)."""
    sizes = [n * element_bytes for n in sizes_elements]
    cap = cap_bytes(DEFAULT_CAP_MB if bucket_mb is None else bucket_mb)
    first = FIRST_BUCKET_BYTES if bucket_mb is None else cap
    if first_iteration:
        groups = [list(range(len(sizes)))]
        limits = (sum(sizes),)
    else:
        limits = (first, cap) if first < cap else (cap,)
        groups = assign(sizes, ready_order([""] * len(sizes)), limits)
    out = []
    for k, group in enumerate(groups):
        limit = limits[min(k, len(limits) - 1)]
        elements = sum(sizes_elements[t] for t in group)
        out.append(Bucket(k, tuple(group), elements, elements * element_bytes, limit))
    return tuple(out)
