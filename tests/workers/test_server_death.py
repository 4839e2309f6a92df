"""Jobs die with the server (issue 12, item 8): a server killed with SIGKILL — no shutdown code
runs — takes its job's launcher and ranks with it (PR_SET_PDEATHSIG on the server's thread, and
each process's parent check), torchrun-launched or pooled; the next runner that starts removes
the temp folders it left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from app.jobs.runner import clean_orphans, kill_tree, torch_available
from tests.conftest import free_port

pytestmark = pytest.mark.skipif(not torch_available()[0], reason="needs torch")
ROOT = Path(__file__).resolve().parents[2]


def _ranks(pid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.Process(pid).children(recursive=True):
        try:
            line = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if "workers/collective.py" in line or "pool_rank.py" in line or "launcher.py" in line:
            found.append(proc)
    return found


@pytest.mark.parametrize("pool", ["0", "1"], ids=["torchrun", "pool"])
def test_a_killed_servers_job_dies_with_it_and_its_folders_are_cleaned(pool, tmp_path):
    port = free_port()
    # a data directory of its own: this server runs its jobs (app/jobs/election.py)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SHARDSCOPE_VERIFY_POOL": pool,
           "SHARDSCOPE_DATA": str(tmp_path)}
    server = subprocess.Popen([sys.executable, "-m", "uvicorn", "app.main:create_app",
                               "--factory", "--host", "127.0.0.1", "--port", str(port),
                               "--log-level", "warning"], cwd=ROOT, env=env,
                              start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/api/openapi.json", timeout=2).read()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        request = urllib.request.Request(
            base + "/api/verify/collective?op=all_reduce&algorithm=ring&world=2&count=8",
            method="POST")
        assert urllib.request.urlopen(request, timeout=10).status == 202
        deadline = time.monotonic() + 60
        while len(_ranks(server.pid)) < 2:
            assert time.monotonic() < deadline, "the job's processes did not appear"
            time.sleep(0.05)
        family = _ranks(server.pid)
        folders = list(Path(tempfile.gettempdir()).glob(f"shardscope-*-{server.pid}-*"))
        assert folders
        os.kill(server.pid, signal.SIGKILL)
        server.wait(10)
        _, alive = psutil.wait_procs(family, timeout=10)
        alive = [p.pid for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert alive == [], "the job outlived its server"
        assert all(f.exists() for f in folders)        # a SIGKILL runs no clean-up of its own
        clean_orphans()       # as the next runner's start does (another one, started meanwhile
        #                       by a parallel test run, may have done it first: either way)
        assert not any(f.exists() for f in folders)
    finally:
        for proc in _ranks(server.pid) if server.poll() is None else []:
            kill_tree(proc.pid)
        kill_tree(server.pid)
