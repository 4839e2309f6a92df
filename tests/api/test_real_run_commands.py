"""A real run's parameters are defined once (DESIGN principle 13): for every scene with a real
run, at several parameter sets, the worker's command line (the Check's ``args``, each scene's
``worker_argv``) parses with the worker's own parser (``workers/<scene>.py parser()``) to the
values of the params the run runs (the scaled-down copy where the check scales), and the torchrun
line the page shows is app/jobs/launch.py's ``torchrun_line`` and carries exactly that argv."""

from __future__ import annotations

import importlib
import shlex
import sys
from types import SimpleNamespace

import pytest
from markupsafe import escape

from app.jobs.launch import torchrun_line
from app.main import SCENES
from app.params import parse
from app.scenes.checkpointing.check import scaled_params
from app.scenes.memory.check import scaled_config
from tests.conftest import ROOT

pytest.importorskip("torch")  # the workers' modules import torch (they start nothing on import)

PARAM_SETS: dict[str, list[dict]] = {
    "memory": [{}, {"tp": "4", "sequence_parallel": "true", "recompute": "full", "zero": "3",
                    "optimizer": "sgd", "precision": "fp32", "pp": "2", "micro_batch": "4"},
               {"preset": "gpt2", "micro_batch": "2", "dp": "2", "zero": "1",
                "recompute": "none", "optimizer": "adafactor"}],
    "collective": [{}, {"op": "broadcast", "root": "2", "count": "16", "seed": "3"},
                   {"world": "16", "gpus_per_node": "8", "algorithm": "tree"},
                   {"op": "all_gather", "world": "3", "count": "9", "gpus_per_node": "2"}],
    "optimizer": [{}, {"optimizer": "sgd", "precision": "fp32", "lr": "0.05",
                       "weight_decay": "0"},
                  {"optimizer": "momentum", "momentum": "0.5", "size": "12", "eps": "1e-06",
                   "steps": "7", "seed": "9"}],
    "data-parallel": [{}, {"mode": "fsdp", "dp": "2"}, {"mode": "dp", "steps": "5"},
                      {"bucket_mb": "0.001", "dtype": "bf16", "mlp_layers": "4",
                       "mlp_width": "3"}],
    "zero": [{}, {"stage": "0"}, {"stage": "3", "dp": "8", "mlp_layers": "3", "mlp_width": "3",
                                  "micro_batch": "1", "seed": "4"}],
    "tensor-parallel": [{}, {"block": "attention", "tp": "4", "sequence_parallel": "true",
                             "tokens": "8", "hidden": "16", "heads": "4"},
                        {"block": "embedding", "vocab": "32", "seed": "2"}],
    "pipeline": [{}, {"schedule": "interleaved_1f1b", "chunks": "2", "stages": "2",
                      "microbatches": "4"},
                 {"schedule": "gpipe", "microbatches": "3"}, {"schedule": "zbv"}],
    "precision": [{}, {"value": "-1e-05", "grad_center": "-8", "grad_spread": "0.5",
                       "steps": "8", "init_scale_log2": "24", "growth_interval": "2",
                       "seed": "7", "fp8_margin": "3"},
                  {"value": "65504", "format": "fp16"}],
    "checkpointing": [{}, {"preset": "llama3-8b", "recompute": "selective", "tp": "2",
                           "sequence_parallel": "true"},
                      {"recompute": "full", "recompute_layers": "3", "grad_accum": "2",
                       "micro_batch": "1"}],
    "parallelism": [{}, {"tp": "2", "cp": "2", "dp": "2", "pp": "1", "ep": "4",
                         "gpus_per_node": "4"},
                    {"tp": "1", "dp": "4", "pp": "2", "ep": "1", "order": "tp-cp-pp-ep-dp"}],
    "moe": [{}, {"tokens": "24", "experts": "6", "top_k": "3", "ep": "3",
                 "capacity_factor": "0", "drop_policy": "position", "router": "topk_softmax"},
            {"skew": "2.5", "token_width": "4", "seed": "5", "aux_loss_coeff": "0.1",
             "z_loss_coeff": "0"}],
    "train": [{}, {"tp": "2", "cp": "2", "pp": "2", "dp": "1", "ep": "2", "zero": "1",
                   "sequence_parallel": "true", "recompute": "full", "schedule": "gpipe",
                   "dtype": "float32", "clip": "0.5"},
              {"tp": "1", "pp": "1", "dp": "4", "ep": "4", "microbatches": "2", "nodes": "2",
               "lr": "0.00123456789", "experts": "8", "order": "tp-dp-cp-ep-pp",
               "aux_loss_coeff": "0.0125"}],
    "context-parallel": [{}, {"method": "ulysses", "cp": "2", "heads": "6", "kv_heads": "2",
                              "causal": "false", "seq": "10", "seed": "5"},
                         {"method": "hybrid", "cp": "8", "ulysses": "2", "balance": "zigzag",
                          "seq": "32", "heads": "8", "kv_heads": "4", "head_dim": "3"},
                         {"method": "all_gather", "cp": "3", "seq": "12", "heads": "3",
                          "kv_heads": "1"},
                         {"cp": "3", "seq": "8192", "example_seq": "24"}],
}
"""Query parameters; the first set of each scene is its default."""

