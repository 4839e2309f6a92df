"""Record what /api answered to queries written before the parameter groups renamed MoE's
``hidden``/``cost_hidden``, context parallelism's ``seq``/``context``, parallelism's ``model``
and checkpointing's ``achieved_tflops`` (docs/parameters.md): a SHA-256 per query of the
contract fields and of the whole answer, into old_queries.json beside this file.

    python tests/api/golden/old_queries.py --app-root DIR

DIR is a checkout of the commit before the rename with the numbers fixed since (7027016, the
planner branch before it took the renames: MoE's combine, Ulysses' links; ``git worktree add DIR
7027016``; that commit's templates also need ``jinja2_fragments``);
tests/api/test_renames.py holds today's answers to those hashes. Run from a checkout of today,
the same command pins today's code instead (SHARDSCOPE_REGEN_GOLDEN=1 in the test does that).

The last bits of attention's and the router's floats depend on the BLAS kernel numpy's
OpenBLAS picks for the machine's processor (and on numpy's own SIMD loops): the same code gives
other bytes on an AMD EPYC than on the Intel Xeon the hashes were first recorded on. So each
query's hashes are recorded once per kernel (OPENBLAS_CORETYPE, every x86-64 kernel OpenBLAS
dispatches to) and once more with numpy's AVX-512 loops switched off (NPY_DISABLE_CPU_FEATURES),
each in a process of its own, and an answer is the old one when its hash is among them.
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


KERNELS = ("Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Sandybridge", "Haswell",
           "SkylakeX", "Cooperlake", "SapphireRapids", "Atom", "Opteron", "Barcelona",
           "Bulldozer", "Piledriver", "Steamroller", "Excavator", "Zen")
"""OpenBLAS's x86-64 kernels (DYNAMIC_ARCH), each set by OPENBLAS_CORETYPE."""
NO_AVX512 = "AVX512_ICL AVX512_SPR X86_V4"
"""numpy's AVX-512 loops, switched off by NPY_DISABLE_CPU_FEATURES (its AVX2 ones then run)."""


def record_one(app_root: Path, out: Path) -> None:
    """This process's answers (its BLAS kernel and SIMD loops as its environment says)."""
    sys.path.insert(0, str(app_root))
    from fastapi.testclient import TestClient

    from app.main import create_app
    with TestClient(create_app()) as client:
        out.write_text(json.dumps(answers(client), sort_keys=True))


def main() -> None:
    import os
    import subprocess
    import tempfile
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app-root", type=Path, default=HERE.parents[2],
                        help="the checkout whose app answers (default: this one)")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return record_one(args.app_root, args.one)
    accepted: dict[str, dict[str, set]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for kernel in KERNELS:
            for simd in ("", NO_AVX512):
                out = Path(folder) / f"{kernel}-{bool(simd)}.json"
                env = {**os.environ, "OPENBLAS_CORETYPE": kernel}
                if simd:
                    env["NPY_DISABLE_CPU_FEATURES"] = simd
                subprocess.run([sys.executable, __file__, "--app-root", str(args.app_root),
                                "--one", str(out)], env=env, cwd=folder, check=True)
                for query, hashes in json.loads(out.read_text()).items():
                    for part, digest_ in hashes.items():
                        accepted.setdefault(query, {}).setdefault(part, set()).add(digest_)
    GOLDEN.write_text(json.dumps({q: {part: sorted(d) for part, d in parts.items()}
                                  for q, parts in accepted.items()},
                                 indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN} from {args.app_root}: {len(KERNELS)} kernels, with and without "
          "AVX-512")


if __name__ == "__main__":
    main()
