"""/moe over HTTP: the JSON contract of /api/moe (DESIGN.md), the page with and without
HX-Request, the embed, the SVG of every frame, bad input, the real-run wiring, and the
heaviest accepted states within the time and size budgets."""

from __future__ import annotations

import math

import pytest

from tests.api.scene_checks import check_bad_input, check_page_fragment_embed, check_svg

DEFAULT = "tokens=16&experts=8&top_k=2&ep=2"


def test_contract_fields(client):
    body = client.get(f"/api/moe?{DEFAULT}&capacity_factor=1&seed=0").json()
    T, E, k, ep = 16, 8, 2, 2
    assert len(body["logits"]) == T and all(len(row) == E for row in body["logits"])
    assert [t["token"] for t in body["topk"]] == list(range(T))
    for t in body["topk"]:
        row = body["logits"][t["token"]]
        assert len(t["experts"]) == k == len(t["weights"])
        # experts by descending probability (= descending logit)
        assert [row[e] for e in t["experts"]] == sorted((row[e] for e in t["experts"]),
                                                        reverse=True)
    assert body["capacity"] == math.ceil((T / ep) * k / E * 1.0)
    assert sum(body["expert_tokens"]) == T * k - len(body["dropped"])
    assert all(set(d) == {"token", "expert"} for d in body["dropped"])
    assert len(body["dispatch"]) == ep and all(len(r) == ep for r in body["dispatch"])
    assert sum(map(sum, body["dispatch"])) == sum(body["expert_tokens"])
    assert body["aux_loss"] > 0 and body["z_loss"] > 0
    frames = body["frames"]
    assert [f["step"] for f in frames] == list(range(8))
    assert all(f["caption"] and "transfers" in f for f in frames)
    assert str(body["capacity"]) in frames[3]["caption"]
    assert body["max_abs_error"] < 1e-12