GPUS_PER_NODE = {"collective", "train"}
"""Scenes whose torchrun line spans nodes when the ranks do not fit on one."""

CASES = [(scene, query) for scene in SCENES if scene.verify is not None
         for query in PARAM_SETS[scene.slug]]


def run_values(slug: str, p):
    """What the real run runs: ``p``, or the scaled-down copy the check computes."""
    if slug == "memory":
        c = scaled_config(p.config())
        return SimpleNamespace(**{**vars(c.model), **{k: getattr(c, k) for k in (
            "micro_batch", "dp", "tp", "pp", "zero", "sequence_parallel", "recompute",
            "optimizer", "precision")}})
    if slug == "checkpointing":
        return scaled_params(p)
    if slug == "context-parallel":   # the worked example: seq up to 256 tokens, else example_seq
        return SimpleNamespace(**{**p.model_dump(), **p.stage()})
    return p


def worker_module(path: str):
    """The worker's module, imported as torchrun runs it (workers/ on the path)."""
    workers = str(ROOT / "workers")
    if workers not in sys.path:
        sys.path.insert(0, workers)
    return importlib.import_module(path.removeprefix("workers/").removesuffix(".py")
                                   .replace("/", "."))


def test_every_real_run_has_parameter_sets():
    slugs = {scene.slug for scene in SCENES if scene.verify is not None}
    assert slugs == set(PARAM_SETS)


@pytest.mark.parametrize("scene,query", CASES,
                         ids=[f"{s.slug}-{i}" for s in SCENES if s.verify is not None
                              for i in range(len(PARAM_SETS[s.slug]))])
def test_the_worker_parses_the_params(scene, query):
    check = scene.verify
    p = parse(scene.params, query)
    argv = check.args(p)
    args = worker_module(check.worker).parser().parse_args(argv)
    want = run_values(scene.slug, p)
    fields = [name for name in vars(args) if name in scene.params.model_fields]
    assert fields, f"{check.worker} takes none of {scene.params.__name__}'s fields"
    for name in fields:
        got, expected = getattr(args, name), getattr(want, name)
        assert got == expected and type(got) is type(expected), (name, got, expected)


@pytest.mark.parametrize("scene,query", CASES,
                         ids=[f"{s.slug}-{i}" for s in SCENES if s.verify is not None
                              for i in range(len(PARAM_SETS[s.slug]))])
def test_the_page_shows_the_runs_command(scene, query):
    check = scene.verify
    p = parse(scene.params, query)
    trace = scene.simulate(p)
    shown = scene.view(p, trace, 0)["torchrun"]
    nodes = {"gpus_per_node": p.gpus_per_node} if scene.slug in GPUS_PER_NODE else {}
    assert shown == torchrun_line(check, p, **nodes)
    words = shlex.split(shown)
    assert words[0] == "torchrun" and words[-2:] == ["--out", "report.json"]
    assert words[words.index(check.worker) + 1:-2] == check.args(p)
    per_node = words[words.index("--nproc-per-node") + 1]
    nnodes = int(words[words.index("--nnodes") + 1]) if "--nnodes" in words else 1
    assert ("--standalone" in words) == (nnodes == 1)
    assert nnodes * int(per_node) >= check.world(p) > (nnodes - 1) * int(per_node)


@pytest.mark.parametrize("scene", [s for s in SCENES if s.verify is not None],
                         ids=lambda s: s.slug)
def test_the_page_html_carries_the_line(client, scene):
    query = PARAM_SETS[scene.slug][1]
    p = parse(scene.params, query)
    shown = scene.view(p, scene.simulate(p), 0)["torchrun"]
    page = client.get(f"/{scene.slug}?{p.query()}")
    assert page.status_code == 200 and str(escape(shown)) in page.text


def test_worker_options_follow_the_model():
    """The help, range and default of a field-backed option are the model's."""
    from app.sim.pipeline.params import PipelineParams

    parser = worker_module("workers/pipeline.py").parser()
    option = {a.dest: a for a in parser._actions}["microbatches"]
    assert option.default == PipelineParams.model_fields["microbatches"].default
    assert "an integer from 1 to 1024" in option.help
    with pytest.raises(SystemExit):
        parser.parse_args(["--microbatches", "0"])
    with pytest.raises(SystemExit):   # simulated, but torch has no class for it
        parser.parse_args(["--schedule", "zb_h1"])
