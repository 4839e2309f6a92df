"""/parallelism over HTTP: the JSON contract against an independent layout, pages, fragments,
embed, SVG frames, the course listing in chapters 1 and 11, bad input, and the largest world."""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.api.scene_checks import check_bad_input, check_page_fragment_embed, check_svg

SLUG = "parallelism"


def layout_by_hand(tp, cp, dp, pp, ep, order, gpus_per_node):
    """Coordinates and groups written from the definition (the first name of ``order`` varies
    fastest; ep lives in a second mesh tp · ep · dp' · pp with cp folded), not from the app."""
    names = order.split("-")
    dense = {"tp": tp, "cp": cp, "dp": dp, "pp": pp, "ep": 1}
    expert = {"tp": tp, "cp": 1, "ep": ep, "dp": dp * cp // ep, "pp": pp}
    world = tp * cp * dp * pp

    def digits(r, sizes):
        out = {}
        for n in names:
            out[n] = r % sizes[n]
            r //= sizes[n]
        return out

    ranks = []
    for r in range(world):
        d, e = digits(r, dense), digits(r, expert)
        ranks.append({"rank": r, "node": r // gpus_per_node, "local_rank": r % gpus_per_node,
                      "tp": d["tp"], "cp": d["cp"], "dp": d["dp"], "pp": d["pp"], "ep": e["ep"]})

    def groups(axis, sizes):
        by_rest = defaultdict(list)
        for r in range(world):
            d = digits(r, sizes)
            by_rest[tuple(v for n, v in d.items() if n != axis)].append(r)
        return sorted(by_rest.values())

    lists = {a: groups(a, dense) for a in ("tp", "cp", "dp", "pp")}
    lists["ep"] = groups("ep", expert)
    return world, ranks, lists


CASES = [
    dict(tp=2, cp=1, dp=2, pp=2, ep=2, order="tp-cp-ep-dp-pp", gpus_per_node=4),
    dict(tp=2, cp=2, dp=2, pp=2, ep=4, order="tp-cp-ep-dp-pp", gpus_per_node=8),
    dict(tp=4, cp=1, dp=4, pp=2, ep=2, order="tp-cp-pp-ep-dp", gpus_per_node=8),
    dict(tp=3, cp=1, dp=3, pp=1, ep=3, order="dp-cp-ep-tp-pp", gpus_per_node=9),
    dict(tp=1, cp=2, dp=3, pp=2, ep=1, order="cp-tp-ep-dp-pp", gpus_per_node=4),
]


def query(case: dict) -> str:
    # tp 3 needs a model whose heads it divides: GPT-2's 12 (Llama 3 8B has 32)
    model = "&preset=gpt2" if 32 % case["tp"] else ""
    return "&".join(f"{k}={v}" for k, v in case.items()) + "&experts=12" + model


@pytest.mark.parametrize("case", CASES)
def test_contract_against_a_layout_by_hand(client, case):
    r = client.get(f"/api/{SLUG}?{query(case)}")
    assert r.status_code == 200, r.text
    body = r.json()
    world, ranks, groups = layout_by_hand(**case)
    assert body["world"] == world
    assert [{k: row[k] for k in ranks[0]} for row in body["ranks"]] == ranks
    for kind, lists in groups.items():
        assert body["groups"][kind] == lists, kind
    gpn = case["gpus_per_node"]
    for t in body["traffic"]:
        assert set(t) >= {"group", "collective", "bytes_per_step", "crosses_nodes", "link"}
        over = body["groups"][t["over"]]
        spans = any(len({r // gpn for r in g}) > 1 for g in over)
        assert t["crosses_nodes"] == spans
        assert t["link"] == ("infiniband" if spans else "nvlink")
        assert t["bytes_per_step"] > 0
    assert [f["step"] for f in body["frames"]] == list(range(len(body["frames"])))


def test_tp_traffic_is_four_ring_all_reduces_per_layer(client):
    """Llama-3 8B, tp 2 without SP, pp 1: 32 layers × m × 4 × 2(t−1)/t × b·s·h·2 bytes."""
    body = client.get(f"/api/{SLUG}?tp=2&dp=2&pp=1&ep=1&experts=1&sequence_parallel=false"
                      "&microbatches=2&seq=1024&gpus_per_node=4").json()
    tp = next(t for t in body["traffic"] if t["group"] == "tp")
    assert tp["collective"] == "all_reduce"
    assert tp["bytes_per_step"] == 32 * 2 * 4 * 1 * (1024 * 4096 * 2)
    assert tp["link"] == "nvlink"


def test_pages_fragment_embed_and_svg_frames(client):
    q = "tp=2&dp=2&pp=2&ep=2"
    check_page_fragment_embed(client, SLUG, q)
    frames = len(client.get(f"/api/{SLUG}?{q}").json()["frames"])
    for k in range(frames):
        check_svg(client, SLUG, q, k)


def test_the_page_shows_the_five_strategies_launch_and_ddp_script(client):
    text = client.get(f"/{SLUG}?tp=2&dp=2&pp=2&ep=2&gpus_per_node=4").text
    for link in ("/data-parallel", "/tensor-parallel", "/pipeline", "/context-parallel", "/moe"):
        assert f'href="{link}"' in text
    assert "--nnodes 2 --nproc-per-node 4 --node-rank 1" in text
    assert "init_device_mesh(&#34;cuda&#34;, (2, 2, 1, 2)" in text or \
        'init_device_mesh("cuda", (2, 2, 1, 2)' in text
    for env in ("NCCL_DEBUG", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"):
        assert env in text
    assert "dist.destroy_process_group()" in text and "model = DDP(model" in text
    assert 'data-groups="tp0 ' in text  # hover data on every rank's cell
    assert "/verify/parallelism?" in text  # the real run is wired


def test_home_lists_the_scene_in_chapters_1_and_11(client):
    text = client.get("/").text
    chapters = text.split('<li class="chapter')[1:]
    assert len(chapters) == 11
    assert 'href="/parallelism"' in chapters[0] and 'href="/parallelism"' in chapters[10]
    assert "upcoming" not in chapters[10].split("</h3>")[0]


def test_the_data_parallel_page_points_to_the_first_ddp_script_here(client):
    assert 'href="/parallelism' in client.get("/data-parallel").text


BAD = [
    ("tp=8&cp=4&dp=64&pp=4&ep=1", "dp", "8,192 must be at most 4,096"),
    ("order=tp-tp-ep-dp-pp", "order", "repeats tp"),
    ("order=tp-cp-ep-dp-xx", "order", "misses pp"),
    ("dp=3&ep=2&gpus_per_node=6&experts=8", "ep", "ep (2) must divide dp·cp (3)"),
    ("tp=0", "tp", "1"),
    ("tp=3&dp=2&pp=1&ep=1&gpus_per_node=4&preset=gpt2", "gpus_per_node",
     "multiple of gpus_per_node (4)"),
    # DESIGN principle 5's own example: the TP groups split the heads of the model they count
    ("tp=3&dp=2&pp=1&ep=1&gpus_per_node=6", "tp", "tp (3) must divide heads (32)"),
    ("tp=16&dp=2&pp=1&ep=2&gpus_per_node=8", "tp", "tp (16) must divide kv_heads (8)"),
    ("tp=32&dp=1&pp=1&ep=1&gpus_per_node=8&preset=gpt2", "tp", "tp (32) must divide heads (12)"),
    ("order=tp-cp-pp-ep-dp&dp=2&cp=2&ep=2&seq=4096", "order", "put pp last"),
]


@pytest.mark.parametrize("q,param,words", BAD)
def test_bad_input_is_a_422_with_the_numbers(client, q, param, words):
    body = check_bad_input(client, SLUG, q, param)
    message = next(d["message"] for d in body["detail"] if d["param"] == param)
    assert words in message, message


@pytest.mark.parametrize("q", ["tp=8&cp=2&dp=32&pp=8&ep=8&gpus_per_node=8",
                               "tp=4&dp=1024&pp=1&ep=8&gpus_per_node=8",
                               "tp=1&dp=1024&pp=4&ep=1&experts=1&gpus_per_node=1"])
def test_the_largest_worlds_stay_small(client, q):
    """Under 5 MB (their time is a `make bench` row, not a test)."""
    for url in (f"/api/{SLUG}?{q}", f"/{SLUG}?{q}", f"/svg/{SLUG}?{q}&frame=4",
                f"/embed/{SLUG}?{q}"):
        r = client.get(url + ("&seq=8192" if "experts=1" in q else ""))
        assert r.status_code == 200
        assert len(r.content) < 5 * 2**20, (url, len(r.content))
    body = client.get(f"/api/{SLUG}?{q}").json()
    assert body["world"] == 4096 and len(body["ranks"]) == 4096
    text = client.get(f"/{SLUG}?{q}").text
    assert "more nodes" in text or "more" in text  # the summarised drawing
    assert text.count('class="mrank"') <= 64
