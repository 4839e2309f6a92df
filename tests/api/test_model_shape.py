"""POST /api/model-shape: DESIGN.md's contract, the bounds on an upload (413 over 1 MB, 422
for what is not a config, naming the field), no-store, and nothing of the upload run as
markup; `shardscope plan --hf-config` reads the same files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main as cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"
URL = "/api/model-shape"


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.json")))
def test_contract(client, name):
    body = (FIXTURES / f"{name}.json").read_bytes()
    r = client.post(URL, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    assert r.headers["cache-control"] == "no-store"
    answer = r.json()
    assert {"model_type", "shape", "read", "ignored"} <= set(answer)
    assert {"layers", "hidden", "heads", "kv_heads", "ffn", "vocab"} <= set(answer["shape"])
    config = json.loads(body)
    assert answer["model_type"] == config["model_type"]
    assert set(answer["read"]) | set(answer["ignored"]) == set(config)
    moe = {"experts", "top_k", "shared_experts", "expert_ffn"}
    assert (moe <= set(answer["shape"])) == (config["model_type"] in
                                             ("mixtral", "qwen2_moe", "deepseek_v3"))


@pytest.mark.parametrize("body,status,param,words", [
    (b'{"model_type": "t5", "d_model": 512}', 422, "model_type", "'t5'"),
    (b"not json at all", 422, "body", "not JSON"),
    (b'{"model_type": "llama"', 422, "body", "not JSON"),
    (b'[]', 422, "config", "JSON object"),
    (b'{"model_type": "llama", "num_hidden_layers": 32}', 422, "hidden_size", "missing"),
])
def test_bad_uploads(client, body, status, param, words):
    r = client.post(URL, content=body)
    assert r.status_code == status
    assert r.headers["cache-control"] == "no-store"
    detail = r.json()["detail"]
    assert detail[0]["param"] == param and words in detail[0]["message"]


def test_over_a_megabyte_is_413(client):
    big = b'{"model_type": "llama", "pad": "' + b"x" * (1 << 20) + b'"}'
    r = client.post(URL, content=big)
    assert r.status_code == 413 and "1,048,576" in r.json()["message"]

    def chunks():                     # no Content-Length: counted as it arrives
        for _ in range(20):
            yield b" " * 65536
    r = client.post(URL, content=chunks())
    assert r.status_code == 413


def test_nothing_is_echoed_as_markup(client):
    """An upload's strings come back only as JSON data (never HTML): a hostile model_type is
    named, truncated, inside a JSON string."""
    evil = "<script>alert(1)</script>" * 4
    r = client.post(URL, content=json.dumps({"model_type": evil}).encode())
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/json")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert len(r.json()["message"]) < 300
    config = json.loads((FIXTURES / "llama3-8b.json").read_text())
    config["<img src=x onerror=alert(1)>"] = 1
    r = client.post(URL, content=json.dumps(config).encode())
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"


def test_cli_plan_reads_a_config(capsys):
    rc = cli(["plan", "--hf-config", str(FIXTURES / "mistral-7b-v0.1.json"), "--gpus", "16",
              "--global-batch", "64", "--seq", "4096", "--json"])
    assert rc == 0
    body = json.loads(capsys.readouterr().out)
    assert body["best"]["fits"]
    # explicit options win over the file: the same plan as every field typed out
    common = ["--gpus", "8", "--global-batch", "32", "--seq", "2048", "--json"]
    assert cli(["plan", "--hf-config", str(FIXTURES / "mistral-7b-v0.1.json"), "--layers", "8",
                *common]) == 0
    from_file = json.loads(capsys.readouterr().out)["best"]
    assert cli(["plan", "--preset", "llama3-8b", "--layers", "8", "--hidden", "4096",
                "--heads", "32", "--kv-heads", "8", "--ffn", "14336", "--vocab", "32000",
                *common]) == 0
    assert json.loads(capsys.readouterr().out)["best"] == from_file
    assert cli(["plan", "--hf-config", "/nonexistent/config.json"]) == 2
    assert "--hf-config" in capsys.readouterr().err
