"""A checkpointing run on the visitor's own cluster, brought back (issue 12, item 10): the
torchrun command of the page writes its report through workers/common.py's ``finish`` (run
settings, argv and digest), and POST /api/verify/checkpointing/report judges it like a local
run; an edited one is refused."""

from __future__ import annotations

import json

import pytest

from app.jobs.runner import torch_available
from app.routes.verify import report_digest
from app.scenes.checkpointing.check import CHECK
from app.sim.checkpointing.params import CheckpointParams
from tests.workers.launch import torchrun

pytestmark = [pytest.mark.workers,
              pytest.mark.skipif(not torch_available()[0], reason="needs torch")]
QUERY = "recompute=none&grad_accum=3&dp=2"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    params = CheckpointParams.model_validate(dict(i.split("=") for i in QUERY.split("&")))
    out = tmp_path_factory.mktemp("cluster") / "report.json"
    found, _ = torchrun("workers/checkpointing.py", CHECK.world(params), CHECK.args(params), out)
    return found


def test_the_report_carries_its_run_and_digest(report):
    assert report is not None
    assert report["world"] == 2 and report["backend"] == "gloo" and report["argv"]
    assert report["digest"] == report_digest(report)


def test_an_uploaded_checkpointing_report_is_accepted(client, report):
    r = client.post(f"/api/verify/checkpointing/report?{QUERY}", content=json.dumps(report))
    assert r.status_code == 200, r.text
    job = r.json()
    assert job["status"] == "passed", job.get("detail")
    assert job["source"] == "uploaded" and (job["backend"], job["world"]) == ("gloo", 2)


def test_an_edited_checkpointing_report_is_refused(client, report):
    edited = json.loads(json.dumps(report))
    edited["ranks"][0]["seconds"] = edited["ranks"][0]["seconds"] + 1
    r = client.post(f"/api/verify/checkpointing/report?{QUERY}", content=json.dumps(edited))
    assert r.status_code == 422 and "edited" in r.json()["detail"], r.text
