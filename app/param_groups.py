"""Parameter groups: the model shape, the network, the GPU and the 5D layout, each field defined
once.

Many scenes ask for the same things — a model (``preset`` and its shape), a cluster's links
(``alpha_us``, ``intra_node_gbs``, ``inter_node_gbs``, ``gpus_per_node``), a GPU, a layout of
ranks (``tp``, ``cp``, ``ep``, ``dp``, ``pp`` and their ``order``) — and DESIGN
principles 11 and 13 want each of them to have one name, one range, one label and one help
text, so that one scenario (a model on a cluster) flows from scene to scene in the query string.
This module holds those definitions:

* a **field type** per field (``HiddenField``, ``NvlinkField`` …): the shared type of
  app/params.py (its range and description) with the one :class:`~app.params.Control` that
  draws it, tagged with its group;
* a **mixin** per group (:class:`ModelShapeGroup`, :class:`NetworkGroup`, :class:`GpuGroup`,
  :class:`LayoutGroup`) that declares the whole group with its usual defaults — and, for the
  model shape, the one meaning of an empty shape field (:meth:`ModelShapeGroup.shape`) and the
  one validator of a shape (:func:`shape_problem`).

A scene takes a whole group by inheriting its mixin (``class ZeroParams(NetworkGroup)``), or a
few fields of a group by declaring them with the group's field types (``seq: SeqField = 2048``).
Where a scene needs another default it declares the field again with the same field type and
its own default and comment — ``intra_node_gbs: NvlinkField = 450.0  # H100 NVLink`` — which
types no second range, label or help (tests/api/test_controls.py holds every group field of
every scene to its group's definition). The page lays a group out with
``{{ group(model, "network", v) }}`` (templates/_partials/fields.html): the group's fields the
model has, in the group's order.

The layout is a group as a whole: its order names all five axes, so a scene takes all of it
(:class:`LayoutGroup`) or none — a scene that asks for one size alone (/memory's t, /zero's N_d)
draws its own control over the shared type (app.params.Tp, Dp …), with its own label and widget.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import model_validator

from app.catalog.gpus import GPU_TEXTS
from app.catalog.models import PRESET_TEXTS, PRESETS, ModelShape, resolve
from app.params import (GROUP_ORDER, AlphaUs, Control, Cp, Dp, Ep, Ffn, GpuModel, GpusPerNode,
                        GpuTflops, Heads, Hidden, InterNodeGBs, IntraNodeGBs, Invalid, KvHeads,
                        Layers, MicroBatch, ModelPreset, Order, Pp, SceneParams, Seq, Tp, Vocab,
                        divisors_near, suggest)

MODEL, NETWORK, GPU, LAYOUT = "model", "network", "gpu", "layout"
"""The groups' names, as ``group()`` in fields.html takes them."""

# --- the model shape ------------------------------------------------------------------------

PresetField = Annotated[ModelPreset, Control(
    "Model", kind="choice", widget="select", options=PRESET_TEXTS, group=MODEL,
    help="GPT: LayerNorm, GeLU, dropout, tied embeddings. Llama 3: RMSNorm, SwiGLU, "
         "grouped-query attention, untied embeddings, no dropout.")]
LayersField = Annotated[Layers, Control("Layers L", kind="number", group=MODEL)]
HiddenField = Annotated[Hidden, Control(
    "Hidden size h", kind="number", group=MODEL,
    help="The model's width: every token's activation vector holds h numbers.")]
HeadsField = Annotated[Heads, Control("Attention heads a", kind="number", group=MODEL)]
KvHeadsField = Annotated[KvHeads, Control(
    "Key/value heads", kind="number", group=MODEL,
    help="Fewer than a: grouped-query attention; they must divide a.")]
FfnField = Annotated[Ffn, Control("MLP size f", kind="number", group=MODEL,
                                  help="GPT: 4h; Llama's SwiGLU about 3.5h.")]
VocabField = Annotated[Vocab, Control("Vocabulary V", kind="number", group=MODEL)]
SeqField = Annotated[Seq, Control("Sequence length s", kind="number", group=MODEL,
                                  help="Tokens in one sequence.")]
MicroBatchField = Annotated[MicroBatch, Control(
    "Micro-batch b", bounds=(1, 64), group=MODEL,
    help="Sequences per forward/backward pass; activations grow with it.")]

SHAPE_FIELDS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq")
"""The sizes a query may lay over the preset (empty: the preset's)."""
PRESET_SIZES = {key: {f: getattr(m, f) for f in SHAPE_FIELDS} for key, m in PRESETS.items()}
"""Each preset's sizes: what an empty shape field stands for (the placeholders of the form,
and what choosing a preset shows in them)."""