def test_dispatch_follows_the_placement(client):
    """token t on rank t // (T/ep), expert e on rank e // (E/ep): the matrix counts kept pairs."""
    body = client.get("/api/moe?tokens=12&experts=6&top_k=2&ep=3&capacity_factor=1.5").json()
    dropped = {(d["token"], d["expert"]) for d in body["dropped"]}
    want = [[0] * 3 for _ in range(3)]
    for t in body["topk"]:
        for e in t["experts"]:
            if (t["token"], e) not in dropped:
                want[t["token"] // 4][e // 2] += 1
    assert body["dispatch"] == want


def test_dropless_keeps_everything(client):
    body = client.get(f"/api/moe?{DEFAULT}&capacity_factor=0").json()
    assert body["capacity"] is None and body["dropped"] == []
    assert sum(body["expert_tokens"]) == 32
    assert "dropless" in body["frames"][3]["caption"]


def test_losses_follow_their_formulas(client):
    body = client.get(f"/api/moe?{DEFAULT}&aux_loss_coeff=0.5&z_loss_coeff=0.25").json()
    E = 8
    f = body["assignment_share"]
    P = body["mean_probs"]
    assert body["aux_loss"] == pytest.approx(0.5 * E * sum(a * b for a, b in zip(f, P)))
    lse = [max(r) + math.log(sum(math.exp(v - max(r)) for v in r)) for r in body["logits"]]
    assert body["z_loss"] == pytest.approx(0.25 * sum(v * v for v in lse) / len(lse))


def test_page_fragment_embed(client):
    check_page_fragment_embed(client, "moe", DEFAULT)
    text = client.get(f"/moe?{DEFAULT}").text
    assert "Load balancing" in text and "EP × DP × TP × PP" in text
    assert "Mixtral 8×7B" in text and "DeepSeek-V3" in text and "Qwen1.5-MoE-A2.7B" in text
    assert 'class="chart"' in text


@pytest.mark.parametrize("frame", range(8))
def test_svg_of_every_frame(client, frame):
    root = check_svg(client, "moe", DEFAULT, frame)
    assert root.get("viewBox").startswith("0 0 1280 ")   # drawn for a 16:9 slide's width


@pytest.mark.parametrize("query", ["capacity_factor=0", "ep=1", "ep=8&tokens=64&experts=64&top_k=8",
                                   "router=topk_softmax&drop_policy=position&top_k=1",
                                   "tokens=4096&experts=16&token_width=2&ep=16",
                                   "tokens=128&experts=256&top_k=8&ep=64&token_width=2"])
def test_other_states_render(client, query):
    check_svg(client, "moe", query, 3)
    check_svg(client, "moe", query, 7)
    assert client.get(f"/moe?{query}").status_code == 200


def test_the_page_shows_the_frame_in_the_url(client):
    text = client.get(f"/moe?{DEFAULT}&frame=4").text
    assert 'data-current="4"' in text
    assert '<g class="frame current step" data-frame="4" data-unit="MoE layer stage 4 of 7: dispatch all-to-all">' in text
    deck, later = text.split('<template class="deck-later">')
    assert 'data-frame="5"' not in deck and 'data-frame="5"' in later


BAD = [
    ("ep=3", "ep", "ep (3) must divide experts (8)"),
    ("ep=4&tokens=10", "tokens", "ep (4) must divide tokens (10)"),
    ("top_k=9", "top_k", "top_k (9) must be at most experts (8)"),
    ("tokens=0", "tokens", "1"),
    ("tokens=5000", "tokens", "4096"),
    ("experts=1", "experts", "2"),
    ("experts=512", "experts", "256"),
    ("capacity_factor=-1", "capacity_factor", "0"),
    ("drop_policy=random", "drop_policy", "probs"),
    ("router=sigmoid", "router", "softmax_topk"),
    ("skew=9", "skew", "8"),
    ("token_width=65", "token_width", "64"),
    ("tokens=4096&experts=32&token_width=8", "tokens", "131,072"),
    ("tokens=16&experts=256&token_width=64&ep=1", "token_width", "expert weights"),
    ("tokens=64&experts=64&token_width=64&ep=1", "token_width", "dense reference"),
]


@pytest.mark.parametrize("query,param,words", BAD)
def test_bad_input_is_a_422_naming_the_parameter(client, query, param, words):
    body = check_bad_input(client, "moe", query, param)
    message = next(d["message"] for d in body["detail"] if d["param"] == param)
    assert words in message, message


def test_real_run_is_wired_and_the_torchrun_line_shown(client):
    text = client.get(f"/moe?{DEFAULT}", headers={"HX-Request": "true"}).text
    assert "Check it on a real engine" in text
    assert "torchrun --standalone --nproc-per-node 2 workers/moe.py --tokens 16 --experts 8" in text
    assert "--out report.json" in text
    r = client.post("/api/verify/moe?ep=1")
    assert r.status_code == 422 and r.json()["detail"][0]["param"] == "ep"
    r = client.post("/api/verify/moe?ep=16&experts=16")
    assert r.status_code == 422


def test_home_lists_the_chapter(client):
    text = client.get("/").text
    assert 'href="/moe"' in text and "Mixture of experts" in text


HEAVY = ["tokens=4096&experts=16&token_width=2&top_k=2&ep=16&router_steps=32",
         "tokens=4096&experts=8&token_width=2&top_k=8&ep=8&capacity_factor=0&router_steps=32",
         "tokens=128&experts=256&top_k=16&ep=64&token_width=2&router_steps=32",
         "tokens=512&experts=128&top_k=16&ep=64&token_width=4&router_steps=32",
         "tokens=1024&experts=64&top_k=8&ep=64&token_width=8&router_steps=32"]


@pytest.mark.parametrize("query", HEAVY)
def test_heaviest_states_stay_within_budget(client, query):
    """Every accepted state: each answer under 5 MB (the time, < 500 ms, is a `make bench`
    row, not a test)."""
    for url in (f"/api/moe?{query}", f"/moe?{query}", f"/svg/moe?{query}&frame=4",
                f"/embed/moe?{query}"):
        r = client.get(url)
        assert r.status_code == 200, (url, r.text[:300])
        assert len(r.content) < 5e6, (url, len(r.content))


@pytest.mark.parametrize("skew", ["1.5", "0.5", "2"])
def test_no_logit_reads_minus_zero(client, skew):
    # a logit that rounds to zero is written "0.0" (app/humanize.py fixed), never "−0.0"
    import re
    from app.humanize import fixed
    assert fixed(-0.04, 1) == "0.0" and fixed(-0.05001, 1) == "−0.1" and fixed(0.04, 1) == "0.0"
    page = client.get(f"/moe?skew={skew}", headers={"HX-Request": "true"}).text
    assert not re.search(r">[−-]0\.0<", page)
