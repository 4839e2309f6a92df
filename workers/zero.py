"""Train the tiny model of chapters 4 and 5 for real, twice: with torch's own data parallelism,
and with the hand-written algorithm the simulation draws, counting the bytes each rank sends.

    torchrun --standalone --nproc-per-node 4 workers/zero.py --algorithm zero2 --steps 3 \
        --seed 0 --mlp-layers 3 --mlp-width 2 --micro-batch 2 --out report.json

``--algorithm`` (see app.sim.data_parallel.training) and torch's implementation it is checked against:

    dp      one process on the whole batch (what nn.DataParallel computes)
    ddp     DistributedDataParallel (the hand-written run: DDP with a comm hook that replays the
            ring all-reduce on each bucket, recording the buckets DDP built)
    zero0   DistributedDataParallel
    zero1   DistributedDataParallel + ZeroRedundancyOptimizer (torch's ZeRO-1)
    zero2   FSDP2 fully_shard(reshard_after_forward=False) on every layer (ZeRO-2)
    zero3   FSDP2 fully_shard(reshard_after_forward=True) on every layer (ZeRO-3)

Parameters and data come from app.sim.tiny_mlp, in float64, so every sum agrees with the
simulation's to ~1e-16. ``--scenario-buckets PRESET,BYTES,MIB`` also asks torch's own bucketing
(``dist._compute_bucket_assignment_by_size``, what DDP's reducer calls) for the buckets of a real
model's tensors (meta tensors: nothing is allocated). Rank 0 writes the JSON report.
"""

from __future__ import annotations

import time

from common import add_fields, arguments, finish, gather, start  # noqa: I001 (workers/ on path)

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import zero_replay as hand
from app.sim.data_parallel.buckets import cap_mb_of
from app.sim.data_parallel.params import DataParallelParams
from app.sim.data_parallel.training import ALGORITHMS
from app.sim.tiny_mlp import BETA1, BETA2, EPS, LR, TinyMLP, batch, init_params
from app.sim.zero.params import ZeroParams


def data(model, seed, step, world, micro_batch, rank):
    x, y = batch(model, seed, step, world, micro_batch)
    to = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    return to(x[rank]), to(y[rank]), to(x), to(y)


def adam_for(params):
    return torch.optim.Adam(params, lr=LR, betas=(BETA1, BETA2), eps=EPS, foreach=False)


def torch_reference(algorithm, model, flat0, args, rank, world) -> tuple[str, torch.Tensor]:
    """Train with torch's own implementation; returns (its name, final full parameters)."""
    net = hand.module(model, flat0)
    if algorithm == "dp":
        optimizer = adam_for(net.parameters())
        for k in range(args.steps):
            _, _, x_all, y_all = data(model, args.seed, k, world, args.micro_batch, rank)
            optimizer.zero_grad()
            ((net(x_all.reshape(-1, model.width)) - y_all.reshape(-1, model.width)) ** 2).mean().backward()
            optimizer.step()
        return "one process on the whole batch (what DataParallel computes)", hand.flat_params(net)
    if algorithm in ("zero2", "zero3"):
        from torch.distributed.fsdp import fully_shard
        for layer in net:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, reshard_after_forward=algorithm == "zero3")
        fully_shard(net, reshard_after_forward=algorithm == "zero3")
        optimizer = adam_for(net.parameters())
        name = f"FSDP2 fully_shard(reshard_after_forward={algorithm == 'zero3'})"
    else:
        net = DDP(net)
        if algorithm == "zero1":
            from torch.distributed.optim import ZeroRedundancyOptimizer
            optimizer = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.Adam,
                                                lr=LR, betas=(BETA1, BETA2), eps=EPS)
            name = "DDP + ZeroRedundancyOptimizer(Adam)"
        else:
            optimizer = adam_for(net.parameters())
            name = "DistributedDataParallel"
    for k in range(args.steps):
        x, y, _, _ = data(model, args.seed, k, world, args.micro_batch, rank)
        optimizer.zero_grad()
        ((net(x) - y) ** 2).mean().backward()
        optimizer.step()
    params = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in net.parameters()]
    return name, torch.cat([p.detach().reshape(-1) for p in params])