def shape_problem(params: SceneParams, m: ModelShape) -> Invalid | None:
    """Why shape ``m`` (``params``' model, overrides laid over the preset) cannot be, naming the
    field to change and the numbers, with values to try — or None. The one validator of a model
    shape: every scene with one asks it."""
    if m.kv_heads > m.heads:
        return Invalid("kv_heads", f"kv_heads ({m.kv_heads}) must not exceed heads ({m.heads})")
    if m.heads % m.kv_heads:
        return Invalid("kv_heads", f"kv_heads ({m.kv_heads}) must divide heads ({m.heads}): "
                                   f"each key/value head serves a whole group of query heads")
    if m.hidden % m.heads:
        return Invalid("heads", f"heads ({m.heads}) must divide hidden ({m.hidden}): each head "
                                f"gets hidden/heads dimensions"
                                f"{suggest(params, 'heads', divisors_near(m.hidden, m.heads))}")
    return None


class ShapeSizes(SceneParams):
    """The sizes that may override a preset, each empty by default (the preset's), and what a
    shape with them is (:meth:`shape`). A model with them has a ``preset`` and a ``seq``: the
    model shape group's (:class:`ModelShapeGroup`) or its own (the planner's, which also knows
    MoE presets)."""

    # transformer layers L (empty: the preset's)
    layers: LayersField | None = None
    # hidden size h (empty: the preset's)
    hidden: HiddenField | None = None
    # attention heads a (empty: the preset's)
    heads: HeadsField | None = None
    # key/value heads (empty: the preset's grouping while it divides a, else a)
    kv_heads: KvHeadsField | None = None
    # MLP inner size (empty: hidden × the preset's ratio)
    ffn: FfnField | None = None
    # vocabulary V (empty: the preset's)
    vocab: VocabField | None = None

    @model_validator(mode="before")
    @classmethod
    def _blank_is_preset(cls, data):
        """An empty shape field (a cleared number box) means the preset's."""
        if isinstance(data, dict):
            blank = [n for n in SHAPE_FIELDS if isinstance(data.get(n), str)
                     and data[n].strip() == ""]
            if blank:
                data = {**data, **dict.fromkeys(blank)}
        return data

    def shape(self) -> ModelShape:
        """The preset with the explicit sizes laid over it (app.catalog.models.resolve)."""
        return resolve(self.preset, layers=self.layers, hidden=self.hidden, heads=self.heads,
                       kv_heads=self.kv_heads, ffn=self.ffn, vocab=self.vocab, seq=self.seq)


class ModelShapeGroup(ShapeSizes):
    """A published model (``preset``) with any of its sizes overridden, the sequence and the
    micro-batch — the whole model shape group: chapters 1 and 8 (the memory ledger,
    checkpointing). Its shape is checked by :func:`shape_problem`."""

    # a published model; the sizes override it
    preset: PresetField = "llama3-8b"
    # tokens per sequence s (empty: the preset's context)
    seq: SeqField | None = None
    # sequences per micro-batch b
    micro_batch: MicroBatchField = 1

    @model_validator(mode="after")
    def _shape_consistent(self):
        problem = shape_problem(self, self.shape())
        if problem is not None:
            raise problem
        return self


# --- the network ----------------------------------------------------------------------------

AlphaField = Annotated[AlphaUs, Control("Latency α", unit="µs", bounds=(0, 50), step=0.5,
                                        group=NETWORK, help="Fixed cost of every message.")]
NvlinkField = Annotated[IntraNodeGBs, Control(
    "NVLink", unit="GB/s", bounds=(10, 1000), step=10, group=NETWORK,
    help="Bandwidth per GPU between the GPUs of one node (A100 300 GB/s, H100 450).")]
InfinibandField = Annotated[InterNodeGBs, Control(
    "InfiniBand", unit="GB/s", bounds=(1, 400), group=NETWORK,
    help="Bandwidth per GPU between nodes (400 Gb/s ≈ 50 GB/s).")]
GpusPerNodeField = Annotated[GpusPerNode, Control(
    "GPUs per node", kind="choice", widget="select", options=(1, 2, 4, 8, 16, 32, 64),
    group=NETWORK,
    help="Rank r runs on node r // gpus_per_node: NVLink inside a node, InfiniBand across.")]


class NetworkGroup(SceneParams):
    """The α–β model's cluster (chapter 2): a latency per message, two link speeds and where
    the nodes end."""

    # α: latency of one message
    alpha_us: AlphaField = 5.0
    # β⁻¹ inside a node (A100 NVLink ≈ 300 GB/s)
    intra_node_gbs: NvlinkField = 300.0
    # β⁻¹ between nodes (400 Gb/s InfiniBand ≈ 50 GB/s)
    inter_node_gbs: InfinibandField = 50.0
    # GPUs one NVLink domain holds
    gpus_per_node: GpusPerNodeField = 8


# --- the GPU --------------------------------------------------------------------------------

GpuField = Annotated[GpuModel, Control("GPU", kind="choice", widget="select", options=GPU_TEXTS,
                                       group=GPU, help="Its memory and its dense BF16 peak.")]
GpuTflopsField = Annotated[GpuTflops, Control(
    "GPU throughput", kind="number", unit="TFLOP/s", step="any", group=GPU,
    help="Sustained bf16 matmul rate of one GPU, achieved rather than peak (PTD-P's A100: 163 "
         "of 312; an H100 400–600 of 989). Empty, where the page picks a GPU: its dense BF16 "
         "peak.")]


