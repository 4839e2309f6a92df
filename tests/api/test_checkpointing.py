"""/checkpointing, /api/checkpointing, /embed/checkpointing, /svg/checkpointing and bad input."""

from __future__ import annotations

import re

import pytest

from tests.api.scene_checks import check_bad_input, check_page_fragment_embed, check_svg

QUERIES = ["", "preset=gpt3-175b&tp=8&micro_batch=1&recompute=selective",
           "recompute=full&recompute_layers=5&layers=13&grad_accum=3&dp=7",
           "preset=llama3-405b&tp=8&sequence_parallel=true&recompute=none&seq=4096",
           "layers=&hidden=&seq=&frame=9"]


@pytest.mark.parametrize("query", QUERIES)
def test_pages(client, query):
    check_page_fragment_embed(client, "checkpointing", query)


@pytest.mark.parametrize("query", QUERIES[:3])
def test_svg(client, query):
    frames = len(client.get(f"/api/checkpointing?{query}").json()["frames"])
    check_svg(client, "checkpointing", query, 0)
    check_svg(client, "checkpointing", query, frames - 1)


def test_api_contract(client):
    data = client.get("/api/checkpointing?preset=gpt3-175b&tp=8&micro_batch=1&grad_accum=4"
                      "&dp=16").json()
    assert data["model"]["layers"] == 96 and data["model"]["seq"] == 2048
    assert data["global_batch"] == 64 and data["tokens_per_iteration"] == 64 * 2048
    assert round(data["per_layer_bytes"]["none"] / 2**20) == 552   # Korthikanti Table 2
    assert round(data["per_layer_bytes"]["full"] / 2**20) == 48
    assert [s["label"] for s in data["strategies"]][:3] == ["none", "selective", "full"]
    assert data["best_recompute_layers"] == 3
    assert {"kind", "layer", "start_ms", "end_ms", "memory_bytes_after",
            "peak_bytes"} <= set(data["timeline"][0])
    assert data["peak_activation_bytes"] == max(e["peak_bytes"] for e in data["timeline"])
    # blank sizes mean the preset's, and the canonical query leaves them out
    same = client.get("/api/checkpointing?preset=gpt3-175b&tp=8&micro_batch=1&grad_accum=4"
                      "&dp=16&layers=&hidden=").json()
    assert same == data
    page = client.get("/checkpointing?preset=gpt3-175b").text
    assert "layers=None" not in page


BAD = [
    ("tp=5", "tp"), ("preset=llama3-8b&tp=16", "tp"), ("kv_heads=5", "kv_heads"),
    ("kv_heads=24", "kv_heads"), ("hidden=100", "heads"),
    ("recompute_layers=13", "recompute_layers"), ("layers=0", "layers"),
    ("layers=513", "layers"), ("layers=abc", "layers"), ("micro_batch=0", "micro_batch"),
    ("recompute=block", "recompute"), ("grad_accum=0", "grad_accum"), ("dp=0", "dp"),
    ("gpu_tflops=0", "gpu_tflops"), ("gpu_tflops=nan", "gpu_tflops"),
    ("achieved_tflops=0", "gpu_tflops"),                    # the old name, read as the new
    ("preset=gpt5", "preset"), ("seq=0", "seq"), ("sequence_parallel=maybe",
                                                   "sequence_parallel"),
]


@pytest.mark.parametrize("query,param", BAD)
def test_bad_input_names_the_parameter(client, query, param):
    check_bad_input(client, "checkpointing", query, param)


def test_real_run_button_and_command(client):
    page = client.get("/checkpointing?recompute=full&recompute_layers=6&grad_accum=8&dp=8").text
    assert 'hx-post="/verify/checkpointing?' in page and "saved_tensors_hooks" in page
    assert ("torchrun --standalone --nproc-per-node 2 workers/checkpointing.py --family gpt "
            "--layers 4 --hidden 128") in page
    assert "--strategies none selective full full:2 --recompute full --every 2" in page
    assert "a checkpoint every 2 layers" in page and "one 16-sequence batch" in page
    assert re.search(r'href="/checkpointing\?[^"]*preset=gpt2&amp;layers=4&amp;hidden=128', page)


@pytest.mark.parametrize("query,param", [("recompute_layers=13", "recompute_layers"),
                                         ("preset=llama3-8b&tp=16", "tp"),
                                         ("grad_accum=0", "grad_accum")])
def test_real_run_refuses_bad_input_before_starting(client, runner, query, param):
    jobs = len(runner._jobs)
    r = client.post(f"/api/verify/checkpointing?{query}")
    assert r.status_code == 422 and r.json()["detail"][0]["param"] == param
    assert len(runner._jobs) == jobs
