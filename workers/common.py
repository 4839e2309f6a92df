"""What every torchrun worker shares: process-group set-up, a guard against orphaned ranks,
gathering results on rank 0, timing, and writing the JSON report.

Workers run as ``torchrun [--standalone | --nnodes …] --nproc-per-node N workers/<scene>.py``.
torchrun sets RANK, LOCAL_RANK and WORLD_SIZE; the backend is NCCL when CUDA devices are
present (each rank on ``cuda:LOCAL_RANK``) and gloo otherwise, unless ``--backend`` says.
An option that carries a field of the scene's params model is made by :func:`add_fields` from
that field (DESIGN principle 13); each worker builds its command line in a ``parser()`` that
tests import (tests/api/test_real_run_commands.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal, get_args, get_origin

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # so `python workers/x.py` and torchrun find the app package
    sys.path.insert(0, str(ROOT))

LAUNCHER = "SHARDSCOPE_LAUNCHER_PID"
"""The launcher's pid, as the process that started this rank wrote it into the environment
(app/jobs/launcher.py for a torchrun job, the server for a pooled rank: app/jobs/pool.py)."""
HEARTBEAT = "SHARDSCOPE_HEARTBEAT"
"""A folder: each rank touches ``rank-<RANK>`` there every 0.25 s (the runner's stall watch)."""


def _prctl_death_signal() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the polling guard below still runs
        pass


def _guard() -> int | None:
    """No rank outlives its launcher, whenever the launcher dies. This runs when the worker
    imports this module — before it imports torch (≈2.5 s, the window where a guard started
    later would find init already its parent): (1) PR_SET_PDEATHSIG, so the kernel kills this
    rank the moment its parent dies; (2) the parent it must have — the launcher's pid from the
    environment, so a launcher that died before (1) is seen now (getppid is then another pid);
    (3) a thread that polls getppid (for systems without prctl) and touches the heartbeat.
    Only in a launched rank (torchrun's LOCAL_RANK, or the launcher's variable): a test that
    imports a worker's parser() is left alone."""
    if LAUNCHER not in os.environ and "LOCAL_RANK" not in os.environ:
        return None
    _prctl_death_signal()
    parent = int(os.environ.get(LAUNCHER) or os.getppid())
    if os.getppid() != parent:
        os._exit(3)

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(3)
            folder = os.environ.get(HEARTBEAT)
            if folder and ARMED.is_set():
                beat = os.path.join(folder, f"rank-{os.environ.get('RANK', '0')}")
                try:
                    if os.path.exists(beat):
                        os.utime(beat)
                    else:  # its pid: a rank that has exited is not a stalled one
                        with open(beat, "w") as f:
                            f.write(str(os.getpid()))
                except OSError:
                    pass
            time.sleep(0.25)

    threading.Thread(target=watch, daemon=True, name="parent-guard").start()
    return parent


ARMED = threading.Event()
"""Set by :func:`start`: the heartbeat begins there, not at import — loading torch's shared
libraries can hold the GIL for seconds on a loaded machine, which is no stall (a rank stopped
before start() is seen by the runner as a stopped process)."""
PARENT = _guard()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from app.params import check_field, describe, field_type  # noqa: E402


def arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                        help="auto: nccl when CUDA devices are present, else gloo")
    parser.add_argument("--out", type=Path, default=None,
                        help="rank 0 writes the JSON report here (default: stdout)")
    parser.add_argument("--hold-seconds", type=float, default=0.0,
                        help="wait this long before starting (lets tests kill a live worker)")
    return parser


def add_fields(parser: argparse.ArgumentParser, model, names: Iterable[str], *,
               choices: Mapping[str, Iterable] | None = None,
               notes: Mapping[str, str] | None = None) -> None:
    """An option for each of the params model's fields ``names`` (DESIGN principle 13): flag
    ``--field-name``, its type, range and default the model's, its help the field's description
    and range (app.params.describe). A Literal gives choices — ``choices[name]`` narrows them to
    what this worker can run —, a bool false by default a ``store_true`` flag; ``notes[name]``
    adds what the option means to this worker."""
    choices, notes = choices or {}, notes or {}
    for name in names:
        field = model.model_fields[name]
        kind = field_type(model, name)
        flag = "--" + name.replace("_", "-")
        store_true = kind is bool and field.default is False
        words = (field.description, None if store_true else describe(model, name),
                 notes.get(name))
        text = "; ".join(w for w in words if w).replace("%", "%%") or None
        if store_true:
            parser.add_argument(flag, action="store_true", help=text)
            continue
        options = {}
        if get_origin(kind) is Literal:
            allowed = tuple(choices.get(name, get_args(kind)))
            if not set(allowed) <= set(get_args(kind)):
                raise ValueError(f"{flag}: {allowed} are not all {describe(model, name)}")
            options["choices"] = allowed
            kind = type(allowed[0])
        elif name in choices:
            raise ValueError(f"{flag}: choices narrow only a Literal field")
        parser.add_argument(flag, type=_field_value(model, name, kind), default=field.default,
                            help=text, **options)


