"""/tensor-parallel over HTTP: DESIGN.md's JSON contract, the page with and without htmx, the
embed and SVG exports, and every kind of bad input → 422 naming the parameter."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

API = "/api/tensor-parallel"
BLOCKS = ("column", "row", "mlp", "attention", "embedding")
# (in, out) of the primary weight, for tokens=4, hidden=8, ffn=16, vocab=16
SHAPES = {"column": (8, 16), "row": (16, 8), "mlp": (8, 16), "attention": (8, 24),
          "embedding": (16, 8)}


@pytest.mark.parametrize("sp", ["false", "true"])
@pytest.mark.parametrize("block", BLOCKS)
def test_contract_fields(client, block, sp):
    r = client.get(f"{API}?block={block}&tp=2&tokens=4&hidden=8&ffn=16&heads=4&vocab=16"
                   f"&sequence_parallel={sp}&seed=3")
    assert r.status_code == 200
    body = r.json()
    n_in, n_out = SHAPES[block]
    x, w, out = np.array(body["x"]), np.array(body["weight"]), np.array(body["output"])
    assert x.shape == (4, n_in) and w.shape == (n_in, n_out)
    assert out.shape == ((4, 8) if block != "column" else (4, 16))
    assert isinstance(body["max_abs_error"], float) and body["max_abs_error"] < 1e-12
    assert [s["rank"] for s in body["shards"]] == [0, 1]
    for shard in body["shards"]:
        assert {"rank", "weight", "output"} <= shard.keys()
    assert body["comm"] and all(c.keys() >= {"op", "pass", "elements"} for c in body["comm"])
    assert {c["op"] for c in body["comm"]} <= {"all_reduce", "all_gather", "reduce_scatter"}
    assert {c["pass"] for c in body["comm"]} <= {"forward", "backward"}


def test_column_shards_follow_the_contract(client):
    """Rank r holds columns r·out/tp … of weight and computes x @ W_r."""
    body = client.get(f"{API}?block=column&tp=4&ffn=16").json()
    x, w = np.array(body["x"]), np.array(body["weight"])
    for shard in body["shards"]:
        r = shard["rank"]
        np.testing.assert_array_equal(shard["weight"], w[:, 4 * r:4 * r + 4])
        np.testing.assert_array_equal(shard["output"], x @ w[:, 4 * r:4 * r + 4])
    np.testing.assert_array_equal(body["output"], x @ w)


def test_row_shards_are_partial_sums(client):
    body = client.get(f"{API}?block=row&tp=2&ffn=16").json()
    x, w = np.array(body["x"]), np.array(body["weight"])
    partials = [np.array(s["output"]) for s in body["shards"]]
    np.testing.assert_array_equal(partials[0], x[:, :8] @ w[:8])
    np.testing.assert_array_equal(sum(partials), body["output"])
    assert [c["op"] for c in body["comm"]] == ["all_reduce", "all_gather"]


def test_defaults_answer_quickly_and_are_cached(client):
    first = client.get(API)
    assert first.status_code == 200 and first.headers["content-type"] == "application/json"
    assert client.get(API).content == first.content


@pytest.mark.parametrize("hx", [False, True])
def test_page_and_fragment(client, hx):
    headers = {"HX-Request": "true"} if hx else {}
    r = client.get("/tensor-parallel?block=mlp&tp=2&sequence_parallel=true", headers=headers)
    assert r.status_code == 200
    html = r.text
    assert 'id="stage"' in html and 'class="frame' in html and "data-player" in html
    assert ("<html" in html) is not hx
    assert "reduce-scatter" in html and "Korthikanti" in html
    assert len(re.findall(r'<g class="frame(?: current)?" data-frame=', html)) == len(
        client.get(f"{API}?block=mlp&tp=2&sequence_parallel=true").json()["frames"])


def test_page_opens_at_a_frame(client):
    r = client.get("/tensor-parallel?block=row&frame=2")
    assert r.status_code == 200
    assert 'data-current="2"' in r.text


def test_embed_has_no_chrome_and_may_be_framed(client):
    r = client.get("/embed/tensor-parallel?block=attention&tp=2")
    assert r.status_code == 200
    assert "site-header" not in r.text and "data-player" in r.text
    assert "frame-ancestors *" in r.headers["content-security-policy"]


@pytest.mark.parametrize("frame", [0, 3, 7])
def test_svg_export_is_one_standalone_frame(client, frame):
    r = client.get(f"/svg/tensor-parallel?block=column&tp=2&frame={frame}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
    root = ET.fromstring(r.content)
    frames = root.findall(".//{http://www.w3.org/2000/svg}g[@data-frame]")
    assert [f.get("data-frame") for f in frames] == [str(frame)]
    assert "var(--" not in r.text           # fixed colours, so it opens anywhere


@pytest.mark.parametrize("query,param,words", [
    ("tp=3&ffn=16", "ffn", "tp (3) must divide ffn (16)"),
    ("block=attention&tp=4&heads=6", "heads", "tp (4) must divide heads (6)"),
    ("block=attention&heads=3&hidden=8&tp=1", "hidden", "heads (3) must divide hidden (8)"),
    ("block=embedding&tp=4&vocab=10", "vocab", "tp (4) must divide vocab (10)"),
    ("sequence_parallel=true&tp=4&tokens=6", "tokens", "tp (4) must divide tokens (6)"),
    ("tp=32&ffn=64", "tp", "tp ≤ 16"),
    ("tp=0", "tp", "an integer from 1 to 64"),
    ("tp=two", "tp", "an integer"),
    ("block=conv", "block", "one of column, row, mlp, attention, embedding"),
    ("sequence_parallel=maybe", "sequence_parallel", "true or false"),
    ("seed=-1", "seed", "from 0"),
    ("ffn=16384&hidden=64", "ffn", "at most 16,384"),
    ("block=attention&tokens=200&heads=4&hidden=8", "tokens", "at most 16,384"),
    ("preset=gpt5", "preset", "gpt3-175b"),
    ("gpu_tflops=nan", "gpu_tflops", "a number"),
    ("inter_node_gbs=0", "inter_node_gbs", "0.1"),
])
def test_bad_input_is_422_naming_the_parameter(client, query, param, words):
    r = client.get(f"{API}?{query}")
    assert r.status_code == 422
    problems = r.json()["detail"]
    assert problems[0]["param"] == param
    assert words in problems[0]["message"]
    page = client.get(f"/tensor-parallel?{query}")
    assert page.status_code == 422
    assert f'data-problem-param="{param}"' in page.text
    assert 'id="controls"' in page.text           # the controls still show


def test_bad_frame_is_422(client):
    r = client.get("/svg/tensor-parallel?block=column&frame=99")
    assert r.status_code == 422 and r.json()["detail"][0]["param"] == "frame"


def test_one_rank_communicates_nothing(client):
    body = client.get(f"{API}?tp=1&block=mlp").json()
    assert body["comm"] == [] and body["max_abs_error"] == 0


def test_course_index_lists_the_chapter(client):
    html = client.get("/").text
    assert 'href="/tensor-parallel"' in html


def test_verify_rejects_more_ranks_than_the_server_allows(client):
    r = client.post("/api/verify/tensor-parallel?tp=16&ffn=64")
    assert r.status_code == 422
    assert r.json()["detail"][0]["param"] == "world"
