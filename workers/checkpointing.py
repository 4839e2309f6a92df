"""Measure activation checkpointing and gradient accumulation on a real model.

    torchrun --standalone --nproc-per-node 2 workers/checkpointing.py --family gpt --layers 8 \
        --hidden 128 --heads 4 --kv-heads 4 --ffn 512 --vocab 512 --seq 128 --micro-batch 2 \
        --tp 1 --strategies none selective full full:3 --recompute full --every 3 \
        --grad-accum 4

The ranks form a dp × tp mesh (app.sim.mesh) and build the same GPT- or Llama-style stage as
the memory ledger's worker (workers/memory_model.py: embedding, ``layers`` transformer layers,
vocab-parallel loss), with the same weights on every data-parallel rank.

1. Memory, in bf16 as Korthikanti et al. 2022 count it (16-bit activations, 1-byte dropout
   masks). For each strategy — ``none``, ``selective`` (the attention core checkpointed),
   ``full`` (every layer's input) and ``full:k`` (Megatron-LM's ``--recompute-method uniform
   --recompute-num-layers k``: one ``torch.utils.checkpoint`` over k layers; Chen et al.
   2016's segments) — one micro-batch runs forward and backward inside
   ``torch.autograd.graph.saved_tensors_hooks`` (workers/saved_tensors.py). The worker reads
   the bytes each layer keeps at the end of forward (A, S, or its checkpoint C), their sum over
   the layers, and the peak of the layers' live saved bytes over forward and backward — the
   recomputed segments included, since the hooks also see what checkpoint's recomputation saves.
   Every data-parallel replica holds the same shapes, so the first one (its tensor-parallel
   ranks) measures and the others go straight to step 2.
2. Gradient accumulation, in fp32 with dropout off (a big batch would draw other masks than its
   micro-batches). Each data-parallel rank runs ``grad_accum`` micro-batches of
   ``micro_batch`` sequences with the chosen recompute, each loss scaled by 1/grad_accum, the
   gradients summing in ``.grad``; one all-reduce over dp then averages them (what DDP's
   ``no_sync`` + the last micro-batch's all-reduce do). Every rank also takes the gradient of
   the whole global batch — micro_batch × grad_accum × dp sequences — in one pass without
   recompute, and reports the largest difference.

Rank 0 writes every rank's numbers as JSON.
"""

from __future__ import annotations

import time

from common import add_fields, arguments, start  # noqa: I001 (workers/ on path)

import torch
import torch.distributed as dist
from memory import REPLICATED, finish_mesh_run, mesh_groups, model_arguments, model_shape
from memory_model import Stage
from saved_tensors import SavedTensors

from app.sim.checkpointing.params import CheckpointParams


def strategy(text: str) -> tuple[str, int]:
    """``none``, ``selective``, ``full`` or ``full:k`` → (recompute, k)."""
    name, _, k = text.partition(":")
    if name not in ("none", "selective", "full") or (k and (name != "full" or int(k) < 1)):
        raise ValueError(f"unknown strategy {text!r}")
    return name, int(k or 1)


def measure_memory(model: Stage, recompute: str, every: int, batch) -> dict:
    """One micro-batch forward and backward with ``recompute``; what autograd keeps."""
    model.set_recompute(recompute, every)
    layers = len(model.layers)
    saved = SavedTensors(model)
    with saved.hooks():
        loss = model(*batch)
        per_layer = saved.by_layer(layers)
        end_of_forward = saved.layer_bytes
        parts = saved.by_layer_part(layers - 1)
        outside = saved.total() - end_of_forward
        loss.backward()
    del loss
    saved.close()
    model.zero_grad(set_to_none=True)
    return {"recompute": recompute, "every": every, "per_layer": per_layer,
            "end_of_forward": end_of_forward, "peak": saved.peak_layer_bytes,
            "last_layer_parts": parts, "outside_layers": outside,
            "left_after_backward": saved.total()}


