"""The course: eleven chapters, in teaching order (DESIGN.md). Scenes attach themselves to a
chapter by number; a chapter without a built scene is listed as upcoming, with its topics."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chapter:
    number: int
    title: str
    topics: tuple[str, ...]


CHAPTERS: tuple[Chapter, ...] = (
    Chapter(1, "Overview", (
        "the training memory ledger", "the five parallelism strategies",
        "rank, local rank, world size", "torchrun and NCCL set-up", "a first DDP script")),
    Chapter(2, "Collective communication", (
        "AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, All-to-All",
        "ring and tree algorithms", "communication volume", "the α–β cost model")),
    Chapter(3, "Optimizers", (
        "what SGD, momentum and Adam/AdamW keep", "optimizer memory", "the basis of ZeRO")),
    Chapter(4, "Data parallelism", (
        "DP", "DDP: bucketed all-reduce overlapped with backward", "FSDP")),
    Chapter(5, "ZeRO", (
        "stages 1, 2 and 3", "their communication", "ZeRO-Offload and ZeRO-Infinity")),
    Chapter(6, "Tensor parallelism", (
        "Megatron column- and row-parallel linear layers", "where communication goes",
        "sequence parallelism")),
    Chapter(7, "Pipeline parallelism", (
        "the bubble", "GPipe, 1F1B, interleaved and zero-bubble schedules")),
    Chapter(8, "Mixed precision and memory tricks", (
        "FP16, BF16, FP8", "loss scaling", "gradient accumulation", "activation checkpointing")),
    Chapter(9, "Long context", (
        "attention's O(s²)", "Ring Attention", "DeepSpeed-Ulysses", "Megatron context parallel")),
    Chapter(10, "Mixture of experts", (
        "router, capacity and load balancing", "expert-parallel All-to-All", "EP × DP × TP × PP")),
    Chapter(11, "Putting it together", (
        "the TP × PP × DP × EP × CP rank layout", "communication groups mapped onto nodes",
        "choosing the best mix for a cluster",
        "the training framework that runs a mix for real")),
)


def chapter(number: int) -> Chapter:
    return CHAPTERS[number - 1]


def neighbours(scenes, scene) -> dict:
    """The scenes before and after ``scene`` in course order (``scenes`` is app.main.SCENES):
    the page's rel="prev" / rel="next" links."""
    slugs = [s.slug for s in scenes]
    if scene.slug not in slugs:
        return {"course_prev": None, "course_next": None}
    i = slugs.index(scene.slug)
    return {"course_prev": scenes[i - 1] if i > 0 else None,
            "course_next": scenes[i + 1] if i + 1 < len(scenes) else None}


INTROS: dict[int, str] = {
    1: "Start with /memory: the training memory ledger (weights, gradients, optimizer state "
       "and activations, byte by byte, for a model you choose). Then /parallelism: the five "
       "strategies on a device mesh, rank / local rank / world size, the torchrun lines and a "
       "first DDP script.",
}
"""What a chapter's card says it holds, beyond its topics."""
