"""Data parallelism: bucketed gradient reduction overlapped with the last backward (PyTorch DDP;
Li et al. 2020), and ZeRO-1 — the optimizer states sharded (Rajbhandari et al. 2019, P_os;
Megatron-LM's distributed optimizer, which shards per bucket).

Replicas of a tensor: a dense one is held alike by the dp·cp ranks of its (tp, pp) position
(context-parallel ranks hold the same weights and see different tokens, so their gradients are
summed too: Megatron's data-parallel group with cp); an expert one by the dp·cp/ep ranks of its
expert-data-parallel group (edp). Their gradients are summed — the loss is already scaled by one
over the global batch's tokens.

Buckets: a stage's tensors in reverse order (the order backward produces their gradients),
cut into buckets of at most BUCKET_ELEMENTS (app.sim.train.model.buckets, which the cost model
reduces too), dense and expert apart. During the last
micro-batch's backward a hook copies each finished gradient into its bucket; the bucket that
fills is reduced at once, in the background (comm.async_reduce), while backward goes on:

    ZeRO 0   all-reduce the bucket: every replica holds the summed gradient and updates the
             whole bucket (its own AdamW states for all of it)
    ZeRO 1   reduce-scatter the bucket (padded to a multiple of the group): each replica gets
             the sum of its 1/n slice, keeps AdamW states for that slice only, updates it, and
             the updated slices are all-gathered back into every replica's parameters

Same bytes either way: all-reduce = reduce-scatter + all-gather (ZeRO §7).

Under sequence parallelism every tp rank ran the norms on its own seq/tp tokens, so a norm's
gradient is a partial sum: the hook all-reduces it over tp first (Megatron-LM's
``finalize_model_grads`` for tensors marked sequence-parallel; the tensor-parallel worker,
workers/tensor_parallel.py, does the same).
"""

from __future__ import annotations

import time

import torch

from app.sim.train.model import buckets as bucket_tensors
from workers.train import comm


class Bucket:
    def __init__(self, names: list[str], model, group, zero: int):
        self.names, self.group, self.zero = names, group, zero
        params = [model.params[n] for n in names]
        self.params = params
        self.offsets, total = [], 0
        for p in params:
            self.offsets.append(total)
            total += p.numel()
        self.numel = total
        n = group.size
        self.padded = -(-total // n) * n
        self.shard = self.padded // n
        index = group.index(model.groups.rank) if n > 1 else 0
        self.lo = index * self.shard if zero else 0
        self.hi = self.lo + self.shard if zero else total
        dtype = params[0].dtype
        self.flat_grad = torch.zeros(self.padded, dtype=dtype)
        self.ready = 0
        self.work = None
        self.grad = None
        """after the reduction: the summed bucket (ZeRO 0; its first hi − lo elements are
        the slice) or the summed slice [lo, hi) (ZeRO 1)"""
        self.owner = zero == 1 or index == 0
        """whether this rank's slice counts towards the global norm (one replica of each)"""
        # which elements count towards the global norm here (see optim.py)
        replicated = [model.specs[n].tp_dim is None and not model.specs[n].expert for n in names]
        tp_rank = model.groups.coords["tp"]
        self.norm_weight = torch.cat([
            torch.full((p.numel(),), 0.0 if rep and tp_rank else 1.0, dtype=dtype)
            for p, rep in zip(params, replicated)] + [torch.zeros(self.padded - total,
                                                                 dtype=dtype)])
        self.flat_master = self.flat_params()
        """the parameters, flat: AdamW updates [lo, hi) of it in place"""

    def flat_params(self) -> torch.Tensor:
        out = torch.zeros(self.padded, dtype=self.params[0].dtype)
        for p, o in zip(self.params, self.offsets):
            out[o:o + p.numel()] = p.detach().reshape(-1)
        return out

    def write_params(self, flat: torch.Tensor) -> None:
        with torch.no_grad():
            for p, o in zip(self.params, self.offsets):
                p.copy_(flat[o:o + p.numel()].view_as(p))


class GradientBuckets:
    """The gradient reduction of one stage on one rank (dense over dp_cp, experts over edp)."""

    def __init__(self, model, zero: int):
        self.model, self.zero, self.buckets = model, zero, []
        self.sum_over_tp = {n for n, t in model.specs.items() if t.norm and model.sp}
        for tensors in bucket_tensors(model.shape, list(model.specs.values()), model.tp,
                                      model.ep):
            group = model.groups["edp" if tensors[0].expert else "dp_cp"]
            self.buckets.append(Bucket([t.name for t in tensors], model, group, zero))
        self.where = {}
        for b in self.buckets:
            for n, o in zip(b.names, b.offsets):
                self.where[n] = (b, o)
        self.armed = False
        for n, p in model.params.items():
            p.register_post_accumulate_grad_hook(self._hook(n))

    def arm(self) -> None:
        """The next backward is the step's last: reduce each bucket as it fills."""
        self.armed = True
        for b in self.buckets:
            b.ready, b.work, b.grad = 0, None, None

    def _hook(self, name: str):
        def hook(p: torch.Tensor) -> None:
            if not self.armed:
                return
            bucket, offset = self.where[name]
            grad = p.grad
            if name in self.sum_over_tp:
                grad = comm.all_reduce(grad, self.model.groups["tp"])
            bucket.flat_grad[offset:offset + p.numel()] = grad.reshape(-1)
            bucket.ready += 1
            if bucket.ready == len(bucket.params):
                self._launch(bucket)
        return hook

    def _launch(self, b: Bucket) -> None:
        if b.group.size == 1:
            b.grad = b.flat_grad if not self.zero else b.flat_grad[b.lo:b.hi]
            return
        b.grad, b.work = comm.async_reduce(b.flat_grad, b.group,
                                           "reduce_scatter" if self.zero else "all_reduce")

    def finish(self) -> None:
        """Wait for every bucket (the part of the reduction backward did not hide)."""
        self.armed = False
        for b in self.buckets:
            if b.ready != len(b.params):
                raise RuntimeError(f"bucket of {b.names} got {b.ready} of {len(b.params)} "
                                   f"gradients")
            if b.work is not None:
                began = time.perf_counter()
                b.work.wait()
                comm.REC.add("dp", "wait", began, time.perf_counter(), b.group.kind)

    def gather_params(self) -> None:
        """ZeRO 1, after the update: every replica's updated slice to every replica."""
        for b in self.buckets:
            if b.group.size > 1 and self.zero:
                full = comm.all_gather(b.flat_master[b.lo:b.hi], 0, b.group)
                b.write_params(full)
            else:
                b.write_params(b.flat_master)
