"""The parameters of ``/parallelism`` (chapters 1 and 11): a 5D layout and what its traffic is.

World = tp · cp · dp · pp. Expert parallelism is *carved out of* dp · cp, as Megatron-LM does
(``megatron/core/parallel_state.py``, ``initialize_model_parallel``): the expert layers see the
same ranks as an ``tp · ep · dp' · pp`` mesh with ``cp · dp = ep · dp'``, laid out in the same
``order`` with cp of size 1. ``order`` names the five axes fastest-varying first
(``tp-cp-ep-dp-pp``: consecutive ranks differ in their tp coordinate).
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field, model_validator

from app.catalog.models import PRESETS
from app.param_groups import (AXES, GpusPerNodeField, InfinibandField, LayoutGroup,
                              MicroBatchField, NvlinkField, PresetField, SeqField, size_slider)
from app.params import Control, Invalid, Microbatches, Renamed

MAX_WORLD = 4096
"""Bound on tp·cp·dp·pp for the page: 4096 ranks keep every group list (5 × 4096 numbers) and
the per-rank table small enough to answer well under half a second."""

Experts = Annotated[int, Field(ge=1, le=256,
                               description="experts per MoE layer (1: a dense model)")]
TopK = Annotated[int, Field(ge=1, le=8, description="experts each token is routed to")]


RENAMED = Renamed({"model": "preset"})
"""The model was ``model`` here before the parameter groups; every other scene calls it
``preset``."""


class ParallelismParams(LayoutGroup):
    """The five sizes and the rank order (the layout group), the nodes, and the model whose
    traffic is counted (preset, seq, micro_batch of the model shape group; the network group's
    links, without α: the panel counts bytes and their time at link speed)."""

    renamed: ClassVar[Renamed] = RENAMED
    max_world: ClassVar[int] = MAX_WORLD

    # GPUs in one node: ranks r // gpus_per_node share a node
    gpus_per_node: GpusPerNodeField = 4
    # the model whose traffic the panel counts
    preset: PresetField = "llama3-8b"
    # experts per MoE layer (each the preset's MLP); 1: dense
    experts: Annotated[Experts, size_slider("Experts per MoE layer", Experts,
                                            "1: a dense model (no EP traffic).")] = 8
    # experts per token: what the EP all-to-all carries
    top_k: Annotated[TopK, Control("Top-k", help="Experts each token goes to.")] = 2
    # tokens of one sequence
    seq: SeqField = 4096
    # sequences in one micro-batch
    micro_batch: MicroBatchField = 1
    # micro-batches per step (activations move once each)
    microbatches: Annotated[Microbatches, Control("Micro-batches per step m", kind="number")] = 8
    # Megatron's SP: TP all-reduce → all-gather + reduce-scatter
    sequence_parallel: Annotated[bool, Control(
        "Sequence parallelism", kind="flag",
        help="TP's all-reduces become all-gathers + reduce-scatters (same bytes).")] = True
    # NVLink per GPU (H100 ≈ 450 GB/s each way)
    intra_node_gbs: NvlinkField = 450.0
    # InfiniBand per GPU (400 Gb/s ≈ 50 GB/s)
    inter_node_gbs: InfinibandField = 50.0

    @property
    def names(self) -> tuple[str, ...]:
        """``order`` split into axis names, fastest first."""
        return tuple(self.order.split("-"))

    @property
    def expert_dp(self) -> int:
        """dp': the data-parallel size of the expert layers, dp·cp / ep."""
        return self.dp * self.cp // self.ep

    @model_validator(mode="after")
    def _consistent(self) -> ParallelismParams:
        names = self.names
        repeated = [n for n in AXES if names.count(n) > 1]
        unknown = [n for n in names if n not in AXES]
        missing = [n for n in AXES if n not in names]
        if repeated or unknown or missing:
            parts = ([f"repeats {', '.join(repeated)}"] if repeated else []) + \
                    ([f"has unknown {', '.join(unknown)}"] if unknown else []) + \
                    ([f"misses {', '.join(missing)}"] if missing else [])
            raise Invalid("order", f'order "{self.order}" {" and ".join(parts)}: name each of '
                                   f'{", ".join(AXES)} once, fastest-varying first')
        shape = PRESETS[self.preset]         # TP splits the heads of the model it counts
        for name, count in (("heads", shape.heads), ("kv_heads", shape.kv_heads)):
            if count % self.tp:
                raise Invalid("tp", f"tp ({self.tp}) must divide {name} ({count}) of "
                                    f"{self.preset}: each TP rank computes whole heads")
        if self.world > MAX_WORLD:
            raise Invalid("dp", f"world = tp·cp·dp·pp = {self.tp}·{self.cp}·{self.dp}·{self.pp}"
                                f" = {self.world:,} must be at most {MAX_WORLD:,} ranks on this "
                                f"page — use dp ≤ {max(1, MAX_WORLD // (self.tp * self.cp * self.pp))}")
        if (self.dp * self.cp) % self.ep:
            raise Invalid("ep", f"ep ({self.ep}) must divide dp·cp ({self.dp * self.cp}): the "
                                f"expert layers split the dp·cp ranks into ep groups")
        if self.experts % self.ep:
            raise Invalid("ep", f"ep ({self.ep}) must divide experts ({self.experts}): each "
                                f"expert-parallel rank holds experts/ep whole experts")
        if self.world > self.gpus_per_node and self.world % self.gpus_per_node:
            raise Invalid("gpus_per_node", f"world ({self.world}) spans several nodes, so it "
                                           f"must be a multiple of gpus_per_node "
                                           f"({self.gpus_per_node}): torchrun starts the same "
                                           f"number of processes on every node")
        if self.seq % self.cp:
            raise Invalid("seq", f"seq ({self.seq}) must be divisible by cp ({self.cp})")
        from app.sim.parallelism.layout import (
            pp_mismatch,  # the layout checks its own meshes
        )
        problem = pp_mismatch(self)
        if problem:
            raise Invalid("order", problem)
        return self
