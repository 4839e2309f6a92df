"""The query of ``/context-parallel`` (DESIGN.md, ``/api/context-parallel``).

``seq`` is the sequence of the real model (``preset``), as in every other scene, up to
1,048,576 tokens: the memory and time panels are about it. The worked example, whose every number
is computed and shown (Q, K, V, the output, each rank's running softmax), runs on the whole
sequence while it is short enough (``seq`` ≤ :data:`MAX_SEQ`): then DESIGN.md's contract holds
as written — q, k, v and the output are ``seq`` × heads × head_dim. Above, it runs on
``example_seq`` tokens of its own (:attr:`ContextParallelParams.example_tokens`), shown on the
page, so a scenario carried from /memory with seq = 8192 opens here instead of a 422. ``heads``,
``kv_heads`` and ``head_dim`` are the worked example's (the contract's); the model's own are the
preset's. The model, GPU and network fields are the shared groups of app/param_groups.py, so a
scenario flows in from the other scenes.

Before this, the example's length was called ``seq`` and the model's ``context``: a query with
``context`` is redirected to the new names (:data:`RENAMED`, docs/parameters.md).

Field types new with this chapter (``Cp``, ``UlyssesDegree``, ``HeadDim``, ``Method``,
``Balance``) are declared here once; they belong in app/params.py when a second scene needs them.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from app.param_groups import (GpuGroup, MicroBatchField, NetworkGroup, NvlinkField, PresetField,
                              SeqField)
from app.params import (Control, Heads, Invalid, KvHeads, Recompute, Renamed, Seed,
                        divisors_near, multiples_near, suggest)

Method = Literal["ring", "all_gather", "ulysses", "hybrid"]
"""Megatron-LM's cp_comm_type: p2p, all_gather, a2a, a2a+p2p."""
Balance = Literal["none", "zigzag"]
Cp = Annotated[int, Field(ge=2, le=64, description="context-parallel size: ranks sharing one "
                                                   "sequence")]
UlyssesDegree = Annotated[int, Field(ge=1, le=64,
                                     description="hybrid: ranks in each all-to-all group "
                                                 "(cp = ulysses × ring size)")]
HeadDim = Annotated[int, Field(ge=1, le=1024, description="dimensions per attention head d")]

MAX_SEQ = 256
"""Most tokens of the worked example: q, k, v and the output are tokens × heads × head_dim
numbers each (at most 256 × 16 × 16 = 65,536), so the largest answer stays a few MB and well
under 0.5 s. A longer ``seq`` is shown on ``example_seq`` tokens."""
ExampleSeq = Annotated[int, Field(ge=1, le=MAX_SEQ,
                                  description="tokens of the worked example when seq is above "
                                              f"{MAX_SEQ}")]
MAX_HEADS = 16
MAX_HEAD_DIM = 16
CP_STOPS = (2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64)
"""The cp slider's stops (any cp from 2 to 64 is accepted from the URL)."""
STAGE_FIELDS = ("method", "ulysses", "example_seq", "heads", "kv_heads", "head_dim", "causal",
                "balance", "seed")
"""The fields of the worked example that a real run takes (its cp is the world size): the
worker's command line and the check's comparison are derived from this list, through
:meth:`ContextParallelParams.stage` (``example_seq`` there is the example's length,
:attr:`~ContextParallelParams.example_tokens`)."""

RENAMED = Renamed({"seq": "example_seq", "context": "seq"})
"""The names this scene's query had before the parameter groups: the example's length was
``seq``, the model's ``context``."""


