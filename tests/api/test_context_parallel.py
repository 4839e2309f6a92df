"""/context-parallel over HTTP: the JSON contract of /api/context-parallel (DESIGN.md) against an
independent numpy attention, the page with and without HX-Request, the embed, the SVG of every
frame, bad input with its numbers, the real-run wiring and the size bound of the largest
states."""

from __future__ import annotations

import numpy as np
import pytest

from tests.api.scene_checks import check_bad_input, check_page_fragment_embed, check_svg

DEFAULT = "method=ring&cp=4&seq=16&heads=4&kv_heads=2&head_dim=4&seed=0"


def plain_attention(q, k, v, causal):
    """softmax(QKᵀ/√d + mask)·V, one query row at a time; head h reads kv head h // group."""
    seq, heads, d = q.shape
    group = heads // k.shape[1]
    out = np.zeros_like(q)
    for h in range(heads):
        for i in range(seq):
            keys = range(i + 1) if causal else range(seq)
            s = np.array([q[i, h] @ k[j, h // group] for j in keys]) / np.sqrt(d)
            w = np.exp(s - s.max())
            out[i, h] = (w / w.sum()) @ v[list(keys), h // group]
    return out


CASES = [("ring", 4, 16, 4, 2, True, "none", 2), ("ring", 3, 12, 3, 1, True, "zigzag", 2),
         ("all_gather", 5, 10, 2, 2, False, "none", 2), ("ulysses", 2, 8, 6, 2, True, "none", 2),
         ("hybrid", 4, 16, 4, 2, True, "zigzag", 2), ("ring", 2, 8, 5, 5, False, "zigzag", 2)]


@pytest.mark.parametrize("method,cp,seq,heads,kv,causal,balance,u", CASES)
def test_contract_fields_against_numpy(client, method, cp, seq, heads, kv, causal, balance, u):
    query = (f"method={method}&cp={cp}&seq={seq}&heads={heads}&kv_heads={kv}&head_dim=3&"
             f"causal={'true' if causal else 'false'}&balance={balance}&ulysses={u}&seed=4")
    body = client.get(f"/api/context-parallel?{query}").json()
    q, k, v = (np.array(body[x]) for x in ("q", "k", "v"))
    assert q.shape == (seq, heads, 3) and k.shape == v.shape == (seq, kv, 3)
    want = plain_attention(q, k, v, causal)
    assert np.abs(np.array(body["output"]) - want).max() < 1e-12
    assert body["max_abs_error"] <= 1e-9
    n = seq // cp
    tokens = [r["tokens"] for r in body["ranks"]]
    assert sorted(t for ts in tokens for t in ts) == list(range(seq))
    if balance == "zigzag":
        c = seq // (2 * cp)
        assert tokens[0] == [*range(c), *range(seq - c, seq)]
    else:
        assert tokens[1] == list(range(n, 2 * n))
    d = 3
    formula = {"ring": 2 * (cp - 1) * n * kv * d, "all_gather": 2 * (cp - 1) * n * kv * d,
               "ulysses": (cp - 1) * n * d * (2 * heads + 2 * kv) // cp,
               "hybrid": (u - 1) * n * d * (2 * heads + 2 * kv) // u
               + 2 * (cp // u - 1) * n * kv * d}[method]
    assert all(r["elements_sent"] == formula for r in body["ranks"])
    pairs = sum(i + 1 for i in range(seq)) if causal else seq * seq
    assert sum(r["unmasked_scores"] for r in body["ranks"]) == heads * pairs
    assert body["frames"][0]["step"] == 0 and all(f["caption"] for f in body["frames"])


def test_zigzag_balances_what_contiguous_does_not(client):
    work = {}
    for balance in ("none", "zigzag"):
        body = client.get(f"/api/context-parallel?{DEFAULT}&balance={balance}").json()
        work[balance] = [r["unmasked_scores"] for r in body["ranks"]]
    assert len(set(work["zigzag"])) == 1
    assert work["none"] == sorted(work["none"]) and work["none"][-1] > 5 * work["none"][0]


def test_page_fragment_embed(client):
    check_page_fragment_embed(client, "context-parallel", DEFAULT)
    text = client.get(f"/context-parallel?{DEFAULT}").text
    for words in ("The wall", "The same result, different traffic", "Memory per rank",
                  "workers/context_parallel.py", 'class="chart"'):
        assert words in text


@pytest.mark.parametrize("query,frames", [(DEFAULT, 6), ("method=ulysses&kv_heads=4", 5),
                                          ("method=hybrid&cp=4&ulysses=2&balance=zigzag", 6),
                                          ("method=all_gather", 6)])
def test_svg_of_every_frame(client, query, frames):
    body = client.get(f"/api/context-parallel?{query}").json()
    assert len(body["frames"]) == frames
    for frame in range(frames):
        root = check_svg(client, "context-parallel", query, frame)
        assert root.get("viewBox").startswith("0 0 1280 ")   # drawn for a 16:9 slide's width


@pytest.mark.parametrize("query,param,words", [
    ("method=ulysses&cp=3&heads=4&kv_heads=2&seq=12", "cp",
     "cp (3) must divide heads (4) for ulysses"),
    ("seq=10&cp=4", "seq", "seq (10) must be divisible by cp (4)"),
    ("seq=12&cp=4&balance=zigzag", "seq", "seq (12) must be divisible by 2·cp (8)"),
    ("kv_heads=3&heads=4", "kv_heads", "kv_heads (3) must divide heads (4)"),
    ("method=hybrid&cp=4&ulysses=3&heads=6&kv_heads=6&seq=12", "ulysses",
     "ulysses (3) must divide cp (4)"),
    ("seq=8192&cp=3", "example_seq", "example_seq (16) must be divisible by cp (3)"),
    ("seq=8192&example_seq=300", "example_seq", "from 1 to 256"),
    ("context=8192&example_seq=16", "context", "write seq for context"),
    ("cp=65", "cp", "cp"), ("method=tree", "method", "method"),
    ("head_dim=17", "head_dim", "head_dim ≤ 16"),
])
def test_bad_input_names_the_parameter(client, query, param, words):
    body = check_bad_input(client, "context-parallel", query, param)
    message = next(d["message"] for d in body["detail"] if d["param"] == param)
    assert words in message, message


def test_the_largest_states_stay_under_5_mb(client):
    for query in ("method=ring&cp=64&seq=256&heads=16&kv_heads=16&head_dim=16&balance=zigzag",
                  "method=hybrid&cp=64&ulysses=8&seq=256&heads=16&kv_heads=16&head_dim=16"):
        for path in ("api", "svg", ""):
            url = f"/{path}/context-parallel?{query}" if path else f"/context-parallel?{query}"
            r = client.get(url + ("&frame=40" if path == "svg" and "ring" in query else ""))
            assert r.status_code == 200 and len(r.content) < 5 * 10**6, (url, len(r.content))


def test_real_run_wiring(client):
    text = client.get(f"/context-parallel?{DEFAULT}").text
    assert ("torchrun --standalone --nproc-per-node 4 workers/context_parallel.py --method ring "
            "--ulysses 2 --example-seq 16 --heads 4 --kv-heads 2 --head-dim 4 --causal true --balance "
            "none --seed 0 --out report.json") in text
    assert 'hx-post="/verify/context-parallel?' in text or "Run on real" in text
