"""A candidate as launch configurations: Megatron-LM flags, a DeepSpeed config, torchtitan TOML.

Every name as those projects spell it, held in tests/sim/test_planner_launch.py to lists taken
from their source (the commits are named there):

* Megatron-LM ``megatron/training/arguments.py`` and the dataclasses it turns into flags
  (``--`` + field name with ``-`` for ``_``: ModelParallelConfig, TransformerConfig,
  TrainingConfig, DistributedInitConfig). ZeRO 1 is its distributed optimizer
  (``--use-distributed-optimizer``); ZeRO 2 and 3 are Megatron-FSDP
  (``--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads`` /
  ``optim_grads_params``; FSDP v1 wants the distributed optimizer as well).
* DeepSpeed's config JSON (``deepspeed/runtime/constants.py``, ``runtime/zero/config.py``):
  train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps,
  zero_optimization.stage and .overlap_comm (the overlap the cost model assumes), bf16.enabled.
* torchtitan's TOML (``torchtitan/config/job_config.py`` of v0.2.2, the last release read from
  TOML files): [training], [parallelism] (…_degree, pipeline_parallel_schedule, its
  micro-batch, fsdp_reshard_after_forward) and [activation_checkpoint] mode.
"""

from __future__ import annotations

import json
from math import ceil


def megatron_flags(c, model, global_batch: int, seq: int) -> list[str]:
    flags = [f"--tensor-model-parallel-size {c.tp}", f"--pipeline-model-parallel-size {c.pp}",
             f"--context-parallel-size {c.cp}"]
    if c.ep > 1:
        flags.append(f"--expert-model-parallel-size {c.ep}")
    if c.chunks > 1:
        flags.append(f"--num-layers-per-virtual-pipeline-stage "
                     f"{ceil(model.layers / c.pp) // c.chunks}")
    flags += [f"--micro-batch-size {c.micro_batch}", f"--global-batch-size {global_batch}",
              f"--seq-length {seq}", "--bf16"]
    if c.tp > 1:
        flags.append("--sequence-parallel")
    if c.recompute == "selective":
        flags.append("--recompute-granularity selective")
    elif c.recompute == "full":
        flags += ["--recompute-granularity full", "--recompute-method uniform",
                  "--recompute-num-layers 1"]
    if c.zero >= 1:
        flags.append("--use-distributed-optimizer")
    if c.zero >= 2:
        strategy = "optim_grads" if c.zero == 2 else "optim_grads_params"
        flags += ["--use-megatron-fsdp", f"--data-parallel-sharding-strategy {strategy}"]
    return flags


def deepspeed_config(c, global_batch: int) -> str:
    accumulation = c.microbatches      # train_batch_size = micro × accumulation × dp
    config = {"train_batch_size": global_batch,
              "train_micro_batch_size_per_gpu": c.micro_batch,
              "gradient_accumulation_steps": accumulation,
              "zero_optimization": ({"stage": c.zero, "overlap_comm": True} if c.zero >= 2
                                    else {"stage": c.zero}),
              "bf16": {"enabled": True}}
    return json.dumps(config, indent=2)


def torchtitan_toml(c, global_batch: int, seq: int) -> str:
    shard = c.dp if c.zero >= 1 else 1
    replicate = 1 if c.zero >= 1 else c.dp
    schedule = "Interleaved1F1B" if c.chunks > 1 else "1F1B"
    mode = {"none": "none", "selective": "selective", "full": "full"}[c.recompute]
    lines = ["[training]", f"global_batch_size = {global_batch}",
             f"local_batch_size = {c.micro_batch * c.microbatches}", f"seq_len = {seq}",
             "", "[parallelism]",
             f"data_parallel_replicate_degree = {replicate}",
             f"data_parallel_shard_degree = {shard}",
             f"tensor_parallel_degree = {c.tp}", f"pipeline_parallel_degree = {c.pp}",
             f"context_parallel_degree = {c.cp}", f"expert_parallel_degree = {c.ep}"]
    if c.zero >= 1:
        # FSDP keeps the gathered parameters from forward to backward (ZeRO-2's traffic) or
        # gathers them again for backward (ZeRO-3's)
        reshard = "always" if c.zero == 3 else "never"
        lines.append(f'fsdp_reshard_after_forward = "{reshard}"')
    if c.pp > 1:
        lines += [f'pipeline_parallel_schedule = "{schedule}"',
                  f"pipeline_parallel_microbatch_size = {c.micro_batch}"]
    lines += ["", "[activation_checkpoint]", f'mode = "{mode}"']
    return "\n".join(lines) + "\n"
