"""/collective over HTTP: the JSON contract, pages and fragments, embed, SVG, bad input."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
REGENERATE = os.environ.get("SHARDSCOPE_REGEN_GOLDEN") == "1"


def test_contract_fields(client):
    r = client.get("/api/collective?op=all_reduce&algorithm=ring&world=4&count=8&seed=1")
    assert r.status_code == 200
    body = r.json()
    assert len(body["inputs"]) == 4 and all(len(x) == 8 for x in body["inputs"])
    assert len(body["outputs"]) == 4
    assert body["outputs"][0] == [sum(col) for col in zip(*body["inputs"])]
    frames = body["frames"]
    assert [f["step"] for f in frames] == list(range(7))
    for f in frames:
        assert set(f) >= {"step", "caption", "transfers", "buffers"}
        assert len(f["buffers"]) == 4
        for t in f["transfers"]:
            assert set(t) >= {"src", "dst", "elements"}
    stats = body["stats"]
    assert stats["steps"] == 6
    assert stats["elements_sent"] == [12] * 4 and stats["bytes_sent"] == [48] * 4
    assert stats["busbw_factor"] == pytest.approx(1.5)
    assert stats["time_us"] > 0
    assert all(isinstance(v, int) for row in body["inputs"] for v in row)


def test_reduce_gives_null_outputs_off_root_and_unfilled_cells_are_null(client):
    body = client.get("/api/collective?op=reduce&world=4&count=8&root=2").json()
    assert [o is None for o in body["outputs"]] == [True, True, False, True]
    gathered = client.get("/api/collective?op=all_gather&world=4&count=8").json()
    assert gathered["inputs"][0].__len__() == 2
    assert gathered["frames"][0]["buffers"][0][2] is None  # rank 0 has not received chunk 1


def test_all_to_all_output_is_rank_ordered(client):
    body = client.get("/api/collective?op=all_to_all&algorithm=direct&world=3&count=6").json()
    inputs = body["inputs"]
    for r in range(3):
        assert body["outputs"][r] == [v for src in range(3) for v in inputs[src][2 * r:2 * r + 2]]


def test_golden_trace(client):
    """A small ring all-reduce, frame by frame. SHARDSCOPE_REGEN_GOLDEN=1 rewrites the file."""
    body = client.get("/api/collective?op=all_reduce&world=4&count=8&seed=0").json()
    path = GOLDEN / "collective_all_reduce_ring_w4_c8.json"
    if REGENERATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
    assert body == json.loads(path.read_text())


BAD = [
    ("world=1", "world", "from 2 to 64"),
    ("world=65", "world", "from 2 to 64"),
    ("world=four", "world", "integer"),
    ("op=gossip", "op", "all_reduce"),
    ("algorithm=butterfly", "algorithm", "ring"),
    ("op=all_gather&algorithm=tree", "algorithm", "all_gather supports: ring"),
    ("algorithm=halving_doubling&world=6", "world", "power-of-two"),
    ("op=reduce_scatter&world=4&count=10", "count", "divisible by world (4)"),
    ("op=broadcast&world=4&root=5", "root", "0 to 3"),
    ("count=0", "count", "from 1 to 65536"),
    ("world=64&count=65536", "count", "count ≤"),
    ("alpha_us=-1", "alpha_us", "from 0"),
    ("intra_node_gbs=0", "intra_node_gbs", "0.1"),
    ("inter_node_gbs=nan", "inter_node_gbs", "number"),
    ("dtype=int4", "dtype", "fp32"),
    ("seed=-3", "seed", "integer"),
    ("cost_bytes=0", "cost_bytes", "integer"),
]


@pytest.mark.parametrize("query,param,words", BAD)
def test_bad_input_is_a_422_naming_the_parameter(client, query, param, words):
    r = client.get(f"/api/collective?{query}")
    assert r.status_code == 422, r.text
    problems = r.json()["detail"]
    assert any(p["param"] == param and words in p["message"] for p in problems), problems


@pytest.mark.parametrize("query,param,words", BAD[:6])
def test_bad_input_on_pages_is_an_inline_message(client, query, param, words):
    for headers in ({}, {"HX-Request": "true"}):
        r = client.get(f"/collective?{query}", headers=headers)
        assert r.status_code == 422
        assert 'class="problems"' in r.text and f'data-problem-param="{param}"' in r.text
        assert ("<html" in r.text) == (not headers)


def test_page_and_fragment(client):
    page = client.get("/collective?world=5&count=10")
    assert page.status_code == 200 and page.text.startswith("<!doctype html>")
    assert 'id="controls"' in page.text and 'id="stage"' in page.text
    assert 'hx-push-url="true"' in page.text
    fragment = client.get("/collective?world=5&count=10", headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    assert fragment.text.lstrip().startswith('<section id="stage"')
    assert "<html" not in fragment.text and 'id="controls"' not in fragment.text
    assert "5 ranks" in fragment.text
    restore = client.get("/collective?world=5", headers={"HX-Request": "true",
                                                          "HX-History-Restore-Request": "true"})
    assert "<html" in restore.text
    assert "HX-Request" in page.headers["vary"]


def test_page_renders_the_frame_in_the_url(client):
    text = client.get("/collective?world=4&count=8&frame=3").text
    assert 'data-current="3"' in text
    assert '<g class="frame current step" data-frame="3" data-unit="reduce-scatter, round 3 of 3">' in text
    deck, later = text.split('<template class="deck-later">')
    assert 'data-frame="4"' not in deck
    assert ('<g class="frame step" data-frame="4" data-unit="all-gather, round 1 of 3" '
            'data-markup=\'<' in later)  # its elements as text
    assert client.get("/collective?frame=99").status_code == 200  # a page shows the nearest step
    assert client.get("/svg/collective?frame=99").status_code == 422


def test_embed_may_be_framed_anywhere_and_pages_nowhere(client):
    embed = client.get("/embed/collective?world=4")
    assert embed.status_code == 200
    assert "frame-ancestors *" in embed.headers["content-security-policy"]
    assert "x-frame-options" not in embed.headers
    assert 'id="controls"' not in embed.text and "site-header" not in embed.text
    page = client.get("/collective")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("query", ["world=4&count=8&frame=0", "world=8&count=16&frame=7",
                                   "op=all_to_all&world=5&count=10&frame=4",
                                   "algorithm=tree&world=13&count=26&frame=3",
                                   "world=64&count=128&frame=60"])
def test_svg_export_is_a_standalone_svg(client, query):
    r = client.get(f"/svg/collective?{query}")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("image/svg+xml")
    root = ET.fromstring(r.content)  # well-formed XML
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert root.get("width") and root.get("viewBox")
    assert "var(" not in r.text  # Inkscape: concrete colours only
    assert "<style>" in r.text


def test_svg_export_rejects_bad_frames(client):
    r = client.get("/svg/collective?world=4&frame=7")
    assert r.status_code == 422 and r.json()["detail"][0]["param"] == "frame"


def test_no_page_loads_anything_from_another_origin(client):
    for url in ("/", "/collective", "/embed/collective"):
        text = client.get(url).text
        assert 'src="http' not in text and 'href="http' not in text and "//cdn" not in text


def test_home_lists_the_course(client):
    text = client.get("/").text
    assert text.count('<li class="chapter') == 11
    assert 'href="/collective"' in text
    assert "upcoming" not in text  # every chapter has its scenes now


def test_json_of_the_largest_accepted_trace(client):
    """Its time is measured by make bench (the heaviest request)."""
    r = client.get("/api/collective?op=all_reduce&world=64&count=128&seed=9")
    assert r.status_code == 200
    data = r.json()
    assert data["world"] == 64 and len(data["outputs"]) == 64


def test_without_torch_the_button_is_disabled_and_names_the_extra(client, monkeypatch):
    from app.jobs import runner as jobs
    monkeypatch.setattr(jobs, "torch_available",
                        lambda: (False, "install the verify extra: pip install -e '.[verify]'"))
    text = client.get("/collective?world=4", headers={"HX-Request": "true"}).text
    assert "<button type=\"button\" class=\"button\" disabled>Run on real gloo</button>" in text
    assert "pip install -e &#39;.[verify]&#39;" in text


def test_real_runs_are_refused_above_the_server_limit(client):
    text = client.get("/collective?world=16&count=16", headers={"HX-Request": "true"}).text
    assert "limited to 8 ranks" in text
    assert "torchrun --standalone --nproc-per-node 8" in text or "--nnodes 2" in text


def test_the_torchrun_command_spans_nodes(client):
    text = client.get("/collective?world=16&count=16&gpus_per_node=8").text
    assert "--nnodes 2 --nproc-per-node 8" in text and "--rdzv-backend c10d" in text


def test_verify_fragments_answer_in_html(client):
    r = client.post("/verify/collective?world=64&count=64")
    assert r.status_code == 200 and "at most 8" in r.text and "job error" in r.text
    r = client.get("/verify/jobs/does-not-exist")
    assert "no longer kept" in r.text


def test_a_count_below_the_world_suggests_one_valid_count(client):
    """count 8 on 33 ranks: the multiples of 33 nearest 8 that pass every check (not "0 or 33",
    not "33 or 33"); each suggestion names the parameter."""
    r = client.get("/api/collective?op=all_gather&world=33&count=8")
    assert r.status_code == 422
    message = r.json()["detail"][0]["message"]
    assert message.endswith("— try count 33 or 66"), message
    r = client.get("/api/collective?op=all_gather&world=8&count=12")
    assert r.json()["detail"][0]["message"].endswith("— try count 8 or 16")
