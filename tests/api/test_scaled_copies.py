"""The real run's scaled-down copy of a set-up (memory's scaled_config, checkpointing's
scaled_params) is valid for every accepted set-up, and when it cannot be, the reason is on the
real-run panel and POST /api/verify is a 422: never a server error."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.params import parse
from app.scenes.checkpointing import check as checkpointing_check
from app.scenes.memory.check import FFN_RATIO, scaled_config
from app.sim.checkpointing.params import CheckpointParams
from app.sim.memory.params import MemoryParams
from tests.api.test_fuzz import NoJobs

ISSUE = ["kv_heads=4", "heads=6&kv_heads=2", "hidden=24&ffn=524288"]


@pytest.fixture(scope="module")
def client():
    runner = NoJobs(max_world=8)
    with TestClient(create_app(runner), raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize("query", ISSUE)
@pytest.mark.parametrize("route", ["/checkpointing", "/embed/checkpointing"])
def test_pages_of_the_issue(client, route, query):
    response = client.get(f"{route}?{query}")
    assert response.status_code == 200
    assert "must be" not in response.text


@pytest.mark.parametrize("query", ISSUE)
def test_verify_of_the_issue(client, query):
    response = client.post(f"/api/verify/checkpointing?{query}")
    assert response.status_code == 202, response.text


@pytest.mark.parametrize("kv_heads", [1, 2, 3, 4, 6, 12])
def test_every_kv_heads_of_gpt2_scales(kv_heads):
    small = checkpointing_check.scaled_params(CheckpointParams(kv_heads=kv_heads))
    assert small.hidden % small.heads == 0 and small.heads % small.kv_heads == 0
    assert (small.heads == small.kv_heads) == (kv_heads == 12)   # GQA stays GQA
    mem = scaled_config(parse(MemoryParams, {"preset": "gpt2", "kv_heads": str(kv_heads)})
                        .config()).model
    assert mem.hidden % mem.heads == 0 and mem.heads % mem.kv_heads == 0


def test_a_wide_mlp_is_capped():
    small = checkpointing_check.scaled_params(CheckpointParams(hidden=24, ffn=524288))
    assert small.ffn <= FFN_RATIO * small.hidden


def test_a_copy_that_cannot_be_built_is_a_message(client, monkeypatch):
    def refuse(p):
        CheckpointParams(kv_heads=5)   # raises pydantic's ValidationError, as a bad copy would

    monkeypatch.setattr(checkpointing_check, "scaled_params", refuse)
    page = client.get("/checkpointing?kv_heads=4&dp=3")
    assert page.status_code == 200
    assert "scaled-down copy of this set-up is not a valid one" in page.text
    assert "kv_heads (5) must divide heads (12)" in page.text
    verify = client.post("/api/verify/checkpointing?kv_heads=4&dp=3")
    assert verify.status_code == 422
    assert "scaled-down copy" in verify.json()["message"]
