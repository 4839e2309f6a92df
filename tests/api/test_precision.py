"""/precision, /api/precision, /embed/precision, /svg/precision and bad input."""

from __future__ import annotations

import time

import pytest

from tests.api.scene_checks import (NON_FINITE, check_bad_input, check_page_fragment_embed,
                                    check_svg)

QUERIES = ["", "value=65504&format=fp16", "value=-1e-40&format=bf16&steps=1",
           "value=448&format=fp8_e4m3&grad_center=-9&grad_spread=3&steps=64",
           "value=0&init_scale_log2=0&growth_interval=1&fp8_margin=8&frame=5"]


@pytest.mark.parametrize("query", QUERIES)
def test_pages(client, query):
    check_page_fragment_embed(client, "precision", query)


@pytest.mark.parametrize("query", QUERIES[:3])
def test_svg(client, query):
    steps = client.get(f"/api/precision?{query}").json()["loss_scaling"]["steps"]
    check_svg(client, "precision", query, 0)
    check_svg(client, "precision", query, len(steps))


def test_api_contract(client):
    data = client.get("/api/precision?value=0.1&format=bf16&steps=6").json()
    assert [f["key"] for f in data["formats"]] == ["fp32", "tf32", "fp16", "bf16", "fp8_e4m3",
                                                   "fp8_e5m2"]
    bf16 = data["formats"][3]
    assert bf16["rounded"] == 0.10009765625 and bf16["bits"] == "0 01111011 1001101"
    assert bf16["max"] == 3.3895313892515355e38 and bf16["mantissa_bits"] == 7
    assert len(data["loss_scaling"]["steps"]) == 6
    step = data["loss_scaling"]["steps"][0]
    assert {"scale", "found_inf", "skipped", "max_scaled", "scale_after",
            "underflow_fraction"} <= set(step)
    assert data["loss_scaling"]["init_scale"] == 65536
    assert {r["format"] for r in data["fp8"]} == {"fp8_e4m3", "fp8_e5m2"}
    assert len(data["frames"]) == 7
    assert sum(data["gradients"]["histogram"]["counts"]) == data["gradients"]["count"]


def test_out_of_range_formats_are_words_not_infinities(client):
    data = client.get("/api/precision?value=100000&format=fp32").json()
    fp16 = data["formats"][2]
    assert fp16["kind"] == "overflow" and fp16["rounded"] is None
    page = client.get("/precision?value=100000&format=fp32").text
    assert "out of range: |100000| &gt; 65504, the largest FP16" in page
    assert not NON_FINITE.search(page)


BAD = [
    ("value=70000&format=fp16", "value"), ("value=65520&format=fp16", "value"),
    ("value=500&format=fp8_e4m3", "value"), ("value=-62000&format=fp8_e5m2", "value"),
    ("value=3.402e38&format=tf32", "value"),
    ("value=1e39", "value"), ("value=nan", "value"), ("value=inf", "value"),
    ("value=abc", "value"), ("format=fp64", "format"), ("grad_center=3", "grad_center"),
    ("grad_spread=0", "grad_spread"), ("steps=0", "steps"), ("steps=100", "steps"),
    ("init_scale_log2=41", "init_scale_log2"), ("growth_interval=0", "growth_interval"),
    ("fp8_margin=9", "fp8_margin"), ("seed=-1", "seed"),
]


@pytest.mark.parametrize("query,param", BAD)
def test_bad_input_names_the_parameter(client, query, param):
    body = check_bad_input(client, "precision", query, param)
    if "format=" in query and param == "value":
        assert "too large for" in body["message"] and "largest finite value" in body["message"]


@pytest.mark.parametrize("query", ["value=65504&format=fp16", "value=65519&format=fp16",
                                   "value=448&format=fp8_e4m3", "value=3.38e38&format=bf16"])
def test_the_largest_values_are_accepted(client, query):
    assert client.get(f"/api/precision?{query}").status_code == 200


def test_the_page_offers_a_real_run_and_its_command(client):
    page = client.get("/precision?value=-1e-05&steps=6").text
    assert 'hx-post="/verify/precision?value=-1e-05&amp;' in page and "Run on real gloo" in page
    assert ("torchrun --standalone --nproc-per-node 2 workers/precision.py --value=-1e-05 "
            "--grad-center=-4.5 --grad-spread=1.2 --steps 6 --init-scale-log2 16 "
            "--growth-interval 4 --seed 0 --fp8-margin 0 --out report.json") in page
    assert "torch.amp.GradScaler steps the same gradients" in page
    assert "Run on real" not in client.get("/embed/precision").text


def test_verify_is_accepted_and_refuses_bad_input(client, monkeypatch):
    """POST /api/verify/precision answers 202 with a job on 2 ranks. torch is reported missing
    here, so the job stops at once and says what to install instead of starting torchrun."""
    from app.jobs import runner as jobs
    monkeypatch.setattr(jobs, "torch_available", lambda: (False, "install the verify extra"))
    r = client.post("/api/verify/precision?value=0.5&format=fp16&steps=3")
    assert r.status_code == 202 and r.json()["status"] == "queued"
    job_id = r.json()["job"]
    deadline = time.monotonic() + 120
    job = client.get(f"/api/verify/jobs/{job_id}").json()
    while job["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, "the job never finished"
        time.sleep(0.1)
        job = client.get(f"/api/verify/jobs/{job_id}").json()
    assert job["scene"] == "precision" and job["world"] == 2
    assert job["status"] == "error" and "install the verify extra" in job["detail"]
    r = client.post("/api/verify/precision?value=70000&format=fp16")
    assert r.status_code == 422 and r.json()["detail"][0]["param"] == "value"
    assert client.post("/api/verify/precision?steps=0").json()["detail"][0]["param"] == "steps"


def test_the_nearest_value_with_torchs_double_rounding_beside_it(client):
    """Issue 12 item 12: 1.00390625001 is nearest BF16 1.0078125; torch (through FP32) gives 1.
    Values whose nearest is finite are accepted although torch's two roundings overflow."""
    page = client.get("/precision?value=1.00390625001&format=bf16").text
    assert "torch: 1 (rounds through FP32: twice)" in page
    bf16 = next(f for f in client.get("/api/precision?value=1.00390625001").json()["formats"]
                if f["key"] == "bf16")
    assert bf16["rounded"] == 1.0078125 and bf16["via_fp32"] == {
        "rounded": 1.0, "kind": "normal", "differs": True}
    for value, key in (("3.396177516553954e38", "bf16"), ("61439.9999961853", "fp8_e5m2")):
        response = client.get(f"/api/precision?value={value}&format={key}")
        assert response.status_code == 200
        f = next(f for f in response.json()["formats"] if f["key"] == key)
        assert f["kind"] == "normal" and f["via_fp32"]["kind"] == "overflow"


def test_a_histogram_bar_counts_its_values_in_words(client):
    # the hover text of a bar says "1 value", not "1 values"
    import re
    page = client.get("/precision", headers={"HX-Request": "true"}).text
    tips = re.findall(r'data-tip="[^"]*: (\d+) (values?)"', page)
    assert tips and any(n == "1" for n, _ in tips)
    assert all((word == "value") == (n == "1") for n, word in tips), tips
