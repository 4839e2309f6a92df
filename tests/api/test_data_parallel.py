"""/data-parallel over HTTP: the same parameters as the page, fragments, embed, SVG, and bad
input answered with a 422 that names the parameter."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest


def test_json_has_the_timeline_and_the_tiny_model(client):
    d = client.get("/api/data-parallel?mode=ddp&dp=4&bucket_mb=25&preset=gpt2").json()
    assert d["mode"] == "ddp" and len(d["buckets"]) == 13
    assert 0 < d["hidden_fraction"] < 1 and d["step_us"] > d["compute_us"]
    assert len(d["final_params"]) == 12
    assert all(v < 1e-13 for v in d["max_difference_from_ddp"].values())
    assert d["torchrun"]["world_size"] == 4 and len(d["frames"]) <= 24
    assert [b["bucket_mb"] for b in d["bucket_sweep"]] == sorted(b["bucket_mb"] for b in d["bucket_sweep"])


@pytest.mark.parametrize("mode", ["dp", "ddp", "fsdp"])
@pytest.mark.parametrize("hx", [False, True])
def test_page_and_fragment(client, mode, hx):
    r = client.get(f"/data-parallel?mode={mode}", headers={"HX-Request": "true"} if hx else {})
    assert r.status_code == 200 and 'id="stage"' in r.text
    assert ("<html" in r.text) is not hx
    assert "LOCAL_RANK" in r.text and "first_ddp.py" in r.text


def test_embed_and_svg(client):
    assert "site-header" not in client.get("/embed/data-parallel?mode=fsdp").text
    r = client.get("/svg/data-parallel?mode=fsdp&frame=5")
    assert r.status_code == 200 and ET.fromstring(r.content).tag.endswith("svg")
    assert client.get("/svg/data-parallel?frame=-1").status_code == 422


BAD = [
    ("bucket_mb=0", "bucket_mb"), ("bucket_mb=-3", "bucket_mb"), ("bucket_mb=x", "bucket_mb"),
    ("dp=0", "dp"), ("intra_node_gbs=0", "intra_node_gbs"), ("inter_node_gbs=0", "inter_node_gbs"),
    ("mode=dp&dp=16&gpus_per_node=8", "dp"), ("mode=tp", "mode"), ("dtype=fp8", "dtype"),
    ("preset=gpt5", "preset"), ("prefetch=maybe", "prefetch"), ("dp=1024&micro_batch=8", "micro_batch"),
    ("gpu_tflops=0", "gpu_tflops"),
]


@pytest.mark.parametrize("query,param", BAD)
def test_bad_input_is_a_422_naming_the_parameter(client, query, param):
    r = client.get(f"/api/data-parallel?{query}")
    assert r.status_code == 422
    assert r.json()["detail"][0]["param"] == param
    page = client.get(f"/data-parallel?{query}")
    assert page.status_code == 422 and f'data-problem-param="{param}"' in page.text


def test_extremes_are_answered(client):
    for query in ("preset=llama3-405b&dp=1024&micro_batch=1&bucket_mb=0.25",
                  "preset=gpt3-175b&mode=fsdp&prefetch=false&dp=64", "mode=dp&dp=1",
                  "mode=dp&dp=64&gpus_per_node=64", "bucket_mb=4096"):
        assert client.get(f"/api/data-parallel?{query}").status_code == 200
        assert client.get(f"/data-parallel?{query}").status_code == 200


def test_course_index_lists_both_chapters(client):
    home = client.get("/").text
    assert 'href="/data-parallel"' in home and 'href="/zero"' in home
