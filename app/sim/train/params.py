"""The parameters of ``/train`` (chapter 11): a tiny GPT, a 5D layout, how it is trained, and the
machine the cost model predicts for — every field's type, range, default and help defined once
(DESIGN principle 13): the sliders, the 422 messages, OpenAPI, the worker's command line
(workers/train/train.py) and the torchrun line on the page all read them.

The layout's own rules (order names tp, cp, ep, dp, pp once each; ep divides dp·cp and the
experts; cp divides seq; dense and expert layers get the same pipeline stages) are
``/parallelism``'s, checked by building its params (one validator: DESIGN principle 11). The
model adds what a tensor-, context- and pipeline-parallel model needs: tp divides heads,
kv_heads, ffn and vocab; pp divides layers; zigzag CP needs 2·cp to divide seq.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, ValidationError, model_validator

from app.params import (
    AlphaUs,
    Control,
    Ffn,
    Heads,
    Hidden,
    Invalid,
    KvHeads,
    Layers,
    LearningRate,
    Microbatches,
    Recompute,
    Seed,
    Seq,
    Steps,
    Vocab,
    WeightDecay,
    ZeroStage,
    divisors_near,
    suggest,
)
from app.param_groups import GROUPS, LAYOUT, LayoutGroup
from app.sim.moe.params import LossCoeff
from app.sim.parallelism.params import Experts, ParallelismParams, TopK

MAX_WORK = 1536
"""Bound on world × m × layers/pp × (2 + cp): the block passes of one step on all ranks
together, a ring of cp steps in each — one step's tasks stay a few thousand (simulated, drawn
and answered well under half a second)."""

MAX_WORLD = 16
"""Ranks the scene predicts and draws (tp·cp·dp·pp); a real run on this server takes at most 8
(the job runner's max_world)."""

TINY = {"layers": 16, "hidden": 256, "heads": 32, "kv_heads": 32, "ffn": 1024, "vocab": 1024,
        "seq": 256, "experts": 16, "microbatches": 16, "steps": 20}
"""The tiny model's bounds: small enough that eight CPU ranks train it in seconds and that one
step's events (every pass of every micro-batch on every rank) stay drawable."""

Launchers = Annotated[int, Field(ge=1, le=2, description="torchrun launchers (nodes) of a real "
                                                         "run")]
GradNorm = Annotated[float, Field(gt=0, le=1e6, description="clip gradients to this global "
                                                            "L2 norm")]
Gflops = Annotated[float, Field(gt=0, le=1e7, description="sustained matmul rate of one rank, "
                                                          "GFLOP/s")]
KernelUs = Annotated[float, Field(ge=0, le=1e4, description="fixed cost of one kernel (an op "
                                                            "launch), µs")]
LinkGBs = Annotated[float, Field(gt=0, le=10000, description="bandwidth between two ranks, "
                                                             "GB/s")]
RUN_FIELDS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "experts", "top_k",
              "tp", "cp", "pp", "dp", "ep", "order", "zero", "schedule", "microbatches",
              "recompute", "sequence_parallel", "steps", "seed", "dtype", "lr", "weight_decay",
              "clip", "aux_loss_coeff")
"""The fields a real run takes (workers/train/train.py's options); the cost model's machine
(MACHINE_FIELDS) is measured by the run itself, and ``nodes`` is how it is launched."""
MACHINE_FIELDS = ("gflops", "kernel_us", "alpha_us", "link_gbs")
TrainDtype = Literal["float64", "float32"]
Schedule = Literal["gpipe", "1f1b"]

CPU = {"gflops": 2.0, "kernel_us": 12.0, "alpha_us": 60.0, "link_gbs": 1.0}
"""The cost model's default machine: one rank's share of a 2-core CPU running several ranks
(float64 matmuls at the tiny model's sizes, PyTorch's per-op overhead, gloo over loopback).
A real run measures its own (workers/train/calibrate.py), predicts the step again with it and
reports those numbers, which can be typed into these fields."""
GPU = {"gflops": 400_000.0, "kernel_us": 5.0, "alpha_us": 5.0, "link_gbs": 450.0}
"""An H100 node for comparison: ~40 % of 989 dense TFLOP/s, a ~5 µs kernel launch, NVLink."""


