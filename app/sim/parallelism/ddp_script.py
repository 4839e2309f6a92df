"""The first DDP script (workers/first_ddp.py) stepped through: the code lines of each step
and what every rank holds after it.

The lines are read from the worker itself, so the page shows the script that really runs. Each
step names the lines by a piece of their text; a step whose text is missing from the worker
fails loudly (tests catch an edit to the script that the page would silently lose).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from app.sim.mesh import local_rank, node_of

SCRIPT = Path(__file__).resolve().parents[3] / "workers" / "first_ddp.py"
PARAMS = 16 * 64 + 64 + 64 * 1 + 1
"""Parameters of the script's model: Linear(16, 64) and Linear(64, 1) with biases = 1,153."""
SAMPLES, BATCH = 1024, 32
MOST_RANKS = 8
"""Ranks whose holdings a step lists (the rest hold the same, shifted)."""

STEPS: tuple[tuple[str, str, str], ...] = (
    # (phase, first line's text, last line's text)
    ("env", 'rank = int(os.environ["RANK"])', 'world_size = int(os.environ["WORLD_SIZE"])'),
    ("device", "if torch.cuda.is_available():", 'device, backend = torch.device("cpu")'),
    ("init", "dist.init_process_group(backend)", "dist.init_process_group(backend)"),
    ("model", "torch.manual_seed(0)", ".to(device)"),
    ("ddp", "model = DDP(model", "model = DDP(model"),
    ("data", "data = TensorDataset(", "optimizer = torch.optim.AdamW"),
    ("forward", "x, y = x.to(device)", "loss = torch.nn.functional.mse_loss"),
    ("backward", "loss.backward()", "loss.backward()"),
    ("step", "optimizer.step()", "optimizer.step()"),
    ("destroy", "dist.destroy_process_group()", "dist.destroy_process_group()"),
)


@dataclass(frozen=True)
class DdpStep:
    phase: str
    first_line: int          # 1-based line numbers in workers/first_ddp.py
    code: tuple[str, ...]
    caption: str
    holds: tuple[str, ...]   # per shown rank

    def to_dict(self) -> dict:
        return {"phase": self.phase, "first_line": self.first_line, "code": list(self.code),
                "caption": self.caption, "holds": list(self.holds)}


@lru_cache(maxsize=1)
def script_lines() -> tuple[str, ...]:
    return tuple(SCRIPT.read_text().splitlines())


def find(lines: tuple[str, ...], text: str, start: int = 0) -> int:
    for i in range(start, len(lines)):
        if text in lines[i]:
            return i
    raise LookupError(f"{SCRIPT.name} has no line with {text!r} after line {start + 1}")


def steps(world: int, gpus_per_node: int) -> tuple[DdpStep, ...]:
    lines = script_lines()
    shown = range(min(world, MOST_RANKS))
    nproc = min(world, gpus_per_node)
    per_rank = SAMPLES // world
    grad_bytes = PARAMS * 4
    sent = 2 * (world - 1) / world * grad_bytes
    captions = {
        "env": f"torchrun started {world} processes ({nproc} per node) and told each who it is: "
               f"RANK 0…{world - 1} in the job, LOCAL_RANK 0…{nproc - 1} on its machine, "
               f"WORLD_SIZE {world}.",
        "device": "Each process takes the GPU numbered by its LOCAL_RANK (NCCL); without GPUs "
                  "all run on the CPU with gloo.",
        "init": f"init_process_group meets the other {world - 1} processes at "
                f"MASTER_ADDR:MASTER_PORT: the default group of {world} ranks exists.",
        "model": f"The same seed gives every rank the same {PARAMS:,} initial parameters.",
        "ddp": "DDP broadcasts rank 0's parameters and buffers to every rank and registers a "
               "hook on each gradient bucket.",
        "data": f"DistributedSampler gives each rank a different {per_rank} of the {SAMPLES} "
                f"samples, {BATCH} a batch.",
        "forward": "Each rank runs the forward pass on its own batch: different data, "
                   "different losses.",
        "backward": f"backward(): as each bucket's gradients are ready DDP all-reduces them; "
                    f"{grad_bytes:,} bytes of fp32 gradients, {sent:,.0f} sent by each rank "
                    f"(ring, 2(n−1)/n), averaged over {world} ranks.",
        "step": "Every rank applies the same averaged gradient: the replicas stay identical.",
        "destroy": "destroy_process_group closes the connections; the processes exit.",
    }

    def holds(phase: str, r: int) -> str:
        where = f"node {node_of(r, nproc)}, local rank {local_rank(r, nproc)}"
        return {
            "env": f"RANK={r} LOCAL_RANK={local_rank(r, nproc)} WORLD_SIZE={world}",
            "device": f"cuda:{local_rank(r, nproc)} ({where})",
            "init": f"member {r} of the default group",
            "model": f"{PARAMS:,} parameters, identical on every rank",
            "ddp": "the parameters of rank 0, gradient buckets ready",
            "data": f"positions {r}, {r + world}, {r + 2 * world}, … of the epoch's shuffle "
                    f"({per_rank} samples)",
            "forward": f"loss of its own {BATCH} samples",
            "backward": "the averaged gradient (the same on every rank)",
            "step": "the updated parameters (the same on every rank)",
            "destroy": "nothing: the process has left the group",
        }[phase]

    out, cursor = [], 0
    for phase, first, last in STEPS:
        i = find(lines, first, cursor)
        j = find(lines, last, i)
        cursor = i
        out.append(DdpStep(phase, i + 1, tuple(textwrap.dedent("\n".join(lines[i:j + 1])).splitlines()),
                           captions[phase], tuple(holds(phase, r) for r in shown)))
    return tuple(out)
