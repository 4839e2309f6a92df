"""Measure one training step's memory on a real model, to hold against the ledger.

    torchrun --standalone --nproc-per-node 2 workers/memory.py --family gpt --layers 2 \
        --hidden 256 --heads 4 --kv-heads 4 --ffn 1024 --vocab 1024 --seq 128 --micro-batch 1 \
        --tp 1 --pp 1 --zero 2 --recompute selective --optimizer adamw --precision mixed

The ranks form a dp × tp mesh (app.sim.mesh); each builds its tensor-parallel share of the first
pipeline stage (workers/memory_model.py) and runs one training step:

1. forward ``pp`` micro-batches — the first stage's 1F1B peak — while
   ``torch.autograd.graph.saved_tensors_hooks`` records every tensor autograd keeps for
   backward: unique storages, parameters and buffers left out, attributed to the module that
   was running;
2. backward (the loss, or a gradient from the next stage when pp > 1);
3. gradients averaged over dp: all-reduce, or from ZeRO-2 a reduce-scatter that leaves each
   rank one shard of every tensor (dimension 0 cut into dp parts, FSDP-style);
4. the optimizer (torch.optim) steps this rank's shards (ZeRO ≥ 1) or everything, on fp32
   master copies in mixed precision;
5. the updated shards are gathered back (ZeRO-1/2) or kept as shards (ZeRO-3).

Bytes of parameters, gradients and optimizer states are then read from the tensors that
remain. Rank 0 writes every rank's numbers as JSON.
"""

from __future__ import annotations

import time

from common import add_fields, arguments, finish, gather, run_config, start  # noqa: I001 (workers/ on path)

import torch
import torch.distributed as dist
from memory_layers import Groups
from memory_model import Stage
from saved_tensors import SavedTensors
from torch import nn

from app.sim.memory.params import MemoryParams
from app.sim.mesh import Mesh
from app.catalog.models import ModelShape

OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "adafactor", "adam8bit")
REPLICATED = ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "final_norm.weight",
              "final_norm.bias", "proj.bias", "positions")
"""Parameters every tensor-parallel rank holds whole (tp_dim None in ModelShape.tensors)."""


def pad_rows(t: torch.Tensor, parts: int) -> torch.Tensor:
    """``t`` with zero rows appended so that dimension 0 divides into ``parts``."""
    missing = -t.shape[0] % parts
    return torch.cat([t, t.new_zeros((missing, *t.shape[1:]))]) if missing else t


def shard_rows(t: torch.Tensor, parts: int, index: int) -> torch.Tensor:
    """Shard ``index`` of ``t`` cut along dimension 0 into ``parts`` (padded at the end)."""
    t = pad_rows(t, parts)
    rows = t.shape[0] // parts
    return t[index * rows:(index + 1) * rows]


def make_optimizer(name: str, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3)
    if name == "momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3)
    if name == "adafactor":
        return torch.optim.Adafactor(params, lr=1e-3)
    raise ValueError(f"{name} has no torch.optim implementation here")