class ContextParallelParams(NetworkGroup, GpuGroup):
    """The worked example (method, cp, its heads and length) and the real model at scale
    (preset, seq, micro_batch of the model shape group; the GPU group; the network group)."""

    renamed: ClassVar[Renamed] = RENAMED
    # how each query meets every key (Megatron cp_comm_type)
    method: Annotated[Method, Control(
        "Method (Megatron cp_comm_type)", kind="choice",
        options={"ring": "ring (p2p)", "all_gather": "all-gather", "ulysses": "Ulysses (a2a)",
                 "hybrid": "hybrid"},
        help="Ring: K/V blocks travel round the ranks. All-gather: every rank gathers all K/V "
             "(Llama 3). Ulysses: all-to-all from tokens to heads. Hybrid: Ulysses inside groups × "
             "ring across them.")] = "ring"
    # context-parallel size: ranks sharing one sequence
    cp: Annotated[Cp, Control(
        "Context-parallel ranks cp", kind="values", values=CP_STOPS,
        help="Ranks sharing one sequence, 2 to 64; from 16 on the deck summarises the "
             "ranks.")] = 4
    # hybrid: all-to-all group; a ring of cp/ulysses groups
    ulysses: Annotated[UlyssesDegree, Control(
        "Ulysses group u", kind="values", values=(1, 2, 4, 8, 16, 32, 64),
        help="Hybrid only: ranks of each all-to-all group; the ring joins cp/u groups.")] = 2
    # tokens of the worked example when seq is above 256 (up to 256, the example is seq)
    example_seq: Annotated[ExampleSeq, Control(
        "Tokens of the example", kind="number",
        help=f"The sequence is longer than the {MAX_SEQ} tokens whose every number is shown: "
             f"the example runs on this many (a multiple of cp, of 2·cp for zigzag).")] = 16
    # query heads of the worked example (≤ 16)
    heads: Annotated[Heads, Control("Query heads", bounds=(1, MAX_HEADS),
                                    help="Of the worked example (1–16).")] = 4
    # key/value heads: head h reads h // (heads/kv_heads)
    kv_heads: Annotated[KvHeads, Control(
        "Key/value heads", bounds=(1, MAX_HEADS),
        help="Fewer than the query heads: grouped-query attention; must divide them.")] = 2
    # d: dimensions per head (≤ 16)
    head_dim: Annotated[HeadDim, Control("Head dimension d", bounds=(1, MAX_HEAD_DIM),
                                         help="Numbers per head vector (1–16).")] = 4
    # a token attends to itself and earlier tokens only
    causal: Annotated[bool, Control(
        "Mask", kind="choice", options={True: "causal", False: "none (full)"},
        help="Causal: a token attends to itself and earlier tokens; blocks above the diagonal "
             "are skipped.")] = True
    # none: contiguous blocks; zigzag: chunks r and 2cp−1−r
    balance: Annotated[Balance, Control(
        "Layout", kind="choice", options={"none": "contiguous", "zigzag": "zigzag"},
        help="Zigzag (Megatron): 2·cp chunks, rank r holds chunks r and 2·cp−1−r, so the causal "
             "work is even.")] = "none"
    # seed of Q, K and V
    seed: Annotated[Seed, Control("Seed", kind="number", help="Of the seeded Q, K and V.")] = 0
    # the real model of the memory and time panels
    preset: PresetField = "llama3-8b"
    # tokens of one sequence (Llama 3: 128k); up to 256 the worked example runs all of them
    seq: SeqField = 131072
    # sequences per micro-batch b
    micro_batch: MicroBatchField = 1
    # none: keep the s² softmax; selective: FlashAttention
    recompute: Annotated[Recompute, Control(
        "Attention kept for backward", kind="choice", widget="select",
        options={"none": "none: the s² softmax", "selective": "FlashAttention statistics",
                 "full": "full recompute"})] = "selective"
    # NVLink inside a node (H100: 450 GB/s each way)
    intra_node_gbs: NvlinkField = 450.0

    @property
    def example_tokens(self) -> int:
        """The worked example's length: the whole sequence up to :data:`MAX_SEQ` tokens, else
        ``example_seq``."""
        return self.seq if self.seq <= MAX_SEQ else self.example_seq

    @property
    def example_field(self) -> str:
        """The parameter that sets the example's length: ``seq`` or ``example_seq``."""
        return "seq" if self.seq <= MAX_SEQ else "example_seq"

    def stage(self) -> dict:
        """The worked example's values that a real run takes (:data:`STAGE_FIELDS`), its length
        as ``example_seq``."""
        return {name: self.example_tokens if name == "example_seq" else getattr(self, name)
                for name in STAGE_FIELDS}

    @property
    def ring_size(self) -> int:
        """Ranks in each ring: cp for ring, 1 for ulysses, cp / ulysses for hybrid."""
        return self.cp // self.a2a_size

    @property
    def a2a_size(self) -> int:
        """Ranks in each all-to-all group: 1 for ring and all_gather, cp for ulysses."""
        return {"ring": 1, "all_gather": 1, "ulysses": self.cp, "hybrid": self.ulysses}[
            self.method]

    @model_validator(mode="after")
    def _consistent(self) -> ContextParallelParams:
        for name, most, why in (("heads", MAX_HEADS, "the model's own heads are the preset's"),
                                ("head_dim", MAX_HEAD_DIM, "every number is shown")):
            value = getattr(self, name)
            if value > most:
                raise Invalid(name, f"{name} ({value}) is more than this worked example computes "
                                    f"number by number: use {name} ≤ {most} ({why})")
        h, kv = self.heads, self.kv_heads
        if kv > h:
            raise Invalid("kv_heads", f"kv_heads ({kv}) must not exceed heads ({h})")
        if h % kv:
            raise Invalid("kv_heads", f"kv_heads ({kv}) must divide heads ({h}): each key/value "
                                      f"head serves a whole group of query heads"
                                      f"{suggest(self, 'kv_heads', divisors_near(h, kv))}")
        parts = 2 * self.cp if self.balance == "zigzag" else self.cp
        n, name = self.example_tokens, self.example_field
        if n % parts:
            how = (f"2·cp ({parts}): zigzag cuts it into 2·cp chunks" if self.balance == "zigzag"
                   else f"cp ({parts}): each rank holds {name}/cp tokens")
            raise Invalid(name, f"{name} ({n}) must be divisible by {how}"
                                f"{suggest(self, name, multiples_near(n, parts, MAX_SEQ))}")
        if self.method == "ulysses":
            for name, value in (("heads", h), ("kv_heads", kv)):
                if value % self.cp:
                    raise Invalid("cp", f"cp ({self.cp}) must divide {name} ({value}) for "
                                        f"ulysses: each rank attends with {name}/cp whole heads"
                                        f"{suggest(self, 'cp', divisors_near(value, self.cp, 2))}")
        if self.method == "hybrid":
            u = self.ulysses
            for name, value in (("cp", self.cp), ("heads", h), ("kv_heads", kv)):
                if value % u:
                    raise Invalid("ulysses", f"ulysses ({u}) must divide {name} ({value}) for "
                                             f"hybrid: cp = ulysses × ring size and each rank "
                                             f"of an all-to-all group takes heads/ulysses heads"
                                             f"{suggest(self, 'ulysses', divisors_near(value, u))}")
        return self
