"""Hugging Face config.json files of seven families (tests/fixtures/hf_configs/, written from
the released configs' published values) read as shapes, against the shapes and parameter
counts their model cards and papers publish."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.sim.planner.hf_config import ConfigError, shape_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"

CASES = [
    # file, shape, published parameters, tolerance — sources: the model cards
    ("llama3-8b", dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256),
     8.03e9, 0.002),                                                  # Meta Llama 3 8B
    ("mistral-7b-v0.1", dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336,
                             vocab=32000), 7.24e9, 0.002),            # Mistral 7B
    ("qwen2-7b", dict(layers=28, hidden=3584, heads=28, kv_heads=4, ffn=18944, vocab=152064),
     7.62e9, 0.002),                                                  # Qwen2-7B (7.6B)
    ("mixtral-8x7b-v0.1", dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336,
                               vocab=32000, experts=8, top_k=2, shared_experts=0,
                               expert_ffn=14336), 46.7e9, 0.005),     # Jiang et al. 2024
    ("qwen1.5-moe-a2.7b", dict(layers=24, hidden=2048, heads=16, kv_heads=16, ffn=5632,
                               vocab=151936, experts=60, top_k=4, shared_experts=1,
                               expert_ffn=1408), 14.3e9, 0.005),      # Qwen team 2024
    ("deepseek-v3", dict(layers=61, hidden=7168, heads=128, kv_heads=128, ffn=18432,
                         vocab=129280, experts=256, top_k=8, shared_experts=1,
                         expert_ffn=2048), 671e9, 0.005),             # DeepSeek-AI 2024
    ("gpt2", dict(layers=12, hidden=768, heads=12, kv_heads=12, ffn=3072, vocab=50257),
     124e6, 0.005),                                                   # Radford et al. 2019
]


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@pytest.mark.parametrize("name,shape,params,rel", CASES, ids=[c[0] for c in CASES])
def test_published_configs_read_as_their_shapes(name, shape, params, rel):
    config = load(name)
    answer = shape_of(config)
    assert answer.model_type == config["model_type"]
    assert answer.shape == shape
    assert answer.extra["param_count"] == pytest.approx(params, rel=rel)
    # every key is read or ignored, none both
    assert set(answer.read) | set(answer.ignored) == set(config)
    assert not set(answer.read) & set(answer.ignored)
    assert "rope_theta" in answer.ignored or "rope_theta" not in config


def test_deepseek_v3_reads_mla_and_its_node_limit():
    answer = shape_of(load("deepseek-v3"))
    assert answer.extra["mla"] == {"q_lora_rank": 1536, "kv_lora_rank": 512,
                                   "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                                   "v_head_dim": 128}
    assert answer.extra["node_limit"] == 4 and answer.extra["dense_layers"] == 3
    assert answer.extra["preset"] == "deepseek-v3"


BAD = [
    ({"model_type": "bert", "hidden_size": 768}, "model_type", "'bert'"),
    ({"hidden_size": 768}, "model_type", "missing"),
    ([1, 2], "config", "JSON object"),
    ({"model_type": "llama", "hidden_size": 4096}, "num_hidden_layers", "missing"),
    ({**json.loads((FIXTURES / "llama3-8b.json").read_text()), "num_key_value_heads": 5},
     "num_key_value_heads", "(5) must divide the attention heads (32)"),
    ({**json.loads((FIXTURES / "llama3-8b.json").read_text()), "hidden_size": "4096"},
     "hidden_size", "positive integer"),
    ({**json.loads((FIXTURES / "llama3-8b.json").read_text()), "num_hidden_layers": 10**6},
     "num_hidden_layers", "more than the largest layers"),
    ({**json.loads((FIXTURES / "mixtral-8x7b-v0.1.json").read_text()),
      "num_experts_per_tok": 9}, "num_experts_per_tok", "at most the experts (8)"),
]


@pytest.mark.parametrize("config,key,words", BAD)
def test_bad_configs_name_the_key(config, key, words):
    with pytest.raises(ConfigError) as error:
        shape_of(config)
    assert error.value.key == key and words in str(error.value)
