"""Real launches of 5D layouts on gloo: torchrun's env, torch's DeviceMesh groups and one
all-reduce per group kind agree with the simulation — on two "nodes" of one machine (two
torchrun launchers with a static rendezvous) and on one."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from app.sim.parallelism import ParallelismParams, simulate
from app.jobs.runner import kill_tree
from app.scenes.parallelism.check import CHECK, compare
from tests.workers.launch import ROOT, torchrun

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.workers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_nodes(params: ParallelismParams, out, timeout: float = 240) -> dict:
    """Launch ``params`` as torchrun does on 2 nodes: one launcher per node, node ranks 0 and
    1, meeting at 127.0.0.1 (static rendezvous)."""
    port = free_port()
    nproc = params.world // 2
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    procs = []
    for node in (0, 1):
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                   "--nproc-per-node", str(nproc), "--node-rank", str(node),
                   "--master-addr", "127.0.0.1", "--master-port", str(port),
                   "--max-restarts", "0", str(ROOT / CHECK.worker), *CHECK.args(params),
                   "--backend", "gloo", "--out", str(out)]
        procs.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, start_new_session=True,
                                      text=True))
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=timeout)[0])
    finally:
        for proc in procs:
            kill_tree(proc.pid)
    assert out.exists(), "\n".join(o[-2000:] for o in outputs)
    return json.loads(out.read_text())


def test_two_nodes_tp2_dp2_pp2_ep2(tmp_path):
    params = ParallelismParams(tp=2, dp=2, pp=2, ep=2, experts=2, gpus_per_node=4)
    report = two_nodes(params, tmp_path / "report.json")
    verdict = compare(params, simulate(params), report)
    assert verdict.passed, verdict.detail
    assert "2 nodes of 4" in verdict.detail
    assert {r["env"]["GROUP_RANK"] for r in report["ranks"]} == {"0", "1"}


def test_one_machine_cp2_ep4(tmp_path):
    params = ParallelismParams(tp=2, cp=2, dp=2, pp=1, ep=4, experts=4, gpus_per_node=8)
    report, _ = torchrun(CHECK.worker, params.world, CHECK.args(params),
                         tmp_path / "report.json")
    trace = simulate(params)
    verdict = compare(params, trace, report)
    assert verdict.passed, verdict.detail
    assert verdict.max_abs_diff == 0
    # the report is judged, not trusted: a wrong sum or group fails
    report["ranks"][3]["new_group_sums"]["ep"] += 2
    report["ranks"][5]["mesh_groups"]["tp"] = [4, 6]
    bad = compare(params, trace, report)
    assert not bad.passed and bad.max_abs_diff == 2
    assert "DeviceMesh tp group [4, 6]" in bad.detail
