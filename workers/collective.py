"""Run a collective for real and record it step by step.

    torchrun --standalone --nproc-per-node 4 workers/collective.py --op all_reduce \
        --algorithm ring --count 8 --seed 0 --out report.json

Each rank (a) calls torch.distributed's own collective on the scene's inputs and (b) replays the
scene's algorithm with real point-to-point sends and receives, one step of the schedule at a
time, recording its work buffer after every step. Rank 0 writes both, with timings, as JSON.
The inputs and the schedule come from the same code as the simulation
(app.sim.collectives.simulate.make_inputs, app.sim.collectives.schedules.build); the numbers that move are
moved by gloo or NCCL. Elements run as float32: the inputs are integers 1–9, so every sum of up
to 64 ranks is exact.
"""

from __future__ import annotations


from common import add_fields, arguments, finish, gather, median_us, start  # noqa: I001 (workers/ on path)

import torch
import torch.distributed as dist

from app.sim.collectives.schedules import ALGORITHMS, OPS, build

# torch 2.13 renamed the tensor-in, tensor-out collectives; older releases have the old names
ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
from app.sim.collectives.params import CollectiveParams
from app.sim.collectives.simulate import make_inputs


def torch_collective(op: str, x: torch.Tensor, world: int, root: int) -> torch.Tensor:
    """torch.distributed's implementation, with the semantics of DESIGN.md's contract."""
    if op == "all_reduce":
        out = x.clone()
        dist.all_reduce(out)
    elif op == "reduce_scatter":
        out = torch.empty(x.numel() // world, dtype=x.dtype, device=x.device)
        REDUCE_SCATTER(out, x.clone())
    elif op == "all_gather":
        out = torch.empty(x.numel() * world, dtype=x.dtype, device=x.device)
        ALL_GATHER(out, x)
    elif op == "broadcast":
        out = x.clone()
        dist.broadcast(out, src=root)
    elif op == "reduce":
        out = x.clone()
        dist.reduce(out, dst=root)
    elif op == "all_to_all":
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x.clone())
    else:
        raise ValueError(op)
    return out


def replay(schedule, rank: int, x: torch.Tensor, record: bool = True) -> list[list[float]]:
    """Run ``schedule`` with isend/irecv. Every move of a step reads the buffers as they were
    before the step: sends go out from a copy, receives land in scratch tensors and are applied
    (added or copied) once the whole step has completed."""
    lo, hi = schedule.layout.inputs[rank]
    buffer = torch.zeros(schedule.layout.buffer_len, dtype=x.dtype, device=x.device)
    buffer[lo:hi] = x
    history = []
    for step in schedule.steps:
        before = buffer.clone()
        ops, arrivals = [], []
        for m in step.moves:
            if m.local:
                if m.src == rank:
                    arrivals.append((m, before[m.src_lo:m.src_lo + m.length]))
            elif m.src == rank:
                ops.append(dist.P2POp(dist.isend, before[m.src_lo:m.src_lo + m.length].contiguous(),
                                      m.dst))
            elif m.dst == rank:
                scratch = torch.empty(m.length, dtype=x.dtype, device=x.device)
                ops.append(dist.P2POp(dist.irecv, scratch, m.src))
                arrivals.append((m, scratch))
        if ops:
            for request in dist.batch_isend_irecv(ops):
                request.wait()
        for m, data in arrivals:
            target = buffer[m.dst_lo:m.dst_lo + m.length]
            if m.reduce:
                target += data
            else:
                target.copy_(data)
        if record:
            history.append(buffer.cpu().tolist())
    return history


def run_case(op: str, algorithm: str, count: int, seed: int, root: int, rank: int, world: int,
             device: torch.device, repeats: int) -> dict | None:
    """One collective: torch's result, the replay's buffers after every step, timings.
    Returns the case's report on rank 0 (None elsewhere)."""
    schedule = build(op, algorithm, world, count, root)
    inputs = make_inputs(op, world, count, seed)
    x = torch.tensor(inputs[rank], dtype=torch.float32, device=device)
    output = torch_collective(op, x, world, root)
    history = replay(schedule, rank, x)
    timing = {
        "torch_us": median_us(lambda: torch_collective(op, x, world, root), device, repeats),
        "replay_us": median_us(lambda: replay(schedule, rank, x, record=False), device, repeats),
        "repeats": repeats,
    }
    outputs = gather(output.cpu().tolist(), rank, world)
    histories = gather(history, rank, world)
    if rank != 0:
        return None
    return {"op": op, "algorithm": algorithm, "count": count, "seed": seed, "root": root,
            "torch_output": outputs,
            "replay": [[histories[r][k] for r in range(world)] for k in range(len(schedule.steps))],
            "timing": timing}


def parser():
    """The command line: the scene's op, algorithm, count, seed and root
    (app.sim.collectives.params), or several cases at once."""
    out = arguments(__doc__.splitlines()[0])
    add_fields(out, CollectiveParams, ["op", "algorithm"],
               choices={"op": OPS, "algorithm": ALGORITHMS})
    out.add_argument("--cases", default="",
                     help="several op:algorithm pairs, comma-separated, run in one launch "
                          "(e.g. all_reduce:ring,all_reduce:tree); overrides --op/--algorithm")
    add_fields(out, CollectiveParams, ["count", "seed", "root"])
    out.add_argument("--repeats", type=int, default=7, help="timed repetitions (median)")
    return out


def main() -> None:
    args = parser().parse_args()
    rank, world, device, backend = start(args)
    cases = ([tuple(case.split(":")) for case in args.cases.split(",")] if args.cases
             else [(args.op, args.algorithm)])
    results = [run_case(op, algorithm, args.count, args.seed, args.root, rank, world, device,
                        args.repeats) for op, algorithm in cases]
    report = {"backend": backend, "world": world, "cases": results} if rank == 0 else None
    finish(report, rank, args.out)


if __name__ == "__main__":
    main()
