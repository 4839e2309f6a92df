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
  limits above (:func:`ready_order`). Measured on torch 2.13 with
  ``register_post_accumulate_grad_hook`` over a real backward of nanoGPT- and torchtitan-style
  models laid out like the presets (tests/workers/test_ddp_buckets.py, which also cuts them
  with torch's own ``dist._compute_bucket_assignment_by_size``): modules in reverse, and
  inside an ``nn.Linear`` the bias before the weight (addmm's bias gradient needs no
  transpose) — but inside a ``LayerNorm`` the weight before the bias (its backward returns
  both at once, and they are accumulated in argument order). A tied embedding (GPT's wte, also
  the output head) is ready last, once its second use has been differentiated.

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


def cap_mb_of(bucket_mb: float, explicit_cap: bool) -> float | None:
    """DDP's ``bucket_cap_mb`` for the scene's bucket size: None (left unset — ``DDP(model)``
    as is, a 1 MiB first bucket then 25 MiB) at 25 MiB unless ``explicit_cap`` says it is
    passed; any other size is passed, and then every bucket, the first too, is up to it."""
    return None if bucket_mb == DEFAULT_CAP_MB and not explicit_cap else bucket_mb


def cap_mb(p) -> float | None:
    """A scene's params' ``bucket_cap_mb`` (:func:`cap_mb_of`)."""
    return cap_mb_of(p.bucket_mb, getattr(p, "explicit_cap", False))


def describe(bucket_cap_mb: float | None) -> str:
    """Which buckets are drawn, in words."""
    if bucket_cap_mb is None:
        return ("DDP's default (bucket_cap_mb unset): a first bucket of 1 MiB, then 25 MiB")
    return f"bucket_cap_mb={bucket_cap_mb:g}: every bucket, the first too, up to {bucket_cap_mb:g} MiB"


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


def is_layer_norm(module: str) -> bool:
    """Whether a parameter's module (its name without the last part) is a LayerNorm, by the
    names of app.catalog.models (GPT's ``ln_1``, ``ln_2``, ``ln_f``)."""
    return module.rpartition(".")[2].startswith("ln_")


def ready_order(names: list[str] | tuple[str, ...]) -> list[int]:
    """The order gradients become ready in backward (indices into ``names``, which are in
    ``model.parameters()`` order): modules in reverse; each module's parameters in reverse
    (a Linear's bias before its weight) except a LayerNorm's, weight then bias."""
    out, t = [], len(names) - 1
    while t >= 0:
        module = names[t].rpartition(".")[0]
        first = t
        while first > 0 and names[first - 1].rpartition(".")[0] == module and module:
            first -= 1
        members = list(range(first, t + 1))
        out += members if module and is_layer_norm(module) else members[::-1]
        t = first - 1
    return out


def buckets(sizes_elements: tuple[int, ...], element_bytes: int, bucket_mb: float | None,
            first_iteration: bool = False,
            names: tuple[str, ...] | None = None) -> tuple[Bucket, ...]:
    """DDP's buckets for parameters of ``sizes_elements`` (in ``model.parameters()`` order),
    named ``names`` (their gradient-ready order follows from the names: :func:`ready_order`;
    None: plain reverse, as for a stack of Linears). ``bucket_mb`` None: DDP's default (25 MiB,
    first bucket 1 MiB)."""
    sizes = [n * element_bytes for n in sizes_elements]
    cap = cap_bytes(DEFAULT_CAP_MB if bucket_mb is None else bucket_mb)
    first = FIRST_BUCKET_BYTES if bucket_mb is None else cap
    if first_iteration:
        groups = [list(range(len(sizes)))]
        limits = (sum(sizes),)
    else:
        limits = (first, cap) if first < cap else (cap,)
        order = ready_order(names) if names is not None else list(range(len(sizes) - 1, -1, -1))
        groups = assign(sizes, order, limits)
    out = []
    for k, group in enumerate(groups):
        limit = limits[min(k, len(limits) - 1)]
        elements = sum(sizes_elements[t] for t in group)
        out.append(Bucket(k, tuple(group), elements, elements * element_bytes, limit))
    return tuple(out)
