"""Old permalinks after the parameter groups gave shared names their shared meaning
(docs/parameters.md): MoE's token width is ``token_width`` and ``hidden`` the model's (was
``cost_hidden``); context parallelism's ``seq`` is the model's sequence (was ``context``) and the
worked example's own length ``example_seq`` (was ``seq``); parallelism's ``model`` is ``preset``,
checkpointing's ``achieved_tflops`` ``gpu_tflops``.

* A page, embed, /svg, handout or /export query with an old-only name is a 308 to the new names,
  and the target answers what the new query answers.
* /api answers old queries directly, and what it answers is what it answered before the rename:
  the contract fields of every old query, every number of a whole old permalink (one with an
  old-only name), against SHA-256s recorded at a44eb49, the commit before, under every BLAS
  kernel (tests/api/golden/old_queries.py; SHARDSCOPE_REGEN_GOLDEN=1 re-pins today's code).
* A query that mixes old and new names is a 422 naming the old one and the new name.
* A scenario carried from /memory with a long sequence opens /context-parallel.
"""

from __future__ import annotations

import json
import os
from urllib.parse import parse_qsl, urlsplit

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.api.golden.old_queries import GOLDEN, OLD_ONLY, QUERIES, answers

REGENERATE = os.environ.get("SHARDSCOPE_REGEN_GOLDEN") == "1"


@pytest.fixture(scope="module")
def plain(client):
    """The app without following redirects (the session client follows them)."""
    with TestClient(create_app(), follow_redirects=False) as c:
        yield c


# old query → the new names it means (the rest of the canonical query is every other field)
MOVES = [
    ("moe", "cost_hidden=2048&hidden=16", {"hidden": "2048", "token_width": "16"}),
    ("moe", "cost_hidden=8192", {"hidden": "8192", "token_width": "8"}),
    ("context-parallel", "seq=32&context=65536", {"seq": "65536", "example_seq": "32"}),
    ("context-parallel", "context=8192&cp=2", {"seq": "8192", "example_seq": "16", "cp": "2"}),
    ("parallelism", "model=gpt2&tp=4", {"preset": "gpt2", "tp": "4"}),
    ("checkpointing", "achieved_tflops=250", {"gpu_tflops": "250"}),
]
PATHS = ["/{slug}", "/embed/{slug}", "/svg/{slug}", "/{slug}/handout", "/export/{slug}.html"]


@pytest.mark.parametrize("slug,old,new", MOVES)
@pytest.mark.parametrize("path", PATHS)
def test_an_old_link_moves_to_the_new_names(plain, path, slug, old, new):
    url = path.format(slug=slug)
    r = plain.get(f"{url}?{old}&frame=1")
    assert r.status_code == 308, (url, old, r.status_code)
    target = urlsplit(r.headers["location"])
    assert target.path == url
    pairs = parse_qsl(target.query)
    keys = [k for k, _ in pairs]
    assert keys[-1] == "frame" and len(keys) == len(set(keys)), "the canonical query, then frame"
    got = dict(pairs)
    assert {k: got[k] for k in new} == new
    assert not set(got) & {"cost_hidden", "context", "model", "achieved_tflops"}
    there = plain.get(r.headers["location"])
    assert there.status_code == 200
    direct = plain.get(f"{url}?{'&'.join(f'{k}={v}' for k, v in new.items())}&frame=1")
    assert there.content == direct.content, "the target is the state the new names give"


def test_a_new_query_stays(plain):
    for url in ("/moe?hidden=2048&token_width=16", "/context-parallel?seq=32",
                "/context-parallel?seq=8192&example_seq=24&cp=3", "/parallelism?preset=gpt2"):
        assert plain.get(url).status_code == 200, url


