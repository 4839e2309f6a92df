"""The launch configurations the planner writes use only names those tools accept.

The lists below were read from the tools' own source (only the names are committed, no code):

* Megatron-LM, github.com/NVIDIA/Megatron-LM at d98e8a64ddf34856e74b24714e3bedb2f5a39553
  (2026-08-22): ``megatron/training/arguments.py`` adds --num-layers-per-virtual-pipeline-stage,
  --seq-length, --use-distributed-optimizer and --data-parallel-sharding-strategy (choices
  no_shard, optim, optim_grads, optim_grads_params) itself; the others are dataclass fields
  turned into flags by ``megatron/training/argument_utils.py`` (``"--" + name.replace("_",
  "-")``): ``megatron/core/model_parallel_config.py`` (tensor_model_parallel_size,
  pipeline_model_parallel_size, context_parallel_size, expert_model_parallel_size,
  sequence_parallel, bf16), ``megatron/core/transformer/transformer_config.py``
  (recompute_granularity: full | selective, recompute_method: uniform | block,
  recompute_num_layers), ``megatron/training/config/training_config.py`` (micro_batch_size,
  global_batch_size), ``megatron/training/config/common_config.py`` (use_megatron_fsdp).
* DeepSpeed, github.com/microsoft/DeepSpeed at 38327e07f6cd39b63418f60cedd1651b0be3e7c3
  (2025-02-21): ``deepspeed/runtime/constants.py`` (train_batch_size,
  train_micro_batch_size_per_gpu, gradient_accumulation_steps, bf16.enabled),
  ``deepspeed/runtime/zero/config.py`` (zero_optimization: stage 0–3, overlap_comm).
* torchtitan, github.com/pytorch/torchtitan tag v0.2.2 (73a0e6979dd10b6b1904098eb3c8f62c18ab87ce,
  the last release configured by TOML files): ``torchtitan/config/job_config.py`` classes
  Training, Parallelism, ActivationCheckpoint (mode: selective | full | memory_budget | none),
  ``tests/integration_tests/base_config.toml`` (fsdp_reshard_after_forward: default | never |
  always); schedule names are torch.distributed.pipelining's (1F1B, Interleaved1F1B).
"""

from __future__ import annotations

import json
import tomllib

import pytest

from app.sim.planner.launch import deepspeed_config, megatron_flags, torchtitan_toml
from app.sim.planner.params import PlannerParams
from app.sim.planner.search import search

MEGATRON_FLAGS = {
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
    "--expert-model-parallel-size", "--num-layers-per-virtual-pipeline-stage",
    "--micro-batch-size", "--global-batch-size", "--seq-length", "--bf16", "--sequence-parallel",
    "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
    "--use-distributed-optimizer", "--use-megatron-fsdp", "--data-parallel-sharding-strategy"}
MEGATRON_CHOICES = {"--recompute-granularity": {"full", "selective"},
                    "--recompute-method": {"uniform", "block"},
                    "--data-parallel-sharding-strategy": {"no_shard", "optim", "optim_grads",
                                                          "optim_grads_params"}}
DEEPSPEED_KEYS = {"train_batch_size", "train_micro_batch_size_per_gpu",
                  "gradient_accumulation_steps", "zero_optimization",
                  "zero_optimization.stage", "zero_optimization.overlap_comm", "bf16",
                  "bf16.enabled"}
TORCHTITAN_KEYS = {
    "training.global_batch_size", "training.local_batch_size", "training.seq_len",
    "parallelism.data_parallel_replicate_degree", "parallelism.data_parallel_shard_degree",
    "parallelism.fsdp_reshard_after_forward", "parallelism.tensor_parallel_degree",
    "parallelism.pipeline_parallel_degree", "parallelism.pipeline_parallel_schedule",
    "parallelism.pipeline_parallel_microbatch_size", "parallelism.context_parallel_degree",
    "parallelism.expert_parallel_degree", "activation_checkpoint.mode"}
