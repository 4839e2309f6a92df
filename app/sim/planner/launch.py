"""A candidate as launch configurations: Megatron-LM flags, a DeepSpeed config, torchtitan TOML.

Names as those projects spell them: Megatron-LM ``megatron/training/arguments.py``
(--tensor-model-parallel-size, --pipeline-model-parallel-size, --context-parallel-size,
--expert-model-parallel-size, --num-layers-per-virtual-pipeline-stage, --micro-batch-size,
--global-batch-size, --recompute-granularity, --recompute-method, --sequence-parallel,
--use-distributed-optimizer, --bf16); DeepSpeed's config JSON (train_batch_size,
train_micro_batch_size_per_gpu, gradient_accumulation_steps, zero_optimization.stage,
bf16.enabled); torchtitan's ``[parallelism]`` section (data_parallel_shard_degree,
data_parallel_replicate_degree, tensor_parallel_degree, pipeline_parallel_degree,
context_parallel_degree, expert_parallel_degree, pipeline_parallel_schedule) and
``[activation_checkpoint] mode``.
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
    return flags


def deepspeed_config(c, global_batch: int) -> str:
    accumulation = c.microbatches      # train_batch_size = micro × accumulation × dp
    config = {"train_batch_size": global_batch,
              "train_micro_batch_size_per_gpu": c.micro_batch,
              "gradient_accumulation_steps": accumulation,
              "zero_optimization": {"stage": c.zero},
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
    if c.pp > 1:
        lines += [f'pipeline_parallel_schedule = "{schedule}"',
                  f"pipeline_parallel_microbatch_size = {c.micro_batch}"]
    lines += ["", "[activation_checkpoint]", f'mode = "{mode}"']
    return "\n".join(lines) + "\n"
