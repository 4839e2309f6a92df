"""Who may start a real run (issue 12, item 5) and which reports from a visitor's own cluster are
judged (item 10): cross-site browser submissions are refused, scripts are not, one client cannot
hold every slot, and a report must carry this page's parameters and an intact digest.

The runner here is a stand-in that holds every job until the test lets it go: no process starts."""

from __future__ import annotations

import importlib
import json
import sys
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.jobs.runner import JobRunner
from app.main import SCENES, create_app
from app.params import parse
from app.routes.verify import argv_mismatch, report_digest
ROOT = Path(__file__).resolve().parents[2]
CASES = [(s, {}) for s in SCENES if s.verify is not None] + [
    (next(s for s in SCENES if s.slug == "collective"), {"op": "broadcast", "root": "1"})]


def worker_module(path: str):
    """The worker's module, imported as torchrun runs it (workers/ on the path)."""
    workers = str(ROOT / "workers")
    if workers not in sys.path:
        sys.path.insert(0, workers)
    return importlib.import_module(path.removeprefix("workers/").removesuffix(".py"))

QUERY = "op=all_reduce&algorithm=ring&world=2&count=8"


class HeldRunner(JobRunner):
    """Jobs queue and 'run' until ``release`` is set; nothing is launched."""

    def __init__(self, **kw):
        super().__init__(concurrency=4, **kw)
        self.release = threading.Event()

    def _run(self, job, *args):
        job.status = "running"
        self.release.wait(30)
        self._finish(job, "error", "released by the test")


@pytest.fixture
def held():
    runner = HeldRunner(per_client=2)
    with TestClient(create_app(runner)) as client:
        yield runner, client
    runner.release.set()
    runner.shutdown()


@pytest.mark.parametrize("headers", [
    {"Origin": "https://evil.example"},
    {"Origin": "null"},
    {"Sec-Fetch-Site": "cross-site"},
    {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
])
@pytest.mark.parametrize("path", ["/api/verify/collective", "/verify/collective",
                                  "/api/verify/collective/report"])
def test_a_cross_site_submission_is_refused_with_the_reason(held, headers, path):
    runner, client = held
    r = client.post(f"{path}?{QUERY}", headers=headers, content=b"{}")
    status = r.headers.get("X-Status", str(r.status_code))
    assert status == "403", r.text
    assert "another" in r.text and "curl" in r.text
    assert not runner._jobs  # nothing was queued


@pytest.mark.parametrize("headers", [{}, {"Origin": "http://testserver"},
                                     {"Sec-Fetch-Site": "same-origin",
                                      "Origin": "http://testserver"}])
def test_scripts_and_the_servers_own_pages_may_submit(held, headers):
    runner, client = held
    r = client.post(f"/api/verify/collective?{QUERY}", headers=headers)
    assert r.status_code == 202, r.text


def test_one_client_cannot_hold_every_slot(held):
    runner, client = held
    assert runner.queue_limit > runner.per_client
    for _ in range(runner.per_client):
        assert client.post(f"/api/verify/collective?{QUERY}").status_code == 202
    r = client.post(f"/api/verify/collective?{QUERY}")
    assert r.status_code == 429
    assert "per client" in r.json()["detail"]
    page = client.post(f"/verify/collective?{QUERY}")
    assert page.headers["X-Status"] == "429" and "per client" in page.text
    # another client still gets a slot
    other = create_app(runner)
    with TestClient(other, client=("10.0.0.9", 5000)) as second:
        assert second.post(f"/api/verify/collective?{QUERY}").status_code == 202


@pytest.mark.parametrize("scene,query", CASES,
                         ids=[f"{s.slug}-{i}" for i, (s, _) in enumerate(CASES)])
def test_a_reports_command_line_is_checked_against_the_pages_argv(scene, query):
    """A worker records its command line less the runner's options (common.own_argv): for the
    runner's own launch line that is the page's argv, and a changed value is named."""
    common = worker_module("workers/common.py")
    argv = scene.verify.args(parse(scene.params, query))
    ran = common.own_argv([*argv, "--backend", "gloo", "--out", "/tmp/r.json",
                           "--hold-seconds", "1"])
    assert argv_mismatch(argv, ran) == ""
    changed = [argv[0], "something-else", *argv[2:]]
    assert "something-else" in argv_mismatch(argv, changed)
    assert "lacks" in argv_mismatch(argv, ran[:-1])
    assert "no argv" in argv_mismatch(argv, None)


def test_an_edited_or_foreign_report_is_refused_with_the_reason(held):
    runner, client = held
    report = {"argv": ["--op", "broadcast"], "world": 2, "backend": "nccl"}
    report["digest"] = report_digest(report)
    edited = {**report, "world": 4}
    r = client.post(f"/api/verify/collective/report?{QUERY}", content=json.dumps(edited))
    assert r.status_code == 422 and "edited" in r.json()["detail"]
    undigested = {k: v for k, v in report.items() if k != "digest"}
    r = client.post(f"/api/verify/collective/report?{QUERY}", content=json.dumps(undigested))
    assert r.status_code == 422 and "digest" in r.json()["detail"]
    r = client.post(f"/api/verify/collective/report?{QUERY}", content=b"not json")
    assert r.status_code == 422 and "not JSON" in r.json()["detail"]
    r = client.post(f"/api/verify/collective/report?{QUERY}", content=json.dumps(report))
    assert r.status_code == 422 and "other parameters" in r.json()["detail"]


def test_the_panel_offers_the_upload_and_the_command(client):
    html = client.get(f"/collective?{QUERY}").text
    assert 'hx-post="/verify/collective/report?' in html
    assert 'type="file" name="report"' in html
    assert "torchrun --standalone --nproc-per-node 2 workers/collective.py" in html
