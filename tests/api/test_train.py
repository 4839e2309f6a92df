"""/train over HTTP: the page, fragment, embed and SVG; DESIGN.md's /api/train contract; 422s
that name the parameter and the rule (world > 8 for a real run included); the exports; and the
Perfetto traces of /train, /pipeline, /data-parallel and the planner's best mix, read by an
independent reader (tests/trace_reader.py)."""

from __future__ import annotations

import pytest

from tests.api.scene_checks import check_bad_input, check_page_fragment_embed, check_svg
from tests.trace_reader import read

EVENT_KEYS = {"rank", "lane", "kind", "start_s", "dur_s"}
SPLIT = {"step_s", "compute_s", "comm_exposed_s", "bubble_s"}
MIX = "tp=2&cp=2&pp=2&dp=1&ep=2"


@pytest.mark.parametrize("query", ["", MIX, "tp=1&pp=4&dp=2&ep=2&schedule=gpipe&zero=1",
                                   "tp=2&cp=2&pp=2&dp=2&ep=2&recompute=full"])
def test_page_fragment_embed_and_svg(client, query):
    check_page_fragment_embed(client, "train", query)
    frames = len(client.get(f"/api/train?{query}").json()["frames"])
    for frame in (0, frames // 2, frames - 1):
        check_svg(client, "train", query, frame)


def test_the_contract(client):
    body = client.get(f"/api/train?{MIX}").json()
    assert body["world"] == 8
    assert [r["rank"] for r in body["ranks"]] == list(range(8))
    assert all({"tp", "cp", "dp", "pp", "ep"} <= set(r) for r in body["ranks"])
    assert set(body["predicted"]) == SPLIT
    assert set(body["calibration"]) == {"gflops", "kernel_us", "alpha_us", "link_gbs"}
    events = body["events"]
    assert events and all(EVENT_KEYS <= set(e) for e in events)
    lanes = {e["lane"] for e in events}
    assert lanes == {"compute", "tp", "cp", "pp", "ep", "dp"}
    assert {e["group"] for e in events if e["lane"] != "compute"} >= {"tp", "cp", "pp", "ep"}
    assert all("microbatch" in e for e in events if e["kind"] in ("F", "B"))
    p = body["predicted"]
    assert p["compute_s"] + p["comm_exposed_s"] + p["bubble_s"] == pytest.approx(p["step_s"])
    assert max(e["start_s"] + e["dur_s"] for e in events) == pytest.approx(p["step_s"])


@pytest.mark.parametrize("query,param", [
    ("tp=4&heads=6&hidden=48&kv_heads=2", "tp"), ("tp=4&kv_heads=2", "tp"),
    ("pp=3&layers=4", "pp"), ("cp=4&seq=20&tp=1&pp=1", "cp"),
    ("experts=2&ep=4&dp=4&tp=1&pp=1", "ep"), ("dp=8&tp=2&pp=2", "dp"),
])
def test_bad_input_names_the_parameter(client, query, param):
    check_bad_input(client, "train", query, param)


def test_a_real_run_beyond_8_ranks_is_refused_naming_world(client):
    refused = client.post("/api/verify/train?tp=2&cp=2&pp=2&dp=2&ep=2")
    assert refused.status_code == 422
    problem = refused.json()["detail"][0]
    assert problem["param"] == "world" and "at most 8" in problem["message"]


def test_the_page_offers_the_run_its_command_and_the_trace(client):
    page = client.get("/train?nodes=2").text
    assert "workers/train/train.py" in page and "--nnodes 2" in page
    assert 'hx-post="/verify/train?' in page
    assert "/export/train.trace?" in page
    for link in ("/tensor-parallel?", "/context-parallel?", "/pipeline?", "/moe?", "/zero?",
                 "/data-parallel?", "/parallelism?"):
        assert link in page, link
    assert 'class="mrank"' in page                   # /parallelism's mesh, hover groups


def test_the_scene_links_are_accepted_by_their_scenes(client):
    import re
    page = client.get(f"/train?{MIX}").text
    section = page[page.index('id="links-title"'):]
    for href in re.findall(r'<a href="(/[a-z-]+\?[^"]+)"', section)[:7]:
        assert client.get(href.replace("&amp;", "&")).status_code == 200, href


@pytest.mark.parametrize("path", [
    f"/export/train.trace?{MIX}", "/export/train.trace?tp=1&pp=4&dp=2&ep=2&zero=1",
    "/export/pipeline.trace?schedule=zbv&stages=4", "/export/pipeline.trace",
    "/export/data-parallel.trace", "/export/data-parallel.trace?mode=fsdp",
    "/export/data-parallel.trace?mode=dp", "/export/planner.trace",
])
def test_predicted_traces_open_in_an_independent_reader(client, path):
    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    slug = path.split("/")[2].split(".")[0]
    assert f'filename="{slug}.trace.json"' in response.headers["content-disposition"]
    lanes = read(response.content)
    assert lanes and all(events for events in lanes.values())


def test_the_train_trace_has_a_process_per_rank_and_a_thread_per_lane(client):
    body = client.get(f"/api/train?{MIX}").json()
    lanes = read(client.get(f"/export/train.trace?{MIX}").content)
    assert {pid for pid, _ in lanes} == set(range(body["world"]))
    per_rank = {pid: {tid for p, tid in lanes if p == pid} for pid, _ in lanes}
    assert all(len(tids) >= 6 for tids in per_rank.values())   # compute, tp, cp, ep, pp, dp
    total = sum(len(v) for v in lanes.values())
    assert total == len(body["events"])


def test_scenes_without_a_timeline_have_no_trace(client):
    assert client.get("/export/memory.trace").status_code == 404
    assert client.get("/export/train.trace?tp=3").status_code == 422


@pytest.mark.parametrize("ext", ["gif", "pdf", "pptx", "html", "png"])
def test_exports_work(client, ext):
    query = "tp=1&pp=2&dp=1&ep=1&experts=1&microbatches=2&layers=2"
    response = client.get(f"/export/train.{ext}?{query}&frame=2")
    assert response.status_code == 200 and len(response.content) > 1000


def test_the_planner_hands_a_small_mix_to_a_real_run(client):
    import re
    page = client.get("/planner?gpus=8&preset=gpt2&global_batch=32").text
    links = re.findall(r'<a href="(/train\?[^"]+)"', page)
    assert links, "no /train hand-off for an 8-GPU mix"
    assert client.get(links[0].replace("&amp;", "&")).status_code == 200
    assert "/train?" not in client.get("/planner").text          # 512 GPUs: not on this server