def tokens(args, dp_rank: int, micro: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Micro-batch ``micro`` of data-parallel rank ``dp_rank``: ids and targets (s, b), the same
    on every rank that asks for it."""
    gen = torch.Generator().manual_seed(10_000 + dp_rank * args.grad_accum + micro)
    ids = torch.randint(args.vocab, (2, args.seq, args.micro_batch), generator=gen)
    return ids[0].to(device), ids[1].to(device)


def gradients(model: Stage, g) -> list[torch.Tensor]:
    """This rank's gradients; under sequence parallelism the norms' and biases' partial sums
    (each rank saw 1/t of the sequence) are summed over the tensor-parallel group."""
    out = []
    for name, p in model.named_parameters():
        grad = p.grad.clone()
        if g.sp and name.endswith(REPLICATED):
            dist.all_reduce(grad, group=g.group)
        out.append(grad)
    return out


def accumulate(args, model: Stage, g, dp_group, dp: int, dp_rank: int, device) -> dict:
    """Micro-batches × accumulation × dp against one pass over the global batch."""
    model.eval()   # dropout off: the big batch must see the same computation
    model.set_recompute(args.recompute, args.every)
    losses = []
    for micro in range(args.grad_accum):
        loss = model(*tokens(args, dp_rank, micro, device)) / args.grad_accum
        loss.backward()   # sums into .grad
        losses.append(loss.detach())
    accumulated = gradients(model, g)
    loss = torch.stack(losses).sum()
    for t in (*accumulated, loss):   # DDP's average over data-parallel ranks
        if dp > 1:
            dist.all_reduce(t, group=dp_group)
        t.div_(dp)
    model.zero_grad(set_to_none=True)
    model.set_recompute("none")
    batches = [tokens(args, r, m, device) for r in range(dp) for m in range(args.grad_accum)]
    ids = torch.cat([b[0] for b in batches], dim=1)
    targets = torch.cat([b[1] for b in batches], dim=1)
    big_loss = model(ids, targets)
    big_loss.backward()
    whole = gradients(model, g)
    model.zero_grad(set_to_none=True)
    diff = max(float((a - w).abs().max()) for a, w in zip(accumulated, whole))
    scale = max(float(w.abs().max()) for w in whole)
    relative = max(float((a - w).abs().max() / w.abs().max().clamp_min(1e-30))
                   for a, w in zip(accumulated, whole))
    return {"micro_batch": args.micro_batch, "grad_accum": args.grad_accum, "dp": dp,
            "sequences": int(ids.shape[1]), "tensors": len(whole),
            "elements": sum(w.numel() for w in whole),
            "max_abs_diff": diff, "max_abs_grad": scale, "max_relative_diff": relative,
            "loss_accumulated": float(loss), "loss_global_batch": float(big_loss),
            "grad_norm": float(torch.sqrt(sum((w.double() ** 2).sum() for w in whole)))}


def parser():
    """The command line: the model (workers/memory.py model_arguments), the strategies to
    measure, and the scene's recompute and grad_accum (app.sim.checkpointing.params)."""
    out = arguments(__doc__.splitlines()[0])
    model_arguments(out, CheckpointParams)
    out.add_argument("--strategies", nargs="+", type=strategy,
                     default=[("none", 1), ("selective", 1), ("full", 1)],
                     help="recompute strategies to measure: none, selective, full, full:k")
    add_fields(out, CheckpointParams, ["recompute", "grad_accum"],
               notes={"recompute": "the strategy the accumulated micro-batches use",
                      "grad_accum": "on each data-parallel rank"})
    out.add_argument("--every", type=int, default=1,
                     help="k: layers per checkpointed segment under full recompute")
    return out


def main() -> None:
    args = parser().parse_args()
    rank, world, device, backend = start(args)
    g, dp_group, dp, dp_rank = mesh_groups(rank, world, args.tp, args.sequence_parallel)
    shape = model_shape(args)
    started = time.perf_counter()
    models = {}
    for dtype in (torch.bfloat16, torch.float32):   # the same weights on every dp rank
        torch.manual_seed(args.seed)
        with device:
            models[dtype] = Stage(shape, g, args.layers, first=True, last=True,
                                  recompute="none").to(dtype=dtype)
    model = models[torch.bfloat16].train()
    torch.manual_seed(1000)   # same tokens and dropout on every rank of the TP group
    batch = (torch.randint(args.vocab, (args.seq, args.micro_batch), device=device),
             torch.randint(args.vocab, (args.seq, args.micro_batch), device=device))
    # the other data-parallel replicas hold the same shapes: the first one measures memory
    measured = {"strategies": [measure_memory(model, r, k, batch) for r, k in args.strategies]
                if dp_rank == 0 else None,
                "accumulation": accumulate(args, models[torch.float32], g, dp_group, dp,
                                           dp_rank, device)}
    finish_mesh_run(args, measured, started, rank=rank, world=world, g=g, dp=dp, dp_rank=dp_rank,
                    backend=backend, device=device)


if __name__ == "__main__":
    main()
