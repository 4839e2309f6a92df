"""workers/precision.py on real gloo ranks: torch's casts, torch.amp.GradScaler and torch's float8
quantisation give the simulation's numbers, through the job runner and the page's button; a
report that differs anywhere fails."""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.workers

from app.params import parse  # noqa: E402
from app.scenes.precision import SCENE  # noqa: E402
from app.scenes.precision.check import compare  # noqa: E402
from tests.workers.launch import job_over_http, torchrun  # noqa: E402

STORMY = {"value": "1000", "grad_center": "-1", "grad_spread": "2", "init_scale_log2": "0",
          "growth_interval": "1", "steps": "12"}
"""Gradients up to ~10^6: FP16 overflows at most scales (9 of 12 steps skipped, 3 doublings),
some flush to 0 at the others, unscaled E4M3 overflows (and torch saturates it), and the
typed 1000 does not fit E4M3."""


@pytest.fixture(scope="module")
def stormy(tmp_path_factory):
    """(params, trace, report) of one real 2-rank run of the STORMY case."""
    params = parse(SCENE.params, STORMY)
    out = tmp_path_factory.mktemp("precision") / "report.json"
    report, _ = torchrun(SCENE.verify.worker, SCENE.verify.world(params),
                         SCENE.verify.args(params), out, 180)
    return params, SCENE.simulate(params), report


def test_overflows_skips_underflows_and_saturation_match(stormy):
    params, trace, report = stormy
    steps = trace.scale_steps
    assert 2 <= sum(s.found_inf for s in steps) < len(steps)      # the case is what it claims
    assert any(s.scale_after > s.scale for s in steps)
    assert any(s.underflow > 0 for s in steps) and trace.fp8[0].overflow > 0
    verdict = compare(params, trace, report)
    assert verdict.passed, verdict.detail
    assert report["world"] == 2 and report["backend"] == "gloo"
    assert [r["bounds"] for r in report["ranks"]] == [[0, 2048], [2048, 4096]]
    for rank in report["ranks"]:
        assert [h["skipped"] for h in rank["scaling"]] == [s.found_inf for s in steps]
        assert rank["rounding"]["fp8_e4m3"] == {"measured": True, "overflow": True,
                                                "rounded": None, "bits": None,
                                                "saturated_to": 448.0}
        assert rank["rounding"]["fp16"]["bits"] == "0110001111010000"      # 1000 = 1.953125·2^9
        assert rank["fp8"][0]["saturated"] > 0                              # E4M3, unscaled
        assert not rank["rounding"]["tf32"]["measured"]
    assert verdict.max_abs_diff < 1e-15
    assert len(verdict.report["diff_table"]) == len(steps)
    assert all(row == [0, 0] for row in verdict.report["diff_table"])
    notes = " ".join(verdict.report["notes"])
    assert "saturates: 1000 becomes 448" in notes and "TF32 has no torch dtype" in notes
    assert "skipped the same 9" in verdict.detail


def corrupt(report: dict, edit) -> dict:
    broken = copy.deepcopy(report)
    edit(broken)
    return broken


@pytest.mark.parametrize("edit,words", [
    (lambda r: r["ranks"][1]["scaling"][4].update(scale=r["ranks"][1]["scaling"][4]["scale"] * 2),
     "step 5 on rank 1: the scale S is"),
    (lambda r: r["ranks"][0]["scaling"][2].update(skipped=False), "step 3 on rank 0: skipped is"),
    (lambda r: r["ranks"][0]["scaling"][0].update(
        underflow=r["ranks"][0]["scaling"][0]["underflow"] + 1 / 4096),
     "step 1 on rank 0: the share flushed to 0 is"),
    (lambda r: r["ranks"][1]["scaling"].pop(), "rank 1: ran 11 loss-scaling steps, the simulation 12"),
    (lambda r: r["ranks"][1]["rounding"]["bf16"].update(bits="0100010001111011"),
     "BF16 on rank 1: torch rounds 1000.0 to"),
    (lambda r: r["ranks"][0]["rounding"]["fp8_e4m3"].update(overflow=False, rounded=448.0,
                                                           bits="01111110"),
     "FP8 E4M3 on rank 0: torch says 448"),
    (lambda r: r["ranks"][0]["fp8"][1].update(
        rms_relative_error=r["ranks"][0]["fp8"][1]["rms_relative_error"] * (1 + 1e-9)),
     "FP8 E4M3 · per-tensor on rank 0: RMS relative error"),
    (lambda r: r["ranks"][1]["fp8"][2].update(overflow=0.0),
     "FP8 E5M2 · unscaled on rank 1: overflow is"),
])
def test_a_report_that_differs_anywhere_fails(stormy, edit, words):
    params, trace, report = stormy
    verdict = compare(params, trace, corrupt(report, edit))
    assert not verdict.passed
    assert words in verdict.detail, verdict.detail
    assert "✗" in " ".join(cell for row in verdict.report["table"]["rows"] for cell in row)


def test_the_button_runs_the_default_scene(client, runner):
    """The page's "Run on real gloo" posts to /verify/precision and polls the fragment."""
    html = client.post("/verify/precision").text
    assert 'hx-get="/verify/jobs/' in html
    job = job_over_http(client, html.split('hx-get="/verify/jobs/')[1].split('"')[0], 80)
    assert job["status"] == "passed", job["detail"]
    assert job["scene"] == "precision" and job["world"] == 2 and job["backend"] == "gloo"
    assert job["max_abs_diff"] < 1e-15
    rows = job["report"]["table"]["rows"]
    assert rows[0] == ["0.1 → FP32", "0.100000001", "0.100000001",
                       "✓ same bits: 0 01111011 10011001100110011001101"]
    assert rows[1][2:] == ["not measurable on a CPU", "— not measured"]
    assert all(row[3].startswith("✓") for row in rows if row[0] != "0.1 → TF32")
    assert len(job["report"]["diff_table"]) == 24
    done = client.get(f"/verify/jobs/{job['job']}").text
    assert "Passed" in done and "What torch computed, beside the simulation" in done
    assert "torch.amp.GradScaler" in done and "skipped the same 5" in done
    assert not runner.live_pids()


@pytest.mark.parametrize("value,label,nearest", [
    ("1.0004882812500009", "FP16", "1.00097656"),   # 1 + 2^-11 + ~9e-16
    ("1.00390625001", "BF16", "1.0078125"),         # issue 12 item 12
])
def test_torch_rounds_a_float64_twice_and_the_check_knows(client, value, label, nearest):
    """Just above the midpoint of two values of the format: rounded once (the simulation) it
    goes up; torch rounds it to FP32 first — onto the midpoint — and then to the even neighbour
    below, 1.0. The check holds torch to its own two roundings (it passes), and the table and
    notes say where the nearest value is and why torch's differs."""
    response = client.post(f"/api/verify/precision?value={value}&steps=2")
    assert response.status_code == 202
    job = job_over_http(client, response.json()["job"], 80)
    assert job["status"] == "passed", job["detail"]
    row = next(r for r in job["report"]["table"]["rows"] if r[0].endswith(f"→ {label}"))
    assert row[1:3] == [f"1 through FP32 (nearest: {nearest})", "1"]
    assert row[3].startswith("✓ same bits")
    notes = " ".join(job["report"]["notes"])
    assert f"to FP32 first and then to {label}, rounding twice" in notes
    assert f"nearest {label} value is {nearest}" in notes
