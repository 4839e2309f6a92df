"""/pipeline: the JSON contract of DESIGN.md, the page with and without htmx, embed, SVG, and
every kind of bad input answered with a 422 that names the parameter."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from app.sim.pipeline.schedules import parse_action

SCHEDULES = ["gpipe", "1f1b", "interleaved_1f1b", "zb_h1", "zbv", "dualpipev"]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_contract(client, schedule):
    r = client.get(f"/api/pipeline?schedule={schedule}&stages=4&microbatches=8&t_comm=0.1")
    assert r.status_code == 200
    body = r.json()
    assert {"ranks", "makespan", "bubble_fraction", "peak_activations"} <= body.keys()
    assert [rank["rank"] for rank in body["ranks"]] == [0, 1, 2, 3]
    busy = 0.0
    v = body["chunks"]
    for rank in body["ranks"]:
        previous_end = 0.0
        for a in rank["actions"]:
            assert set(a) == {"action", "stage", "kind", "microbatch", "start", "end"}
            parsed = parse_action(a["action"])
            assert (parsed.stage, parsed.kind, parsed.microbatch) == (a["stage"], a["kind"], a["microbatch"])
            assert a["kind"] in "FBIW"
            assert a["start"] >= previous_end - 1e-9 and a["end"] >= a["start"]
            previous_end = a["end"]
            busy += a["end"] - a["start"]
            assert a["stage"] in rank["stages"]
        assert len(rank["stages"]) == v
    assert body["makespan"] == pytest.approx(max(a["end"] for rk in body["ranks"] for a in rk["actions"]))
    assert body["bubble_fraction"] == pytest.approx(1 - busy / (4 * body["makespan"]), abs=1e-6)
    assert len(body["peak_activations"]) == 4 and all(isinstance(x, int) for x in body["peak_activations"])
    assert body["frames"][0]["step"] == 0 and body["frames"][-1]["time"] == body["makespan"]


def test_contract_numbers_for_1f1b(client):
    body = client.get("/api/pipeline?schedule=1f1b&stages=4&microbatches=8").json()
    assert body["bubble_fraction"] == pytest.approx(3 / 11)
    assert body["makespan"] == pytest.approx(33)
    assert body["peak_activations"] == [4, 3, 2, 1]
    assert body["formula"]["applies"] and body["formula"]["bubble_fraction"] == pytest.approx(3 / 11)
    assert [a["action"] for a in body["ranks"][3]["actions"][:4]] == ["3F0", "3B0", "3F1", "3B1"]


def test_time_semantics_per_chunk(client):
    """t_f is a rank's whole share of the layers: with v chunks each chunk's F takes t_f / v."""
    body = client.get("/api/pipeline?schedule=interleaved_1f1b&stages=2&microbatches=4&chunks=4&t_f=2&t_b=1&t_w=0.5").json()
    lengths = {a["kind"]: a["end"] - a["start"] for a in body["ranks"][0]["actions"]}
    assert lengths["F"] == pytest.approx(0.5) and lengths["B"] == pytest.approx(1.5 / 4)
    assert body["ranks"][1]["stages"] == [1, 3, 5, 7]
    v = client.get("/api/pipeline?schedule=zbv&stages=3&microbatches=4").json()
    assert [rk["stages"] for rk in v["ranks"]] == [[0, 5], [1, 4], [2, 3]]


def test_chunks_default_to_the_schedules_own(client):
    assert client.get("/api/pipeline?schedule=interleaved_1f1b").json()["chunks"] == 2
    assert client.get("/api/pipeline?schedule=zbv").json()["chunks"] == 2
    assert client.get("/api/pipeline?schedule=gpipe&chunks=").json()["chunks"] == 1
    assert client.get("/api/pipeline?schedule=zbv&chunks=2").status_code == 200


BAD = [
    ("stages=0", "stages", "from 1 to 64"),
    ("stages=65", "stages", "from 1 to 64"),
    ("stages=-3", "stages", "from 1 to 64"),
    ("microbatches=0", "microbatches", "from 1 to 1024"),
    ("microbatches=1025", "microbatches", "from 1 to 1024"),
    ("microbatches=two", "microbatches", "integer"),
    ("t_f=0", "t_f", "(0, 1000]"),
    ("t_f=-1", "t_f", "(0, 1000]"),
    ("t_b=0", "t_b", "(0, 1000]"),
    ("t_w=-0.5", "t_w", "from 0 to 1000"),
    ("t_comm=-1", "t_comm", "from 0 to 1000"),
    ("t_f=nan", "t_f", ""),
    ("t_f=inf", "t_f", ""),
    ("schedule=pipedream", "schedule", "one of gpipe"),
    ("schedule=gpipe&chunks=2", "chunks", "does not apply to gpipe"),
    ("schedule=zb_h1&chunks=4", "chunks", "does not apply to zb_h1"),
    ("schedule=zbv&chunks=3", "chunks", "always runs 2"),
    ("schedule=interleaved_1f1b&chunks=1", "chunks", "from 2 to 8"),
    ("schedule=interleaved_1f1b&chunks=9", "chunks", "from 1 to 8"),
    ("schedule=interleaved_1f1b&stages=4&microbatches=9", "microbatches", "rounds"),
    ("schedule=dualpipev&stages=4&microbatches=7", "microbatches", "at least 2 × stages = 8"),
    ("schedule=interleaved_1f1b&stages=64&chunks=8&microbatches=1024", "microbatches", "at most 65,536"),
    ("schedule=zbv&stages=64&microbatches=1024", "microbatches", "use microbatches ≤ 512"),
]


@pytest.mark.parametrize("query, param, words", BAD)
def test_bad_input_is_a_422_naming_the_parameter(client, query, param, words):
    r = client.get(f"/api/pipeline?{query}")
    assert r.status_code == 422, r.text
    problems = r.json()["detail"]
    assert problems[0]["param"] == param
    assert words in problems[0]["message"]
    page = client.get(f"/pipeline?{query}")
    assert page.status_code == 422 and f'data-problem-param="{param}"' in page.text
    assert client.get(f"/svg/pipeline?{query}").status_code == 422


def test_page_fragment_embed(client):
    query = "schedule=zb_h1&stages=4&microbatches=8"
    page = client.get(f"/pipeline?{query}")
    assert page.status_code == 200
    assert "<html" in page.text and 'id="controls"' in page.text and 'class="deck pipeline-deck"' in page.text
    assert "✓ equal" in page.text           # (p − 1)(t_f + t_b − t_w) checked on the page
    fragment = client.get(f"/pipeline?{query}", headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    assert "<html" not in fragment.text and fragment.text.lstrip().startswith("<section id=\"stage\"")
    assert 'data-frames="' in fragment.text
    embed = client.get(f"/embed/pipeline?{query}")
    assert embed.status_code == 200 and 'id="controls"' not in embed.text
    assert "Open in Shardscope" in embed.text


def test_frames_layers_and_captions_agree(client):
    text = client.get("/pipeline?schedule=1f1b&stages=3&microbatches=4").text
    frames = int(re.search(r'data-frames="(\d+)"', text)[1])
    assert len(re.findall(r'<g class="frame[^"]*" data-frame="\d+"', text)) == frames
    assert len(re.findall(r'<li data-frame="\d+"', text)) == frames
    assert text.count('class="pp ') == 3 * 4 * 2


@pytest.mark.parametrize("query", ["schedule=1f1b", "schedule=zbv&t_comm=0.3&frame=12",
                                   "schedule=1f1b&stages=40&microbatches=100&frame=5"])
def test_svg_export_is_standalone(client, query):
    r = client.get(f"/svg/pipeline?{query}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
    root = ET.fromstring(r.content)
    assert root.tag.endswith("svg") and root.get("width") == "1280"
    assert "var(--" not in r.text    # plain colours, so Inkscape opens it


def test_frame_out_of_range(client):
    r = client.get("/svg/pipeline?schedule=1f1b&frame=999")
    assert r.status_code == 422 and r.json()["detail"][0]["param"] == "frame"


def test_large_page_is_summarised(client):
    r = client.get("/pipeline?schedule=1f1b&stages=64&microbatches=1024")
    assert r.status_code == 200
    assert "131,072 passes on 64 ranks" in r.text
    assert 'class="pp ' not in r.text          # no per-pass drawing
    assert len(r.content) < 400_000


@pytest.mark.parametrize("query, param", [("schedule=zb_h1", "schedule"),
                                          ("schedule=1f1b&stages=4&microbatches=2", "microbatches"),
                                          ("schedule=gpipe&microbatches=200", "microbatches"),
                                          ("schedule=gpipe&stages=16", "world")])
def test_unsupported_real_runs_are_refused_before_starting(client, query, param):
    r = client.post(f"/api/verify/pipeline?{query}")
    assert r.status_code == 422 and r.json()["detail"][0]["param"] == param
    page = client.get(f"/pipeline?{query}")
    assert "Run on real" in page.text and "disabled" in page.text.split("Run on real")[0][-300:]


def test_the_passes_to_come_have_a_hairline_edge_on_a_page(client):
    """Chromium's software rasteriser strokes a 1.2-unit edge around each of a thousand faint
    passes in 150 ms and holds the next frame back meanwhile; one screen pixel (non-scaling) is
    drawn as a hairline. A standalone file keeps its edge in drawing units."""
    query = "schedule=1f1b&stages=4&microbatches=256"
    page = client.get(f"/pipeline?{query}", headers={"HX-Request": "true"}).text
    todo = re.findall(r'<path class="pp-todo"[^>]*>', page)
    assert len(todo) == 2 and all('vector-effect="non-scaling-stroke"' in p
                                  and 'stroke-width="1"' in p for p in todo)
    assert sum(p.count("z") for p in todo) == 4 * 256 * 2     # every F and B pass of 4 ranks
    svg = client.get(f"/svg/pipeline?{query}").text
    standalone = re.findall(r'<path class="pp-todo"[^>]*>', svg)
    assert standalone and all('stroke-width="1.2"' in p and "vector-effect" not in p
                              for p in standalone)
