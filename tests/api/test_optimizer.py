"""/optimizer, /api/optimizer, /embed/optimizer, /svg/optimizer and bad input."""

from __future__ import annotations

import pytest

from tests.api.scene_checks import check_bad_input, check_page_fragment_embed, check_svg

QUERIES = ["", "optimizer=sgd&precision=fp32&size=2&steps=1",
           "optimizer=momentum&precision=mixed&size=7&steps=5&weight_decay=0",
           "optimizer=adam&size=12&steps=32&lr=0.001", "optimizer=adamw&seed=123&frame=4"]


@pytest.mark.parametrize("query", QUERIES)
def test_pages(client, query):
    check_page_fragment_embed(client, "optimizer", query)


@pytest.mark.parametrize("query", QUERIES[1:3])
def test_svg_of_first_and_last_frame(client, query):
    frames = len(client.get(f"/api/optimizer?{query}").json()["frames"])
    check_svg(client, "optimizer", query, 0)
    root = check_svg(client, "optimizer", query, frames - 1)
    assert root.findall(".//{http://www.w3.org/2000/svg}text")


def test_api_contract(client):
    data = client.get("/api/optimizer?optimizer=adamw&precision=mixed&size=5&steps=2").json()
    assert data["optimizer"] == "adamw" and data["precision"] == "mixed"
    assert len(data["final_params"]) == 5 and len(data["final_model_params"]) == 5
    assert set(data["final_states"]) == {"exp_avg", "exp_avg_sq"}
    assert [h["step"] for h in data["history"]] == [0, 1, 2]
    assert data["history"][0]["grad"] is None
    assert data["bytes_per_param"] == {"params": 2, "grads": 2, "optimizer": 12, "total": 16}
    assert len(data["zero"]["per_gpu_bytes"]) == 4
    frame = data["frames"][3]
    assert {"step", "phase", "caption", "changed", "values"} <= set(frame)
    assert set(frame["values"]) == {r["key"] for r in data["rows"]}
    assert data["frames"][0]["values"]["m_hat"] is None  # not computed before the first step
    # the same parameters in another order give the same answer
    again = client.get("/api/optimizer?steps=2&size=5&precision=mixed&optimizer=adamw").json()
    assert again == data


def test_page_shows_the_numbers(client):
    text = client.get("/optimizer?optimizer=adam&precision=mixed&param_count=7500000000"
                      "&dp=64").text
    assert "31.4" in text and "1.88" in text and "120" in text  # ZeRO Table 1
    assert "torch.optim.Adam(params" in text
    assert "Run on real gloo" in text
    assert "state[&#39;exp_avg&#39;]" in text


BAD = [
    ("optimizer=adafactor", "optimizer"), ("optimizer=lion", "optimizer"),
    ("size=1", "size"), ("size=13", "size"), ("size=two", "size"),
    ("steps=0", "steps"), ("steps=65", "steps"),
    ("lr=0", "lr"), ("lr=-0.1", "lr"), ("lr=nan", "lr"), ("lr=inf", "lr"), ("lr=11", "lr"),
    ("optimizer=sgd&lr=10&steps=30", "lr"), ("optimizer=momentum&lr=2&steps=64", "lr"),
    ("beta1=1", "beta1"), ("beta2=1.5", "beta2"), ("momentum=-0.1", "momentum"),
    ("eps=0", "eps"), ("weight_decay=2", "weight_decay"),
    ("optimizer=adamw&lr=5&weight_decay=0.5", "weight_decay"),
    ("precision=fp16", "precision"), ("seed=-1", "seed"),
    ("dp=0", "dp"), ("dp=5000", "dp"), ("param_count=0", "param_count"),
    ("param_count=1e20", "param_count"),
]


@pytest.mark.parametrize("query,param", BAD)
def test_bad_input_names_the_parameter(client, query, param):
    check_bad_input(client, "optimizer", query, param)


def test_verify_refuses_bad_input_and_unknown_jobs(client):
    response = client.post("/api/verify/optimizer?size=1")
    assert response.status_code == 422 and response.json()["detail"][0]["param"] == "size"
    assert client.get("/api/verify/jobs/nope").status_code == 404
