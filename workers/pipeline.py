"""Train one step of a small MLP with torch.distributed.pipelining and record what ran.

    torchrun --standalone --nproc-per-node 4 workers/pipeline.py --schedule 1f1b \
        --microbatches 8 --chunks 1 --out report.json

The model is ``stages`` blocks of Linear + Tanh (float64, seeded identically on every rank);
rank r builds the blocks of its own stages (loop placement r, r + p, …; V placement r and
2p − 1 − r), wraps them in ``PipelineStage`` and runs torch's schedule class for one step with
an MSE loss. Every call the schedule makes into a stage is recorded as an action ("2F0", "1B3",
"5I0", "5W0"), in the order the rank ran it. Rank 0 also computes the loss and the gradients of
the whole, unpipelined model on the whole batch, and writes everything as JSON: the recorded
orders, the pipelined and unpipelined losses and gradients.
"""

from __future__ import annotations

import functools
import time

from common import add_fields, arguments, finish, gather, start  # noqa: I001 (workers/ on path)

import torch
from torch import nn
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as torch_schedules

from app.sim.pipeline.orders import SCHEDULE_KINDS
from app.sim.pipeline.params import PipelineParams
from app.sim.pipeline.schedules import stage_to_rank

CLASSES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B",
           "interleaved_1f1b": "ScheduleInterleaved1F1B", "zbv": "ScheduleZBVZeroBubble",
           "dualpipev": "ScheduleDualPipeV"}
ROWS_PER_MICROBATCH = 2


def blocks(stages: int, width: int, seed: int) -> list[nn.Module]:
    """The whole model, one block per stage, identical on every rank."""
    torch.manual_seed(seed)
    return [nn.Sequential(nn.Linear(width, width), nn.Tanh()).double() for _ in range(stages)]


def batch(microbatches: int, width: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed + 1)
    rows = microbatches * ROWS_PER_MICROBATCH
    return (torch.randn(rows, width, generator=g, dtype=torch.float64),
            torch.randn(rows, width, generator=g, dtype=torch.float64))


def record_calls(stage: PipelineStage, log: list[str]) -> None:
    """Log every forward, backward and weight-gradient pass the schedule runs on ``stage``."""
    index = stage.stage_index
    forward, backward, weight = (stage.forward_one_chunk, stage.backward_one_chunk,
                                 stage.backward_weight_one_chunk)

    @functools.wraps(forward)
    def forward_one_chunk(chunk, *args, **kwargs):
        log.append(f"{index}F{chunk}")
        return forward(chunk, *args, **kwargs)

    @functools.wraps(backward)
    def backward_one_chunk(chunk, *args, full_backward=True, **kwargs):
        log.append(f"{index}{'B' if full_backward else 'I'}{chunk}")
        return backward(chunk, *args, full_backward=full_backward, **kwargs)

    @functools.wraps(weight)
    def backward_weight_one_chunk(chunk, *args, **kwargs):
        log.append(f"{index}W{chunk}")
        return weight(chunk, *args, **kwargs)

    stage.forward_one_chunk = forward_one_chunk
    stage.backward_one_chunk = backward_one_chunk
    stage.backward_weight_one_chunk = backward_weight_one_chunk


def unpipelined(model: list[nn.Module], x: torch.Tensor, y: torch.Tensor):
    """Loss and per-stage gradients of the whole model on the whole batch (the reference)."""
    out = x
    for block in model:
        out = block(out)
    loss = nn.functional.mse_loss(out, y)
    loss.backward()
    return float(loss), [[p.grad.reshape(-1).tolist() for p in b.parameters()] for b in model]


def parser():
    """The command line: the scene's schedule, microbatches and chunks (app.sim.pipeline.params,
    the schedules torch has a class for), and the small model's own sizes."""
    out = arguments(__doc__.splitlines()[0])
    add_fields(out, PipelineParams, ["schedule", "microbatches", "chunks"],
               choices={"schedule": sorted(CLASSES)})
    out.add_argument("--width", type=int, default=8, help="features of every Linear")
    out.add_argument("--seed", type=int, default=0)
    return out


def main() -> None:
    args = parser().parse_args()
    rank, world, device, backend = start(args)
    kind = SCHEDULE_KINDS[args.schedule]
    chunks = kind.chunks or args.chunks
    stages = world * chunks
    mine = [s for s in range(stages) if stage_to_rank(s, world, kind.style) == rank]
    model = blocks(stages, args.width, args.seed)
    x, y = batch(args.microbatches, args.width, args.seed)

    log: list[str] = []
    pipeline_stages = []
    for s in mine:
        stage = PipelineStage(model[s].to(device), s, stages, device)
        record_calls(stage, log)
        pipeline_stages.append(stage)
    schedule_class = getattr(torch_schedules, CLASSES[args.schedule])
    single = issubclass(schedule_class, torch_schedules.PipelineScheduleSingle)
    schedule = schedule_class(pipeline_stages[0] if single else pipeline_stages,
                              args.microbatches, loss_fn=nn.functional.mse_loss)

    losses: list[torch.Tensor] = []
    step_args = (x.to(device),) if 0 in mine else ()
    step_kwargs = {"target": y.to(device), "losses": losses} if stages - 1 in mine else {}
    t0 = time.perf_counter()
    schedule.step(*step_args, **step_kwargs)
    elapsed_us = (time.perf_counter() - t0) * 1e6

    grads = {s: [p.grad.reshape(-1).cpu().tolist() for p in model[s].parameters()] for s in mine}
    loss = float(torch.stack(losses).mean()) if losses else None
    orders = gather(log, rank, world)
    all_grads = gather(grads, rank, world)
    all_losses = gather(loss, rank, world)
    report = None
    if rank == 0:
        reference = blocks(stages, args.width, args.seed)
        ref_loss, ref_grads = unpipelined(reference, x, y)
        merged = {s: g for part in all_grads for s, g in part.items()}
        report = {
            "backend": backend, "world": world, "schedule": args.schedule,
            "torch_class": CLASSES[args.schedule], "microbatches": args.microbatches,
            "chunks": chunks, "stages": stages, "orders": orders,
            "loss": next(v for v in all_losses if v is not None),
            "reference_loss": ref_loss,
            "grads": [merged[s] for s in range(stages)], "reference_grads": ref_grads,
            "step_us": elapsed_us,
        }
    finish(report, rank, args.out)


if __name__ == "__main__":
    main()