def _field_value(model, name: str, kind: type):
    """argparse's ``type`` for a field: the text as ``kind`` (``true``/``false`` for a bool),
    then validated by the model's field type (its range)."""
    def parse(text: str):
        try:
            if kind is bool and text not in ("true", "false"):
                raise ValueError(text)
            value = text == "true" if kind is bool else kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be {describe(model, name)} "
                                             f"(got {text!r})") from None
        try:
            return check_field(model, name, value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return parse


def run_config(args: argparse.Namespace) -> dict:
    """The command line's own options, for a report: the runner's (--out, --backend,
    --hold-seconds) left out."""
    return {k: v for k, v in vars(args).items() if k not in ("out", "backend", "hold_seconds")}


def start(args: argparse.Namespace, backend: str | None = None
          ) -> tuple[int, int, torch.device, str]:
    """Wait --hold-seconds (so that tests can kill a live worker), then join the process group
    with ``backend`` (default: --backend). Returns (rank, world size, device, backend)."""
    ARMED.set()
    if args.hold_seconds:
        time.sleep(args.hold_seconds)
    guard_parent()
    backend = backend or args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        name = f"{torch.cuda.get_device_name(local_rank)} (CUDA)"
    else:
        device = torch.device("cpu")
        name = "CPU"
    dist.init_process_group(backend)
    RUN.update(argv=own_argv(sys.argv[1:]), config=json.loads(json.dumps(run_config(args), default=str)), backend=backend, world=dist.get_world_size(),
               device=name, torch=torch.__version__)
    return dist.get_rank(), dist.get_world_size(), device, backend


RUN: dict = {}
"""What :func:`start` learnt about this run; :func:`finish` adds it to the report (its
``argv`` less the runner's options, ``config``, ``backend``, ``world``, ``device``, ``torch``) unless the worker wrote its own."""
RUNNER_OPTIONS = ("--out", "--backend", "--hold-seconds")


def own_argv(argv: list[str]) -> list[str]:
    """The command line less the runner's options: what the page's ``worker_argv`` gives, so
    that a report from elsewhere can be matched with the page's query (app/routes/verify.py)."""
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token in RUNNER_OPTIONS:
            skip = True
        elif not token.startswith(tuple(o + "=" for o in RUNNER_OPTIONS)):
            out.append(token)
    return out


def guard_parent() -> None:
    """Exit if the launcher dies. Since the guard runs at import (:func:`_guard`), this only
    starts it for a rank whose environment did not say it was launched."""
    global PARENT
    if PARENT is None:
        os.environ.setdefault(LAUNCHER, str(os.getppid()))
        PARENT = _guard()


def digest(report: dict) -> str:
    """sha256 of the report without its ``digest``, as canonical JSON: a report edited after
    the run no longer matches it (app/routes/verify.py refuses it)."""
    import hashlib
    body = {k: v for k, v in report.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def gather(obj, rank: int, world: int) -> list | None:
    """Every rank's ``obj`` on rank 0 (None elsewhere)."""
    out = [None] * world if rank == 0 else None
    dist.gather_object(obj, out, dst=0)
    return out


def median_us(fn, device: torch.device, repeats: int = 7, warmup: int = 2) -> float:
    """Median wall time of ``fn()`` in µs, all ranks starting each repeat together."""
    times = []
    for i in range(warmup + repeats):
        dist.barrier()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e6)
    times.sort()
    return times[len(times) // 2]


def finish(report: dict | None, rank: int, out: Path | None) -> None:
    """Rank 0 writes the report; every rank leaves the process group."""
    if rank == 0 and report is not None:
        report = {**{k: v for k, v in RUN.items() if k not in report}, **report}
        report["digest"] = digest(report)
        text = json.dumps(report)
        if out is None:
            print(text)
        else:
            tmp = out.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(out)  # the runner never reads half a report
    dist.barrier()
    # let the barrier's last messages drain before any rank closes its connections: gloo may
    # abort a rank whose peer leaves too soon (pytorch/gloo#155); the runner judges a job whose
    # report exists on that report anyway (app/jobs/runner.py, TEARDOWN_NOTE)
    time.sleep(0.1)
    dist.destroy_process_group()
