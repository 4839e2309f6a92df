"""Record what /api answered to queries written before the parameter groups renamed MoE's
``hidden``/``cost_hidden``, context parallelism's ``seq``/``context``, parallelism's ``model``
and checkpointing's ``achieved_tflops`` (docs/parameters.md): a SHA-256 per query of the
contract fields and of the whole answer, into old_queries.json beside this file.

    python tests/api/golden/old_queries.py --app-root DIR

DIR is a checkout of the commit before the rename with the numbers fixed since (7027016, the
planner branch before it took the renames: MoE's combine, Ulysses' links; ``git worktree add DIR
7027016``);
tests/api/test_renames.py holds today's answers to those hashes. Run from a checkout of today,
the same command pins today's code instead (SHARDSCOPE_REGEN_GOLDEN=1 in the test does that).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "old_queries.json"

CONTRACT = {
    "context-parallel": ("q", "k", "v", "output", "max_abs_error", "ranks", "frames"),
    "moe": ("logits", "topk", "capacity", "expert_tokens", "dropped", "aux_loss", "z_loss",
            "dispatch", "frames"),
    "parallelism": ("world", "ranks", "groups", "traffic"),
    "checkpointing": None,          # no contract in DESIGN.md: the whole answer
}
"""DESIGN.md's contract fields of each scene's /api answer."""

QUERIES = {
    "context-parallel": [
        "", "seq=16", "seq=32&cp=8", "seq=24&cp=3&method=all_gather",
        "seq=48&cp=4&balance=zigzag&causal=true", "seq=40&cp=4&causal=false",
        "method=ulysses&cp=4&seq=32&heads=8&kv_heads=4&head_dim=3",
        "method=hybrid&cp=8&ulysses=2&seq=64&heads=8&kv_heads=4&balance=zigzag",
        "method=ring&cp=64&seq=256&heads=16&kv_heads=16&head_dim=16&balance=zigzag",
        "seq=12&cp=3&heads=3&kv_heads=1&seed=7",
        "seq=16&context=65536", "seq=32&cp=8&context=1048576&micro_batch=2",
        "method=ulysses&cp=2&seq=10&heads=6&kv_heads=2&causal=false&context=8192&gpu=a100-80",
        "seq=256&cp=16&context=1024&recompute=none&gpu_tflops=400",
    ],
    "moe": [
        "", "cost_hidden=4096", "hidden=16&cost_hidden=2048",
        "hidden=4&tokens=32&experts=16&top_k=4&ep=4&cost_hidden=7168&cost_tokens=8192",
        "hidden=64&tokens=16&experts=8&ep=1&cost_hidden=1024&dtype=fp8",
        "tokens=24&experts=6&top_k=3&ep=3&capacity_factor=0&drop_policy=position"
        "&router=topk_softmax",
    ],
    "parallelism": ["", "model=gpt2", "model=llama3-70b&tp=4&pp=4&dp=2&seq=8192",
                    "tp=2&cp=2&dp=2&pp=1&ep=4&gpus_per_node=4&model=gpt3-175b"],
    "checkpointing": ["", "achieved_tflops=250", "preset=llama3-8b&tp=2&achieved_tflops=600"],
}
"""Old queries; those with a name only the old scheme had (context, cost_hidden, model,
achieved_tflops) are whole old permalinks, whose every number must stay; the others are
read the new way, so only the contract fields must."""

OLD_ONLY = ("context=", "cost_hidden=", "model=", "achieved_tflops=")


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def answers(client) -> dict:
    out: dict = {}
    for slug, queries in QUERIES.items():
        for query in queries:
            r = client.get(f"/api/{slug}?{query}")
            assert r.status_code == 200, (slug, query, r.text[:200])
            body = r.json()
            fields = CONTRACT[slug] or tuple(body)
            out[f"{slug}?{query}"] = {"contract": digest({k: body[k] for k in fields}),
                                      "whole": digest(body)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app-root", type=Path, default=HERE.parents[2],
                        help="the checkout whose app answers (default: this one)")
    args = parser.parse_args()
    sys.path.insert(0, str(args.app_root))
    from fastapi.testclient import TestClient

    from app.main import create_app
    with TestClient(create_app()) as client:
        GOLDEN.write_text(json.dumps(answers(client), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN} from {args.app_root}")


if __name__ == "__main__":
    main()
