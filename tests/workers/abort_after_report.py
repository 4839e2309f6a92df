"""A stand-in worker for tests/workers/test_jobs.py: every rank joins a gloo group, rank 0 writes
its report, and then — as gloo sometimes does when a peer leaves first (pytorch/gloo#155) —
rank 0 aborts instead of leaving the group cleanly."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workers"))

from common import arguments, finish, gather, start  # noqa: E402

parser = arguments(__doc__.splitlines()[0])
parser.add_argument("--abort", action="store_true", help="rank 0 aborts after its report")
args = parser.parse_args()
rank, world, _, backend = start(args, "gloo")
ranks = gather(rank, rank, world)
report = {"backend": backend, "ranks": ranks} if rank == 0 else None
if rank == 0 and args.abort:
    args.out.write_text(json.dumps(report))
    os.abort()
finish(report, rank, args.out)
