"""/api/planner: the contract's fields, bounded size, and bad input as 422 naming the parameter."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app

FIELDS = {"tp", "pp", "dp", "cp", "ep", "zero", "micro_batch", "recompute", "schedule", "fits",
          "peak_bytes", "step_s", "tokens_per_s", "tflops_per_gpu", "mfu", "bound", "reasons"}


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


def test_contract(client):
    r = client.get("/api/planner?preset=llama3-70b&gpus=512&gpu=h100-80&global_batch=1024&seq=8192")
    assert r.status_code == 200 and len(r.content) < 5 * 2**20
    body = r.json()
    assert {"searched", "best", "candidates", "truncated"} <= set(body)
    assert FIELDS <= set(body["best"]) and body["best"] == body["candidates"][0]
    rates = [c["tokens_per_s"] for c in body["candidates"] if c["fits"]]
    assert rates == sorted(rates, reverse=True)


@pytest.mark.parametrize("query,param", [("gpus=0", "gpus"), ("gpu=v100", "gpu"),
                                         ("recompute=some", "recompute"), ("ep=4", "ep"),
                                         ("preset=mixtral-8x7b&hidden=1024", "hidden"),
                                         ("global_batch=-1", "global_batch")])
def test_bad_input_is_422(client, query, param):
    r = client.get(f"/api/planner?{query}")
    assert r.status_code == 422
    assert param in r.text


def test_nothing_fits_keeps_the_contract(client):
    body = client.get("/api/planner?preset=llama3-405b&gpus=8&global_batch=8").json()
    assert body["best"] is None and "no mix fits" in body["message"] and body["candidates"]


@pytest.mark.parametrize("path", ["/planner", "/embed/planner", "/svg/planner?frame=2"])
def test_pages(client, path):
    assert client.get(path).status_code == 200


@pytest.mark.parametrize("query", ["preset=deepseek-v3&gpus=2048&global_batch=4096&seq=4096&tp=16",
                                   "preset=mixtral-8x7b&gpus=64&global_batch=256&seq=4096&tp=4",
                                   "preset=llama3-8b&gpus=64&global_batch=256&seq=4096"])
def test_handoff_links_open(client, query):
    """Every 'Open the best mix in' link answers 200: /parallelism wants a tp that divides its
    model's heads and kv_heads, so an MoE mix is shown on a dense model whose heads tp divides."""
    import re
    text = client.get(f"/planner?{query}").text
    links = re.findall(r'<a href="(/(?:memory|pipeline|tensor-parallel|parallelism)\?[^"]+)"',
                       text)
    assert len(links) == 4
    for link in links:
        r = client.get(link.replace("&amp;", "&"))
        assert r.status_code == 200, (link, r.text[:300])