def test_an_old_link_that_the_params_refuse_still_moves(plain):
    r = plain.get("/context-parallel?seq=10&context=65536")   # 10 tokens on 4 ranks
    assert r.status_code == 308
    assert r.headers["location"] == "/context-parallel?example_seq=10&seq=65536"
    there = plain.get(r.headers["location"])
    assert there.status_code == 422 and 'data-problem-param="example_seq"' in there.text


@pytest.mark.parametrize("path", ["/api/{slug}", "/{slug}", "/svg/{slug}"])
@pytest.mark.parametrize("slug,query,old,new", [
    ("context-parallel", "context=65536&example_seq=16", "context", "seq"),
    ("moe", "cost_hidden=4096&token_width=8", "cost_hidden", "hidden"),
    ("parallelism", "model=gpt2&preset=gpt2", "model", "preset"),
])
def test_mixing_old_and_new_names_is_refused(plain, path, slug, query, old, new):
    r = plain.get(f"{path.format(slug=slug)}?{query}")
    assert r.status_code == 422
    if path.startswith("/{slug}"):
        assert f'data-problem-param="{old}"' in r.text and f"write {new} for {old}" in r.text
    else:
        problem = r.json()["detail"][0]
        assert problem["param"] == old and f"write {new} for {old}" in problem["message"]


def test_api_answers_old_queries_as_before(client):
    """Every old query's contract fields, and every number of a whole old permalink, are the
    bytes the commit before the rename answered."""
    now = answers(client)
    if REGENERATE:
        GOLDEN.write_text(json.dumps({q: {part: [d] for part, d in parts.items()}
                                      for q, parts in now.items()},
                                     indent=1, sort_keys=True) + "\n")
    # each query's hashes as the old commit answered them under every BLAS kernel and SIMD
    # path (their floats' last bits depend on the processor: tests/api/golden/old_queries.py)
    before = json.loads(GOLDEN.read_text())
    assert set(now) == set(before) == {f"{s}?{q}" for s, qs in QUERIES.items() for q in qs}
    for key, was in before.items():
        assert now[key]["contract"] in was["contract"], f"{key}: the contract fields changed"
        whole = key.endswith("?") or any(name in key for name in OLD_ONLY)
        if whole:
            assert now[key]["whole"] in was["whole"], f"{key}: the answer changed"


def test_the_old_contract_holds_up_to_the_examples_cap(client):
    """DESIGN.md's q, k, v, output: seq × heads × head_dim and rank tokens over seq — as long
    as seq fits the worked example; the answer says the example's length as ``seq``."""
    for seq in (8, 64, 256):
        body = client.get(f"/api/context-parallel?seq={seq}&cp=4&head_dim=2").json()
        assert body["seq"] == seq and len(body["q"]) == len(body["output"]) == seq
        assert sorted(t for r in body["ranks"] for t in r["tokens"]) == list(range(seq))
        assert body["scale"]["context"] == seq


@pytest.mark.parametrize("seq", [257, 8192, 131072, 1048576])
def test_a_long_sequence_from_another_scene_opens(client, seq):
    """A scenario carried from /memory (seq = 8192 there) opens here: the memory and time
    panels take the model's sequence, the worked example its own example_seq tokens."""
    memory = client.get(f"/api/memory?preset=llama3-8b&seq={seq}")
    assert memory.status_code == 200
    page = client.get(f"/context-parallel?preset=llama3-8b&seq={seq}")
    assert page.status_code == 200
    assert "Tokens of the example" in page.text and "the sequence's" in page.text
    body = client.get(f"/api/context-parallel?preset=llama3-8b&seq={seq}&example_seq=24"
                      f"&cp=3").json()
    assert len(body["q"]) == body["seq"] == 24 and body["scale"]["context"] == seq


def test_the_example_length_shows_only_above_the_cap(client):
    short = client.get("/context-parallel?seq=32").text
    assert 'data-show-above="seq 256" hidden' in short
    long = client.get("/context-parallel?seq=8192").text
    assert 'data-show-above="seq 256">' in long