TORCHTITAN_CHOICES = {"activation_checkpoint.mode": {"selective", "full", "memory_budget", "none"},
                      "parallelism.fsdp_reshard_after_forward": {"default", "never", "always"},
                      "parallelism.pipeline_parallel_schedule": {"1F1B", "Interleaved1F1B"}}

# one pinned mix per branch of the writers: ZeRO 0–3, pipelines with and without interleaving,
# every recomputation, context and expert parallelism
CASES = [
    dict(preset="llama3-70b", gpus=64, global_batch=128, seq=4096, tp=8, pp=4, chunks=2, zero=1,
         recompute="selective"),
    dict(preset="llama3-8b", gpus=16, global_batch=64, seq=4096, tp=2, pp=1, zero=3,
         recompute="full"),
    dict(preset="llama3-8b", gpus=16, global_batch=64, seq=4096, tp=2, pp=2, zero=2,
         recompute="none", chunks=1),
    dict(preset="llama3-8b", gpus=16, global_batch=64, seq=8192, tp=1, cp=2, pp=1, zero=0),
    dict(preset="mixtral-8x7b", gpus=64, global_batch=128, seq=4096, tp=2, ep=8, pp=4),
]


def _flatten(d, prefix=""):
    for k, v in d.items():
        name = f"{prefix}{k}"
        yield name, v
        if isinstance(v, dict):
            yield from _flatten(v, name + ".")


@pytest.mark.parametrize("query", CASES, ids=lambda q: f"{q['preset']}-zero{q.get('zero')}")
def test_names_are_the_tools_own(query):
    p = PlannerParams(**query)
    plan = search(p.plan_model(), p.cluster(), p.global_batch, p.pins(), listed=1)
    c = plan.candidates[0]
    flags = megatron_flags(c, p.plan_model(), p.global_batch, p.seq)
    for flag in flags:
        name, *value = flag.split()
        assert name in MEGATRON_FLAGS, name
        if name in MEGATRON_CHOICES:
            assert value[0] in MEGATRON_CHOICES[name], flag
    ds = json.loads(deepspeed_config(c, p.global_batch))
    assert {k for k, _ in _flatten(ds)} <= DEEPSPEED_KEYS
    assert ds["train_batch_size"] == (ds["train_micro_batch_size_per_gpu"]
                                      * ds["gradient_accumulation_steps"] * c.dp)
    assert ds["zero_optimization"]["stage"] == c.zero
    toml = tomllib.loads(torchtitan_toml(c, p.global_batch, p.seq))
    keys = {k: v for k, v in _flatten(toml) if not isinstance(v, dict)}
    assert set(keys) <= TORCHTITAN_KEYS
    for k, allowed in TORCHTITAN_CHOICES.items():
        if k in keys:
            assert keys[k] in allowed, (k, keys[k])
    par = toml["parallelism"]
    assert (par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
            * par["tensor_parallel_degree"] * par["pipeline_parallel_degree"]
            * par["context_parallel_degree"]) == p.gpus


def test_every_listed_name_is_written_somewhere():
    """The lists hold no name the writers never use (a renamed flag cannot hide in them)."""
    seen_flags, seen_ds, seen_tt = set(), set(), set()
    for query in CASES:
        p = PlannerParams(**query)
        c = search(p.plan_model(), p.cluster(), p.global_batch, p.pins(), listed=1).candidates[0]
        seen_flags |= {f.split()[0] for f in megatron_flags(c, p.plan_model(), p.global_batch,
                                                            p.seq)}
        seen_ds |= {k for k, _ in _flatten(json.loads(deepspeed_config(c, p.global_batch)))}
        seen_tt |= {k for k, v in _flatten(tomllib.loads(torchtitan_toml(c, p.global_batch,
                                                                         p.seq)))
                    if not isinstance(v, dict)}
    assert seen_flags == MEGATRON_FLAGS
    assert seen_ds == DEEPSPEED_KEYS
    assert seen_tt == TORCHTITAN_KEYS
