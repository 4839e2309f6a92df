"""The job runner's judgement of how a worker ended, with a stand-in worker
(tests/workers/abort_after_report.py) instead of a scene's."""

from __future__ import annotations

import pytest

from app.jobs.runner import TEARDOWN_NOTE, Check, JobRunner, Verdict, torch_available
from tests.workers.launch import ended

pytestmark = pytest.mark.skipif(not torch_available()[0], reason="needs torch")


def _check(seen: list) -> Check:
    def compare(params, trace, report):
        seen.append(report)
        return Verdict(report["ranks"] == [0, 1], 0.0, "every rank reported.")
    return Check(worker="tests/workers/abort_after_report.py", world=lambda p: 2,
                 args=lambda p: list(p), compare=compare)


@pytest.mark.parametrize("abort", [False, True])
def test_a_crash_after_the_report_is_judged_on_the_report_and_said(abort):
    runner = JobRunner(timeout_s=60)
    seen: list = []
    job = ended(runner.submit("stand-in", _check(seen), ["--abort"] if abort else [], None))
    runner.shutdown()
    assert job.status == "passed", job.to_dict()
    assert seen and seen[0]["ranks"] == [0, 1]
    assert (TEARDOWN_NOTE in job.detail) == abort
    if abort:
        assert "signal 6" in job.detail or "exit code" in job.detail
