"""The caches' byte budgets hold for a real server process (issue 11): one that has answered 40
different heavy pipeline states (page and JSON) and 30 heavy collective pages stays under 600 MB
resident. Before the caches were bounded by bytes it reached 2.4 GB, +60 MB per new state."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest

from app.caches import LAYERS
from app.jobs.runner import kill_tree
from tests.conftest import ROOT, free_port

LIMIT_MB = 600


def heavy_urls() -> list[str]:
    urls = []
    for i in range(40):
        schedule = ("1f1b", "gpipe", "zb_h1", "interleaved_1f1b", "zbv")[i % 5]
        wide = schedule in ("1f1b", "gpipe", "zb_h1")
        stages = (64, 48, 32, 40)[i % 4] if wide else 32
        microbatches = 1024 - 8 * i if wide else 512 - 32 * (i // 5)  # a multiple of m // p
        query = f"schedule={schedule}&stages={stages}&microbatches={microbatches}"
        urls += [f"/pipeline?{query}", f"/api/pipeline?{query}"]
    for i in range(30):
        op = ("all_to_all", "all_reduce", "all_gather")[i % 3]
        algorithm = "direct" if op == "all_to_all" else "ring"
        world = 64 - i
        count = 2 * world if op == "all_to_all" else world   # the largest counts accepted
        urls.append(f"/collective?op={op}&algorithm={algorithm}&world={world}&count={count}")
    return urls


def test_the_budgets_add_up_under_the_limit():
    assert sum(layer.max_bytes for layer in LAYERS) < (LIMIT_MB - 150) * 2**20


@pytest.fixture
def server():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory",
                             "--host", "127.0.0.1", "--port", str(port), "--log-level",
                             "warning"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(base + "/", timeout=1).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                kill_tree(proc.pid)
                raise RuntimeError("the server did not start")
            time.sleep(0.2)
    yield base, proc
    kill_tree(proc.pid)


def test_a_server_full_of_heavy_states_stays_under_600_mb(server):
    base, proc = server
    resident = []
    for url in heavy_urls():
        with urllib.request.urlopen(base + url, timeout=120) as response:
            assert response.status == 200, url
            response.read()
        resident.append(psutil.Process(proc.pid).memory_info().rss / 2**20)
    assert max(resident) < LIMIT_MB, f"peak {max(resident):.0f} MB, last {resident[-1]:.0f} MB"
