"""A scene's check may add top-level fields to its job's status and a measured timeline
(DESIGN.md: /train's job adds losses, measured … and ``trace``, a URL of Chrome Trace JSON)."""

from __future__ import annotations

from app.jobs.runner import Verdict

TRACE = {"traceEvents": [{"name": "F0", "ph": "X", "ts": 0, "dur": 5, "pid": 0, "tid": 0}],
         "displayTimeUnit": "ms"}


def test_fields_and_trace_reach_the_status(client, runner):
    verdict = Verdict(True, 0.0, "agrees", fields={"losses": [2.5, 2.4], "status": "bogus"},
                      trace=TRACE)
    job = runner.record("pipeline", verdict, world=2, backend="gloo", device="cpu")
    status = client.get(f"/api/verify/jobs/{job.id}").json()
    assert status["losses"] == [2.5, 2.4]
    assert status["status"] == "passed"          # a field never replaces the job's own
    assert status["trace"] == f"/api/verify/jobs/{job.id}/trace"
    got = client.get(status["trace"])
    assert got.status_code == 200
    assert got.headers["content-type"].startswith("application/json")
    assert 'filename="pipeline.trace.json"' in got.headers["content-disposition"]
    assert got.headers["cache-control"] == "no-store"
    assert got.json() == TRACE


def test_a_job_without_a_timeline_says_so(client, runner):
    job = runner.record("pipeline", Verdict(True, 0.0, "agrees"), world=2, backend="gloo",
                        device="cpu")
    status = client.get(f"/api/verify/jobs/{job.id}").json()
    assert "trace" not in status
    missing = client.get(f"/api/verify/jobs/{job.id}/trace")
    assert missing.status_code == 404 and "no measured timeline" in missing.json()["detail"]
    assert client.get("/api/verify/jobs/nope/trace").status_code == 404
