"""A pre-started rank of the warm pool (app/jobs/pool.py): ``python app/jobs/pool_rank.py``.

It loads what every worker loads — torch, torch.distributed, numpy, workers/common.py (whose
guard ties it to the server before torch loads) — then waits for one job on stdin: a JSON line
``{"script", "argv", "env", "log"}``. It then becomes that rank exactly as torchrun would have
started it: the job's RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT… in its
environment, ``sys.argv`` the worker's, its output in the job's log, the worker's folder first
on ``sys.path``, and the script run as ``__main__``; the worker's ``start()`` joins the process
group from the environment as under torchrun. A process serves one job and exits, so no state
of one job (a process group, a seeded generator, CUDA memory) reaches the next; the pool starts
a fresh one behind it.
"""

import json
import os
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKERS = ROOT / "workers"
sys.path[0:1] = [str(WORKERS), str(ROOT)]

import common  # noqa: E402,F401  (the guard, then torch and torch.distributed)
import numpy  # noqa: E402,F401
import torch.nn  # noqa: E402,F401

line = sys.stdin.readline()
if not line.strip():
    os._exit(0)  # the pool let this rank go (idle timeout, shutdown)
job = json.loads(line)
fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
sys.stdout.flush()
sys.stderr.flush()
os.dup2(fd, 1)
os.dup2(fd, 2)
os.close(fd)
os.environ.update(job["env"])
script = str(ROOT / job["script"])
sys.argv = [script, *job["argv"]]
sys.path[0] = os.path.dirname(script)
runpy.run_path(script, run_name="__main__")
