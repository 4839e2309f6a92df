"""GET /api/planner/ledger (DESIGN.md's contract) — every row recomputed through /api/planner
with its own query, its error and best ratio recomputed from the two answers — and the
/planner/accuracy page that shows it."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest

from app.sim.planner.published import RUNS

METRIC = {"tflops_per_gpu": lambda b, gpus: b["tflops_per_gpu"], "mfu": lambda b, gpus: b["mfu"],
          "tokens_per_s_per_gpu": lambda b, gpus: b["tokens_per_s"] / gpus,
          "step_s": lambda b, gpus: b["step_s"]}


def query(q: dict) -> str:
    return urlencode({k: str(v).lower() if isinstance(v, bool) else v for k, v in q.items()})


@pytest.fixture(scope="module")
def body(client):
    r = client.get("/api/planner/ledger")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    return r.json()


def test_contract(body):
    assert {"rows", "mean_abs_error", "max_abs_error"} <= set(body)
    assert len(body["rows"]) == len(RUNS) >= 25
    for row in body["rows"]:
        assert {"name", "source", "query", "published", "predicted", "error",
                "published_rank", "best_ratio"} <= set(row)
        assert row["published"]["metric"] in METRIC and row["published"]["value"] > 0
    errors = [abs(r["error"]) for r in body["rows"]]
    assert body["mean_abs_error"] == pytest.approx(sum(errors) / len(errors))
    assert body["max_abs_error"] == pytest.approx(max(errors))


@pytest.mark.parametrize("i", range(len(RUNS)), ids=[r.name for r in RUNS])
def test_every_row_through_api_planner(client, body, i):
    row = body["rows"][i]
    q = row["query"]
    pinned = client.get(f"/api/planner?{query(q)}")
    assert pinned.status_code == 200, pinned.text
    best = pinned.json()["best"]
    predicted = METRIC[row["published"]["metric"]](best, q["gpus"])
    assert row["predicted"] == pytest.approx(predicted, rel=1e-9)
    assert row["error"] == pytest.approx(predicted / row["published"]["value"] - 1, rel=1e-9)
    # the planner's best under the paper's techniques: the setup with only those pinned
    run = next(r for r in RUNS if r.name == row["name"])
    free = client.get(f"/api/planner?{query({**run.setup, **run.techniques})}").json()["best"]
    assert row["best_ratio"] == pytest.approx(best["tokens_per_s"] / free["tokens_per_s"],
                                              rel=1e-9)
    assert (row["published_rank"] == 1) == (best["tokens_per_s"] >= free["tokens_per_s"]
                                            * (1 - 1e-9))


def test_caching(client):
    r = client.get("/api/planner/ledger")
    etag = r.headers["etag"]
    assert "max-age" in r.headers["cache-control"]
    again = client.get("/api/planner/ledger", headers={"If-None-Match": etag})
    assert again.status_code == 304 and not again.content
    page = client.get("/planner/accuracy")
    assert client.get("/planner/accuracy", headers={"If-None-Match": page.headers["etag"]}
                      ).status_code == 304


def test_accuracy_page(client, body):
    text = client.get("/planner/accuracy").text
    for row in body["rows"]:
        assert f'data-row="{row["name"]}"' in text
    figure = text[text.index("<figure"):text.index("</figure>")]
    assert len(re.findall(r"<title>", figure)) == len(body["rows"])       # one point a row
    assert "y = x" in figure
    assert f'{body["mean_abs_error"] * 100:.1f} %' in text
    assert f'{body["max_abs_error"] * 100:.1f} %' in text
    # linked from the planner, and every row opens the planner on its own query
    assert 'href="/planner/accuracy"' in client.get("/planner").text
    for href in re.findall(r'<a href="(/planner\?[^"]+)"', text)[:3]:
        assert client.get(href.replace("&amp;", "&")).status_code == 200