def hand_written(algorithm, model, flat0, args, rank, world):
    """The simulation's algorithm with real sends: (final params, bytes sent per step, losses,
    DDP's buckets per step)."""
    sent, losses, buckets = [], [], []
    if algorithm == "ddp":
        cap = cap_mb_of(args.bucket_mb, args.explicit_cap)   # None: left unset, as DDP(model)
        net = DDP(hand.module(model, flat0), bucket_cap_mb=cap)
        seen: list = []

        def ring_hook(_, bucket):
            seen.append([p.numel() for p in bucket.parameters()])
            buffer = bucket.buffer().div_(world)           # DDP divides, then sums
            buffer.copy_(hand._ring("all_reduce", world, buffer.numel(), rank, buffer))
            future = torch.futures.Future()
            future.set_result(buffer)
            return future

        net.register_comm_hook(None, ring_hook)
        optimizer = adam_for(net.parameters())
        for k in range(args.steps):
            x, y, _, _ = data(model, args.seed, k, world, args.micro_batch, rank)
            seen.clear()
            with hand.ByteCounter() as counter:
                optimizer.zero_grad()
                loss = ((net(x) - y) ** 2).mean()
                loss.backward()
                optimizer.step()
            sent.append(counter.bytes)
            losses.append(loss.item())
            buckets.append(list(seen))
        return hand.flat_params(net.module), sent, losses, buckets
    if algorithm == "dp":
        param, optimizer = hand.adam(model.param_count)
        with torch.no_grad():
            param.copy_(flat0)
        state = {"flat": flat0.clone(), "optim": (param, optimizer)}
        for k in range(args.steps):
            _, _, x_all, y_all = data(model, args.seed, k, world, args.micro_batch, rank)
            with hand.ByteCounter() as counter:
                losses.append(hand.step_dp(model, state, x_all, y_all, rank, world,
                                           args.micro_batch))
            sent.append(counter.bytes)
        final = hand._ring("broadcast", world, model.param_count, rank,
                           state["flat"] if rank == 0 else torch.zeros(model.param_count,
                                                                       dtype=torch.float64))
        return final, sent, losses, buckets
    stage = int(algorithm[-1])
    state = hand.init_zero(stage, model, flat0, rank, world)
    for k in range(args.steps):
        x, y, _, _ = data(model, args.seed, k, world, args.micro_batch, rank)
        with hand.ByteCounter() as counter:
            losses.append(hand.step_zero(stage, model, state, x, y, rank, world))
        sent.append(counter.bytes)
    return hand.final_zero(stage, model, state, rank, world), sent, losses, buckets


def scenario_buckets(spec: str) -> list[list[int]]:
    """torch's own bucket assignment for a preset's tensors, in the gradient-ready order a real
    backward of a model laid out like it gives (workers/ddp_order.py). MIB empty: DDP() with
    bucket_cap_mb unset (a first bucket of _DEFAULT_FIRST_BUCKET_BYTES, then 25 MiB)."""
    from ddp_order import bucket_assignment
    from torch.nn.parallel.distributed import _DEFAULT_BUCKET_CAP_MB

    from app.catalog.models import PRESETS
    preset, element_bytes, mib = spec.split(",")
    cap = int(float(mib or _DEFAULT_BUCKET_CAP_MB) * 1024 * 1024)
    limits = [cap] if mib else [dist._DEFAULT_FIRST_BUCKET_BYTES, cap]
    return bucket_assignment(PRESETS[preset], int(element_bytes), limits)


def parser():
    """The command line: the algorithm (the scene's stage or mode), the tiny model's training
    (app.sim.zero.params; chapter 4's fields are the same types) and DDP's buckets
    (app.sim.data_parallel.params)."""
    out = arguments(__doc__.splitlines()[0])
    out.add_argument("--algorithm", choices=ALGORITHMS, required=True)
    add_fields(out, ZeroParams, ["steps", "seed", "mlp_layers", "mlp_width", "micro_batch"])
    add_fields(out, DataParallelParams, ["bucket_mb", "explicit_cap"])
    out.add_argument("--scenario-buckets", default="", help="PRESET,BYTES,MIB")
    return out


def main() -> None:
    args = parser().parse_args()
    rank, world, _, backend = start(args, "gloo" if args.backend == "auto" else args.backend)
    torch.manual_seed(0)
    model = TinyMLP(args.mlp_layers, args.mlp_width)
    flat0 = torch.tensor(init_params(model, args.seed), dtype=torch.float64)

    began = time.perf_counter()
    impl, torch_params = torch_reference(args.algorithm, model, flat0, args, rank, world)
    torch_s = time.perf_counter() - began
    replay_params, sent, losses, buckets = hand_written(args.algorithm, model, flat0, args, rank,
                                                        world)
    report_parts = gather({"torch": torch_params.tolist(), "replay": replay_params.tolist(),
                           "sent": sent, "losses": losses}, rank, world)
    report = None
    if rank == 0:
        report = {
            "backend": backend, "world": world, "algorithm": args.algorithm,
            "steps": args.steps, "torch_impl": impl, "torch_seconds": round(torch_s, 3),
            "torch_params": [p["torch"] for p in report_parts],
            "replay_params": [p["replay"] for p in report_parts],
            "sent_bytes": [[p["sent"][k] for p in report_parts] for k in range(args.steps)],
            "losses": [[p["losses"][k] for p in report_parts] for k in range(args.steps)],
            "element_bytes": 8, "buckets": buckets,
            "scenario_buckets": scenario_buckets(args.scenario_buckets)
            if args.scenario_buckets else None,
        }
    finish(report, rank, args.out)


if __name__ == "__main__":
    main()
