"""A report from the visitor's own run, brought back (issue 12, item 10): the page's torchrun
command writes it; the server judges it as a local run, and refuses one for other parameters or
one edited after the run, with the reason."""

from __future__ import annotations

import json

import pytest

from app.jobs.runner import torch_available
from app.routes.verify import report_digest
from tests.workers.launch import torchrun

pytestmark = pytest.mark.skipif(not torch_available()[0], reason="needs torch")
QUERY = "op=all_reduce&algorithm=ring&world=2&count=8"
ARGV = ["--op", "all_reduce", "--algorithm", "ring", "--count", "8", "--seed", "0",
        "--root", "0"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("cluster") / "report.json"
    found, _ = torchrun("workers/collective.py", 2, ARGV, out)
    return found


def test_the_report_carries_its_run(report):
    assert report["argv"] == ARGV and report["world"] == 2 and report["backend"] == "gloo"
    assert report["device"] == "CPU" and report["digest"] == report_digest(report)


def test_a_brought_back_report_gets_the_verdict_panel(client, report):
    r = client.post(f"/api/verify/collective/report?{QUERY}", content=json.dumps(report))
    assert r.status_code == 200, r.text
    job = r.json()
    assert job["status"] == "passed" and job["source"] == "uploaded"
    assert (job["backend"], job["world"], job["device"]) == ("gloo", 2, "CPU")
    assert client.get(f"/api/verify/jobs/{job['job']}").json()["status"] == "passed"
    page = client.post(f"/verify/collective/report?{QUERY}",
                       files={"report": ("report.json", json.dumps(report), "application/json")})
    assert "✓ Passed" in page.text and "Your report: 2 ranks on gloo, CPU" in page.text


def test_other_parameters_or_edited_numbers_are_refused_or_fail(client, report):
    r = client.post("/api/verify/collective/report?op=all_reduce&algorithm=ring&world=2&count=16",
                    content=json.dumps(report))
    assert r.status_code == 422 and "--count" in r.json()["detail"], r.text
    case = report["cases"][0] if "cases" in report else report
    edited = json.loads(json.dumps(report))
    target = edited["cases"][0] if "cases" in edited else edited
    target["torch_output"][0][0] = case["torch_output"][0][0] + 1
    r = client.post(f"/api/verify/collective/report?{QUERY}", content=json.dumps(edited))
    assert r.status_code == 422 and "edited" in r.json()["detail"]
    edited["digest"] = report_digest(edited)  # a forger who recomputes it: the numbers fail
    r = client.post(f"/api/verify/collective/report?{QUERY}", content=json.dumps(edited))
    assert r.status_code == 200 and r.json()["status"] == "failed"