class GpuGroup(SceneParams):
    """A GPU and, optionally, what it achieves (empty: its dense BF16 peak)."""

    # the GPU: its memory and dense BF16 peak
    gpu: GpuField = "h100-80"
    # sustained matmul rate (empty: the GPU's dense BF16 peak)
    gpu_tflops: GpuTflopsField | None = None

    @model_validator(mode="before")
    @classmethod
    def _blank_is_peak(cls, data):
        if isinstance(data, dict) and isinstance(data.get("gpu_tflops"), str) \
                and data["gpu_tflops"].strip() == "":
            data = {**data, "gpu_tflops": None}
        return data


# --- the layout -----------------------------------------------------------------------------

AXES: tuple[str, ...] = ("tp", "cp", "ep", "dp", "pp")
"""The five parallel axes (Megatron-LM's names), fastest first in its default order
tp-cp-ep-dp-pp: the layout group's order."""


def powers_of_two(high: int) -> tuple[int, ...]:
    """1, 2, 4, … up to ``high`` (and ``high`` itself): the stops of a size slider."""
    stops = tuple(2 ** k for k in range(0, 21) if 2 ** k <= high)
    return stops if stops[-1] == high else (*stops, high)


def size_slider(label: str, size_type, help: str, group: str = "") -> Control:
    """A size slider over the powers of two up to the type's own upper bound (a range is
    written once: in the type). A page may stop it lower (``field(…, max=16)``)."""
    high = next(m.le for m in size_type.__metadata__[0].metadata if getattr(m, "le", None))
    return Control(label, kind="values", values=powers_of_two(high), help=help, group=group)


TpField = Annotated[Tp, size_slider("Tensor parallel tp", Tp,
                                    "Splits every weight matrix: heads, MLP and vocabulary.",
                                    LAYOUT)]
CpField = Annotated[Cp, size_slider("Context parallel cp", Cp,
                                    "Splits every sequence; K/V go round a ring.", LAYOUT)]
EpField = Annotated[Ep, size_slider("Expert parallel ep", Ep,
                                    "Carved out of dp·cp: must divide it and the experts.",
                                    LAYOUT)]
DpField = Annotated[Dp, size_slider("Data parallel dp", Dp,
                                    "Replicas (context-parallel ranks not counted): world = "
                                    "tp·cp·dp·pp.", LAYOUT)]
PpField = Annotated[Pp, size_slider("Pipeline stages pp", Pp,
                                    "Splits the layers; activations move stage to stage.",
                                    LAYOUT)]
OrderField = Annotated[Order, Control(
    "Order (fastest first)", kind="text",
    options=("tp-cp-ep-dp-pp", "tp-cp-pp-ep-dp", "cp-tp-ep-dp-pp", "tp-dp-cp-ep-pp",
             "dp-cp-ep-tp-pp", "pp-tp-cp-ep-dp", "pp-dp-ep-cp-tp"), group=LAYOUT,
    help="tp, cp, ep, dp and pp once each, joined by “-”. Megatron-LM's default "
         "tp-cp-ep-dp-pp keeps consecutive ranks in one TP group.")]


class LayoutGroup(SceneParams):
    """A 5D layout of ranks (chapter 11): the five sizes and Megatron-LM's rank order, as
    /parallelism lays it out and /train runs it. Expert parallelism is carved out of dp·cp, so
    the world is tp·cp·dp·pp; the order's and the sizes' rules are /parallelism's
    (app/sim/parallelism/params.py), the one validator of a layout."""

    # tensor-parallel size
    tp: TpField = 2
    # context-parallel size
    cp: CpField = 1
    # expert-parallel size, carved out of dp·cp
    ep: EpField = 2
    # data-parallel replicas (context-parallel ranks not counted)
    dp: DpField = 2
    # pipeline stages
    pp: PpField = 2
    # Megatron-LM's rank order, fastest-varying axis first
    order: OrderField = "tp-cp-ep-dp-pp"

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.dp * self.pp


GROUPS: dict[str, dict[str, object]] = {
    MODEL: {"preset": PresetField, "layers": LayersField, "hidden": HiddenField,
            "heads": HeadsField, "kv_heads": KvHeadsField, "ffn": FfnField,
            "vocab": VocabField, "seq": SeqField, "micro_batch": MicroBatchField},
    NETWORK: {"alpha_us": AlphaField, "intra_node_gbs": NvlinkField,
              "inter_node_gbs": InfinibandField, "gpus_per_node": GpusPerNodeField},
    GPU: {"gpu": GpuField, "gpu_tflops": GpuTflopsField},
    LAYOUT: {"tp": TpField, "cp": CpField, "ep": EpField, "dp": DpField, "pp": PpField,
             "order": OrderField},
}
"""Every group's fields and their types, in the groups' order: a page lays a group out in this
order and a canonical query lists it so (app.params.group_fields); the docs' tables and the tests
read it too."""
GROUP_ORDER.update({group: tuple(fields) for group, fields in GROUPS.items()})