def train_step(args, model: Stage, g: Groups, dp_group, dp: int, dp_rank: int,
               device: torch.device) -> dict:
    named = list(model.named_parameters())
    param_count = sum(p.numel() for _, p in named)
    # 1. forward pp micro-batches, recording what autograd keeps
    saved = SavedTensors(model)
    torch.manual_seed(1000 + dp_rank)   # same tokens and dropout on every rank of a TP group
    outputs = []
    with saved.hooks():
        for _ in range(args.pp):
            ids = torch.randint(args.vocab, (args.seq, args.micro_batch), device=device)
            targets = torch.randint(args.vocab, (args.seq, args.micro_batch), device=device)
            outputs.append(model(ids, targets))
    saved.close()
    activations, activations_by_part, saved_count = saved.total(), saved.by_part(), len(saved.live)
    # 2. backward
    for out in outputs:
        out.backward() if out.dim() == 0 else out.backward(torch.randn_like(out))
    del outputs
    # 3. gradients: the TP-replicated ones summed under SP, then averaged over dp
    kept = []
    for name, p in named:
        grad = p.grad
        if g.sp and name.endswith(REPLICATED):
            dist.all_reduce(grad, group=g.group)
        if args.zero >= 2:   # reduce-scatter: this rank keeps one shard of the sum
            padded = pad_rows(grad, dp).contiguous()
            shard = grad.new_empty((padded.shape[0] // dp, *grad.shape[1:]))
            if dp > 1:
                dist.reduce_scatter_single(shard, padded, group=dp_group)
            else:
                shard.copy_(padded)
            p.grad = None
            kept.append(shard.div_(dp))
        else:
            if dp > 1:
                dist.all_reduce(grad, group=dp_group)
            kept.append(grad.div_(dp))
    grads = sum(t.nbytes for t in kept)
    # 4. the optimizer on this rank's shards, fp32 masters in mixed precision
    mixed = args.precision == "mixed"
    masters = []
    for (_, p), grad in zip(named, kept):
        data = shard_rows(p.data, dp, dp_rank) if args.zero >= 1 else p.data
        if args.zero == 1:
            grad = shard_rows(grad, dp, dp_rank)
        master = nn.Parameter(data.float().clone() if mixed else data)
        master.grad = grad.float() if mixed else grad
        masters.append(master)
    optimizer = None
    if args.optimizer != "adam8bit":
        optimizer = make_optimizer(args.optimizer, masters)
        optimizer.step()
    states = steps = 0
    for state in (optimizer.state.values() if optimizer else ()):
        for key, value in state.items():
            if torch.is_tensor(value):
                if key == "step":
                    steps += value.nbytes
                else:
                    states += value.nbytes
    master_bytes = sum(m.nbytes for m in masters) if mixed else 0
    # 5. parameters back: gathered (ZeRO ≤ 2) or kept as this rank's shard (ZeRO-3)
    with torch.no_grad():
        for (_, p), master in zip(named, masters):
            update = master.detach().to(p.dtype)
            if args.zero == 3:
                p.data = update.clone()
            elif args.zero >= 1:
                full = update.new_empty((update.shape[0] * dp, *update.shape[1:]))
                if dp > 1:
                    dist.all_gather_single(full, update.contiguous(), group=dp_group)
                else:
                    full.copy_(update)
                p.data.copy_(full[:p.shape[0]])
            elif mixed:
                p.data.copy_(update)
    return {
        "params": sum(p.data.nbytes for _, p in named),
        "grads": grads,
        "optimizer": None if optimizer is None else states + master_bytes,
        "step_counters": steps,
        "activations": activations,
        "activations_by_part": activations_by_part,
        "saved_tensors": saved_count,
        "param_count": param_count,
        "peak_allocated": (torch.cuda.max_memory_allocated(device) if device.type == "cuda"
                           else None),
    }


def model_arguments(parser, model=MemoryParams) -> None:
    """The flags that shape the model and its tensor parallelism (workers/checkpointing.py
    takes them too, from its own params ``model``): the scaled-down sizes the check computes
    (required), then the scene's micro_batch, tp and sequence_parallel."""
    parser.add_argument("--family", choices=("gpt", "llama"), required=True)
    for flag in ("layers", "hidden", "heads", "kv-heads", "ffn", "vocab", "seq"):
        parser.add_argument(f"--{flag}", type=int, required=True)
    add_fields(parser, model, ["micro_batch", "tp", "sequence_parallel"])
    parser.add_argument("--seed", type=int, default=0)


def model_shape(args) -> ModelShape:
    return ModelShape("measured", args.family, args.layers, args.hidden, args.heads,
                      args.kv_heads, args.ffn, args.vocab, args.seq)


def mesh_groups(rank: int, world: int, tp: int, sequence_parallel: bool):
    """This rank's place in the dp × tp mesh (app.sim.mesh): its tensor-parallel
    :class:`Groups`, its data-parallel group, dp and its index along dp."""
    if world % tp:
        raise SystemExit(f"world ({world}) must be a multiple of tp ({tp})")
    mesh = Mesh.of(dp=world // tp, tp=tp)
    coords = mesh.coords(rank)
    groups = {}
    for axis in ("tp", "dp"):   # every rank creates every group, in the same order
        for ranks in mesh.groups(axis):
            group = dist.new_group(list(ranks))
            if rank in ranks:
                groups[axis] = group
    g = Groups(groups["tp"], tp, coords["tp"], sequence_parallel)
    return g, groups["dp"], world // tp, coords["dp"]


def finish_mesh_run(args, measured: dict, started: float, *, rank: int, world: int, g: Groups,
                    dp: int, dp_rank: int, backend: str, device, **fields) -> None:
    """Every rank's ``measured`` (with its place in the mesh and its time since ``started``)
    into rank 0's report, beside the run's settings and ``fields``; then leave the group."""
    measured.update(rank=rank, dp_rank=dp_rank, tp_rank=g.rank,
                    seconds=round(time.perf_counter() - started, 3))
    ranks = gather(measured, rank, world)
    report = None
    if rank == 0:
        report = {"backend": backend, "world": world, "dp": dp, "tp": args.tp, **fields,
                  "device": str(device), "torch": torch.__version__,
                  "config": run_config(args), "ranks": ranks}
    finish(report, rank, args.out)


def parser():
    """The command line: the model (:func:`model_arguments`) and the scene's pp, zero,
    recompute, optimizer and precision (app.sim.memory.params)."""
    out = arguments(__doc__.splitlines()[0])
    model_arguments(out)
    add_fields(out, MemoryParams, ["pp", "zero", "recompute", "optimizer", "precision"],
               choices={"optimizer": OPTIMIZERS},
               notes={"pp": "micro-batches in flight on the first stage"})
    return out


def main() -> None:
    args = parser().parse_args()
    rank, world, device, backend = start(args)
    g, dp_group, dp, dp_rank = mesh_groups(rank, world, args.tp, args.sequence_parallel)
    shape = model_shape(args)
    torch.manual_seed(args.seed)
    with device:   # a full-size stage is built on the GPU directly, not in host memory
        model = Stage(shape, g, args.layers // args.pp, first=True, last=args.pp == 1,
                      recompute=args.recompute)
    model.to(device=device, dtype=torch.bfloat16 if args.precision == "mixed" else torch.float32)
    model.train()
    started = time.perf_counter()
    measured = train_step(args, model, g, dp_group, dp, dp_rank, device)
    finish_mesh_run(args, measured, started, rank=rank, world=world, g=g, dp=dp, dp_rank=dp_rank,
                    backend=backend, device=device, pp=args.pp)


if __name__ == "__main__":
    main()