class TrainParams(LayoutGroup):
    """The layout group's five sizes and order (as /parallelism's, its sliders stopped at
    :data:`MAX_WORLD` on the page), the tiny model, its training and the cost model's machine."""

    max_world: ClassVar[int] = MAX_WORLD

    # transformer layers of the tiny model (pp must divide them)
    layers: Annotated[Layers, Control("Layers", bounds=(1, TINY["layers"]),
                                      help="Transformer blocks; pp stages hold layers/pp "
                                           "each.")] = 4
    # hidden size h (heads · head_dim)
    hidden: Annotated[Hidden, Control("Hidden h", kind="values",
                                      values=(8, 16, 32, 64, 128, 256),
                                      help="The model width: heads × head_dim.")] = 32
    # query heads (tp must divide them)
    heads: Annotated[Heads, Control("Query heads", kind="values", values=(1, 2, 4, 8, 16, 32),
                                    help="Split over the tp ranks: tp must divide heads.")] = 8
    # key/value heads (GQA: query head j reads kv head j // (heads / kv_heads))
    kv_heads: Annotated[KvHeads, Control(
        "Key/value heads", kind="values", values=(1, 2, 4, 8, 16, 32),
        help="Grouped-query attention: fewer than the query heads; tp must divide them too.")] = 4
    # SwiGLU inner size (each expert's, with experts > 1)
    ffn: Annotated[Ffn, Control("MLP inner size", kind="values",
                                values=(16, 32, 64, 128, 256, 512, 1024),
                                help="SwiGLU's inner width (of every expert in an MoE "
                                     "layer); tp must divide it.")] = 64
    # vocabulary (vocab-parallel embedding and cross-entropy over tp)
    vocab: Annotated[Vocab, Control("Vocabulary", kind="values",
                                    values=(16, 32, 64, 128, 256, 512, 1024),
                                    help="Split over the tp ranks (vocab-parallel).")] = 64
    # tokens per sequence (cp splits it)
    seq: Annotated[Seq, Control("Sequence s", kind="values", values=(8, 16, 32, 64, 128, 256),
                                help="Tokens of one sequence; cp ranks hold 2 zigzag chunks "
                                     "each.")] = 32
    # experts per MoE layer (1: every MLP dense)
    experts: Annotated[Experts, Control(
        "Experts", kind="values", values=(1, 2, 4, 8, 16),
        help="1: dense. More: every block's MLP becomes a top-k routed mixture of experts.")] = 4
    # experts each token goes to
    top_k: Annotated[TopK, Control("Top-k", bounds=(1, 4), help="Experts per token.")] = 2
    # 0: every replica keeps AdamW's states; 1: sharded over dp·cp (ZeRO-1)
    zero: Annotated[ZeroStage, Control(
        "ZeRO", kind="choice", options={0: "0 · all-reduce", 1: "1 · sharded AdamW"},
        help="1: reduce-scatter the gradients, update a shard, all-gather the parameters.")] = 0
    # pipeline schedule
    schedule: Annotated[Schedule, Control("Schedule", kind="choice",
                                          options={"gpipe": "GPipe", "1f1b": "1F1B"},
                                          help="GPipe: every forward, then every backward. "
                                               "1F1B: Megatron's one forward, one backward.")] = \
        "1f1b"
    # micro-batches per replica per step (one sequence each)
    microbatches: Annotated[Microbatches, Control(
        "Micro-batches m", bounds=(1, TINY["microbatches"]),
        help="Sequences each replica runs per step; the global batch is dp × m.")] = 4
    # activation recomputation
    recompute: Annotated[Recompute, Control(
        "Recompute", kind="choice",
        help="Selective: the attention core again in backward. Full: the whole block.")] = "none"
    # TP's all-reduces become all-gather + reduce-scatter, activations split along s
    sequence_parallel: Annotated[bool, Control(
        "Sequence parallelism", kind="flag",
        help="Norms and residuals on seq/tp tokens; all-gather before and reduce-scatter "
             "after each TP block.")] = False
    # optimizer steps trained (the deck draws one)
    steps: Annotated[Steps, Control("Steps", bounds=(1, TINY["steps"]),
                                    help="AdamW steps of the real run; the deck draws one.")] = 5
    # seed of the weights and of the token stream
    seed: Annotated[Seed, Control("Seed", kind="number")] = 0
    # arithmetic of the real run (float64: exact to ~1e-15)
    dtype: Annotated[TrainDtype, Control("dtype", kind="choice",
                                         help="float64 must match one process to 1e-9; "
                                              "float32 reports its difference.")] = "float64"
    # AdamW learning rate
    lr: Annotated[LearningRate, Control("Learning rate", kind="number", step="any")] = 0.01
    # AdamW's decoupled weight decay
    weight_decay: Annotated[WeightDecay, Control("Weight decay", kind="number",
                                                 step="any")] = 0.01
    # global gradient-norm clipping threshold
    clip: Annotated[GradNorm, Control("Clip norm", kind="number", step="any",
                                      help="The global L2 norm over every rank's shard.")] = 1.0
    # α of the MoE layers' load-balancing loss, as /moe's (0: none, every state as before)
    aux_loss_coeff: Annotated[LossCoeff, Control(
        "Load-balancing coefficient α", kind="number", step=0.001,
        help="Switch/GShard's auxiliary loss α·E·Σᵢ fᵢPᵢ per MoE layer and micro-batch, added "
             "to the objective (Megatron's --moe-aux-loss-coeff); 0: none.")] = 0.0
    # launchers of the real run: 2 = two torchrun "nodes" on loopback
    nodes: Annotated[Launchers, Control(
        "Nodes (real run)", kind="choice", options={1: "1", 2: "2 on loopback"},
        help="2: two torchrun launchers (--nnodes 2) meet on 127.0.0.1; ranks r ≥ world/2 "
             "are node 1's.")] = 1
    # cost model: one rank's matmul rate
    gflops: Annotated[Gflops, Control("Matmul GFLOP/s per rank", kind="number", step="any",
                                      help="A real run measures its own.")] = CPU["gflops"]
    # cost model: fixed cost of each kernel
    kernel_us: Annotated[KernelUs, Control("Per-op overhead µs", kind="number",
                                           step="any")] = CPU["kernel_us"]
    # cost model: latency of one message
    alpha_us: Annotated[AlphaUs, Control("Latency α µs", kind="number", step="any")] = \
        CPU["alpha_us"]
    # cost model: bandwidth between two ranks
    link_gbs: Annotated[LinkGBs, Control("Link GB/s β", kind="number", step="any")] = \
        CPU["link_gbs"]

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def moe(self) -> bool:
        return self.experts > 1

    @property
    def gpus_per_node(self) -> int:
        """Ranks per launcher: the whole world on one node, half of it on each of two."""
        return self.world // self.nodes

    @property
    def batch(self) -> int:
        """Sequences in one step's global batch: dp replicas × m micro-batches of one."""
        return self.dp * self.microbatches

    def layout_params(self) -> ParallelismParams:
        """The same layout as ``/parallelism`` sees it (its rules, its groups)."""
        return ParallelismParams(**self.model_dump(include=set(GROUPS[LAYOUT])),
                                 gpus_per_node=max(1, self.gpus_per_node),
                                 experts=self.experts, top_k=min(self.top_k, 8),
                                 seq=self.seq, microbatches=self.microbatches)

    @model_validator(mode="after")
    def _consistent(self) -> TrainParams:
        for name in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "experts",
                     "microbatches", "steps"):
            value, most = getattr(self, name), TINY[name]
            if value > most:
                raise Invalid(name, f"{name} ({value}) is more than the tiny model trains: use "
                                    f"{name} ≤ {most} (the planner sizes real models)")
        if self.world > MAX_WORLD:
            raise Invalid("dp", f"world = tp·cp·dp·pp = {self.tp}·{self.cp}·{self.dp}·{self.pp}"
                                f" = {self.world} must be at most {MAX_WORLD} ranks on this "
                                f"page (a real run: at most 8)")
        self._model_rules()
        work = self.world * self.microbatches * (self.layers // self.pp) * (2 + self.cp)
        if work > MAX_WORK:
            raise Invalid("microbatches", f"world · m · layers/pp · (2 + cp) = {self.world} · "
                                          f"{self.microbatches} · {self.layers // self.pp} · "
                                          f"{2 + self.cp} = {work}; one step draws at most "
                                          f"{MAX_WORK}: lower microbatches, layers or cp")
        try:
            self.layout_params()
        except ValidationError as error:            # /parallelism's own rule and message
            cause = (error.errors()[0].get("ctx") or {}).get("error")
            if isinstance(cause, Invalid):
                raise Invalid(cause.param, cause.message) from None
            raise
        return self

    def _model_rules(self) -> None:
        h, a, kv = self.hidden, self.heads, self.kv_heads
        if h % a:
            raise Invalid("heads", f"heads ({a}) must divide hidden ({h}): every head is "
                                   f"hidden/heads wide{suggest(self, 'heads', divisors_near(h, a))}")
        if a % kv:
            raise Invalid("kv_heads", f"kv_heads ({kv}) must divide heads ({a}): each key/value "
                                      f"head serves a whole group of query heads"
                                      f"{suggest(self, 'kv_heads', divisors_near(a, kv))}")
        for name in ("heads", "kv_heads", "ffn", "vocab"):
            value = getattr(self, name)
            if value % self.tp:
                raise Invalid("tp", f"tp ({self.tp}) must divide {name} ({value}): each "
                                    f"tensor-parallel rank holds {name}/tp of them"
                                    f"{suggest(self, 'tp', divisors_near(value, self.tp))}")
        if self.layers % self.pp:
            raise Invalid("pp", f"pp ({self.pp}) must divide layers ({self.layers}): every "
                                f"stage holds layers/pp blocks"
                                f"{suggest(self, 'pp', divisors_near(self.layers, self.pp))}")
        if self.cp > 1 and self.seq % (2 * self.cp):
            raise Invalid("cp", f"2·cp ({2 * self.cp}) must divide seq ({self.seq}): zigzag "
                                f"context parallelism cuts a sequence into 2·cp chunks"
                                f"{suggest(self, 'cp', divisors_near(self.seq // 2, self.cp))}")
        if self.sequence_parallel and (self.seq // self.cp) % self.tp:
            raise Invalid("sequence_parallel", f"sequence parallelism splits each rank's "
                                               f"seq/cp = {self.seq // self.cp} tokens over tp "
                                               f"({self.tp}), which must divide them")
        if self.moe and self.top_k > self.experts:
            raise Invalid("top_k", f"top_k ({self.top_k}) must be at most experts "
                                   f"({self.experts})")
        if self.zero > 1:
            raise Invalid("zero", f"zero ({self.zero}): this framework shards AdamW's states "
                                  f"(ZeRO 1) or not (0); stages 2 and 3 are on /zero")
        if self.nodes == 2 and self.world % 2:
            raise Invalid("nodes", f"two launchers start world/2 ranks each, so world "
                                   f"({self.world}) must be even for nodes 2")
