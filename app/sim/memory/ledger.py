"""Training memory per GPU — the ledger of chapter 1.

Four things fill a GPU during training (Rajbhandari et al. 2019, "ZeRO", §3): the parameters,
their gradients and the optimizer's states — together the *model states* — and the
*activations* that the forward pass keeps for backward (Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models"). A few buffers come on top.

Model states (:mod:`app.sim.memory.model_states`, ZeRO Table 1). With Ψ parameters, mixed-precision
Adam keeps 2Ψ + 2Ψ + 12Ψ bytes, fp32 Adam 4Ψ + 4Ψ + 8Ψ. Every state is split evenly over
t·p (tensor × pipeline parallel; DESIGN.md's convention), then ZeRO stage ≥ 1 divides the
optimizer states by N_d (data-parallel size), stage ≥ 2 the gradients too, stage 3 the
parameters too. Adafactor's factored second moments are counted from the tensor shapes (a row
and a column vector per matrix).

Activations (:mod:`app.sim.memory.activations`, Korthikanti Table 2): per layer and micro-batch
sbh(34 + 5as/h) with 16-bit activations, divided by t and recomputation as the table says.
Pipeline rule (§4.2.3): under 1F1B the first stage holds p micro-batches of its L/p layers, i.e.
L layers' worth; the last stage holds one. Input and output layers (§4.3): the first stage keeps
the embedding's dropout mask sbh per micro-batch in flight; the last stage keeps the final norm's
and the output projection's inputs (2sbh each) and the fp32 logits of the cross-entropy, 4sbV/t.
Under sequence parallelism everything outside the attention/MLP cores is split along s as well.

Buffers are assumptions, tagged as such: CUDA context and workspaces, the 16-bit gradient of
the logits, ZeRO-3's two gathered layers (the current one and the prefetched next) and one
layer's gradient, communication buckets.

The ledger is the busiest GPU's: with pp > 1 both ends of the pipeline are computed and the one
with the higher peak is shown (almost always the first stage).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.sim.memory import model_states
from app.sim.memory.activations import LayerShape, kept_terms, per_layer_bytes, pipeline_in_flight
from app.catalog.models import ModelShape
from app.humanize import human_bytes

CATEGORIES = ("params", "grads", "optimizer", "activations", "buffers")
MODEL_STATES = CATEGORIES[:3]
GiB = 2**30
CONTEXT_BYTES = 1 * GiB
"""CUDA context, cuBLAS workspace and NCCL buffers: typically 0.5–2 GiB per process."""
BUCKET_BYTES = 25 * 2**20
"""PyTorch DDP's default gradient bucket (bucket_cap_mb = 25)."""

KORTHIKANTI = "Korthikanti et al. 2022, Table 2"
KORTHIKANTI_IO = "Korthikanti et al. 2022, §4.3"
ZERO_PAPER = "Rajbhandari et al. 2019, Table 1"


@dataclass(frozen=True)
class MemoryConfig:
    """One training set-up: a model shape and how it is trained and parallelised."""

    model: ModelShape
    micro_batch: int = 1
    dp: int = 1
    tp: int = 1
    pp: int = 1
    zero: int = 0
    sequence_parallel: bool = False
    recompute: str = "none"
    optimizer: str = "adamw"
    precision: str = "mixed"
    gpu: str = "h100-80"
    param_count: int | None = None
    """Ψ for the model states when given (else counted from the shape)."""

    @property
    def psi(self) -> int:
        return self.param_count or self.model.param_count()

    @property
    def act_bytes(self) -> int:
        return 2 if self.precision == "mixed" else 4

    def layer_shape(self) -> LayerShape:
        m = self.model
        return LayerShape(m.seq, self.micro_batch, m.hidden, m.heads, m.kv_heads, m.ffn,
                          gated_mlp=m.gated_mlp, dropout=m.family == "gpt",
                          act_bytes=self.act_bytes)


@dataclass(frozen=True)
class Item:
    """One line of the ledger: what it is, its bytes on this GPU, and where the number comes
    from (``formula`` in symbols, ``detail`` with the numbers, ``tag`` and ``source``)."""

    key: str
    category: str
    label: str
    bytes: float
    formula: str
    detail: str
    tag: str = "formula"          # formula | assumption | measured
    source: str = ""


@dataclass(frozen=True)
class Stage:
    """What one pipeline stage's GPU holds."""

    name: str                     # "only" (pp = 1), "first" or "last"
    layers_in_flight: int         # layers' worth of activations held at the peak
    items: tuple[Item, ...]

    def bytes(self, category: str) -> float:
        return sum(i.bytes for i in self.items if i.category == category)

    @property
    def total(self) -> float:
        """Model states + activations (the contract's ``per_gpu_bytes.total``)."""
        return sum(self.bytes(c) for c in CATEGORIES[:4])

    @property
    def peak(self) -> float:
        return self.total + self.bytes("buffers")


@dataclass(frozen=True)
class Ledger:
    config: MemoryConfig
    stage: Stage                  # the busiest GPU
    other: Stage | None           # the other end of the pipeline (pp > 1)
    per_layer_bytes: float        # one layer, one micro-batch, this GPU

    @property
    def items(self) -> tuple[Item, ...]:
        return self.stage.items

    def bytes(self, category: str) -> float:
        return self.stage.bytes(category)

    @property
    def total(self) -> float:
        return self.stage.total

    @property
    def peak(self) -> float:
        return self.stage.peak


def count(n: float) -> str:
    """A parameter count in words: 124 M, 8.03 B, 1.2 T."""
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.3g}"


# --- model states ----------------------------------------------------------------------------

def adafactor_elements(model: ModelShape) -> int:
    """Adafactor's second-moment entries for the whole model: rows + columns per matrix (its
    factored estimate), every element for vectors (Shazeer & Stern 2018, §3)."""
    total = 0
    for t in model.tensors():
        size = sum(t.shape) if len(t.shape) >= 2 else t.numel
        total += size * (model.layers if t.place == "layer" else 1)
    return total


def model_state_items(c: MemoryConfig) -> tuple[Item, ...]:
    tp_pp, dp = c.tp * c.pp, c.dp
    split = "/(t·p)" if tp_pp > 1 else ""
    local = c.psi / tp_pp
    states = model_states.per_gpu(c.psi, dp=dp, tp=c.tp, pp=c.pp, zero=c.zero,
                                  optimizer=c.optimizer, precision=c.precision)
    where = f"Ψ = {count(c.psi)}" + (f", t·p = {tp_pp}" if tp_pp > 1 else "")

    def sharded(stage: int) -> tuple[str, str]:
        if c.zero >= stage and dp > 1:
            return "/N_d", f", ÷ N_d = {dp} (ZeRO-{c.zero})"
        return "", ""

    pb = model_states.param_bytes(c.precision)
    dtype = "16-bit" if c.precision == "mixed" else "fp32"
    f3, d3 = sharded(3)
    f2, d2 = sharded(2)
    f1, d1 = sharded(1)
    items = [
        Item("params", "params", f"{dtype} parameters", states.params,
             f"{pb}Ψ{split}{f3}", where + d3, source=ZERO_PAPER),
        Item("grads", "grads", f"{dtype} gradients", states.grads,
             f"{model_states.grad_bytes(c.precision)}Ψ{split}{f2}", where + d2, source=ZERO_PAPER),
    ]
    for name, size in model_states.optimizer_state_parts(c.optimizer, c.precision):
        items.append(Item(f"optimizer.{name.split()[0]}", "optimizer", name,
                          size * local / (dp if c.zero >= 1 else 1),
                          f"{size}Ψ{split}{f1}", where + d1, source=ZERO_PAPER))
    if c.optimizer == "adafactor":
        elements = adafactor_elements(c.model)
        items.append(Item("optimizer.factored", "optimizer", "factored second moments",
                          4 * elements / tp_pp / (dp if c.zero >= 1 else 1),
                          f"4·Σ(rows + cols){split}{f1}",
                          f"{count(elements)} fp32 entries for the whole model{d1}",
                          source="Shazeer & Stern 2018"))
    return tuple(items)


# --- activations -----------------------------------------------------------------------------

def activation_items(c: MemoryConfig, stage: str) -> tuple[tuple[Item, ...], int]:
    """Activation items of one stage, and the layers' worth it holds."""
    m, t, sp = c.model, c.tp, c.sequence_parallel
    per_stage = m.layers // c.pp
    micro_batches = int(pipeline_in_flight(c.pp)) if stage == "first" else 1
    layers = per_stage * micro_batches
    times = "× L" if stage in ("only", "first") else "× L/p"
    how = (f"{per_stage} layers × {micro_batches} micro-batches in flight (1F1B)"
           if stage == "first" else f"{layers} layers")
    norm = "RMSNorm" if m.family == "llama" else "LayerNorm"
    items = [Item(f"activations.{term.name}", "activations",
                  term.name.replace("LayerNorm", norm), term.bytes * layers,
                  f"{term.formula} {times}", f"{human_bytes(term.bytes)} per layer, {how}",
                  source=KORTHIKANTI)
             for term in kept_terms(c.layer_shape(), t, sp, c.recompute)]
    s, b, h, e = m.seq, c.micro_batch, m.hidden, c.act_bytes
    sbh = s * b * h
    shard, by_t = (t, "/t") if sp and t > 1 else (1, "")
    if stage in ("only", "first") and m.family == "gpt":
        items.append(Item("activations.embedding", "activations", "embedding dropout mask",
                          sbh / shard * micro_batches, f"sbh{by_t}" + (" × p" if c.pp > 1 else ""),
                          f"{micro_batches} micro-batch{'es' if micro_batches > 1 else ''} "
                          f"in flight", source=KORTHIKANTI_IO))
    if stage in ("only", "last"):
        once = "one micro-batch, the output layer" + (" on the last stage" if c.pp > 1 else "")
        items += [
            Item("activations.final_norm", "activations", "final norm input", e * sbh / shard,
                 f"{e}sbh{by_t}", once, source=KORTHIKANTI_IO),
            Item("activations.head", "activations", "output layer input", e * sbh / shard,
                 f"{e}sbh{by_t}", once, source=KORTHIKANTI_IO),
            Item("activations.logits", "activations", "logits, fp32 for the loss",
                 4 * s * b * m.vocab / t, "4sbV/t" if t > 1 else "4sbV",
                 f"V = {m.vocab:,}: the cross-entropy works on fp32 logits",
                 source=KORTHIKANTI_IO),
        ]
    return tuple(items), layers


def zero3_unit(m: ModelShape, tp: int) -> float:
    """Φ, what ZeRO-3 gathers at once on one GPU: one transformer layer's parameters (the
    tensors TP splits ÷ tp, the replicated norms and biases whole), or the largest single
    tensor (an embedding) where that is larger."""
    def local(t):
        return t.numel / (tp if t.tp_dim is not None else 1)

    tensors = m.tensors()
    return max(sum(local(t) for t in tensors if t.place == "layer"),
               max(local(t) for t in tensors))


def buffer_items(c: MemoryConfig, stage: str) -> tuple[Item, ...]:
    m = c.model
    items = [Item("buffers.context", "buffers", "CUDA context and workspaces", CONTEXT_BYTES,
                  "≈ 1 GiB", "CUDA context, cuBLAS workspace and NCCL buffers: typically "
                  "0.5–2 GiB; measure yours with torch.cuda.mem_get_info()", "assumption")]
    if stage in ("only", "last") and c.precision == "mixed":
        items.append(Item("buffers.logits_grad", "buffers", "gradient of the logits",
                          2 * m.seq * c.micro_batch * m.vocab / c.tp,
                          "2sbV/t" if c.tp > 1 else "2sbV",
                          "Megatron's cross-entropy writes the gradient into the saved fp32 "
                          "softmax; the 16-bit copy for the output layer's backward is extra",
                          "assumption", "Megatron-LM, vocab-parallel cross-entropy"))
    if c.zero == 3 and c.dp > 1:
        phi = zero3_unit(m, c.tp)
        p_bytes = model_states.param_bytes(c.precision)
        g_bytes = model_states.grad_bytes(c.precision)
        items.append(Item("buffers.zero3", "buffers", "ZeRO-3 gathered layers",
                          (2 * p_bytes + g_bytes) * phi, f"2·{p_bytes}·Φ + {g_bytes}·Φ",
                          f"Φ = {count(phi)}: one layer's parameters on this GPU (or the largest "
                          "tensor, if larger), gathered whole; the next layer is prefetched "
                          "while this one runs, so two are gathered at once, and in backward "
                          "one layer's gradient waits for its reduce-scatter",
                          "assumption", "PyTorch FSDP's forward/backward prefetch (Zhao et al. "
                          "2023 §3.3); DeepSpeed stage 3's prefetch_bucket_size"))
    if c.dp > 1:
        items.append(Item("buffers.buckets", "buffers", "gradient buckets", 2 * BUCKET_BYTES,
                          "2 × 25 MiB", "two gradient buckets in flight (PyTorch DDP's "
                          "bucket_cap_mb); DeepSpeed's reduce_bucket_size defaults to 5·10⁸ "
                          "elements, 1 GB in 16-bit", "assumption"))
    return tuple(items)


# --- the ledger --------------------------------------------------------------------------------

def stage_ledger(c: MemoryConfig, stage: str, states: tuple[Item, ...]) -> Stage:
    acts, layers = activation_items(c, stage)
    return Stage(stage, layers, states + acts + buffer_items(c, stage))


def ledger(c: MemoryConfig) -> Ledger:
    states = model_state_items(c)
    per_layer = per_layer_bytes(c.layer_shape(), c.tp, c.sequence_parallel, c.recompute)
    if c.pp == 1:
        return Ledger(c, stage_ledger(c, "only", states), None, per_layer)
    first, last = stage_ledger(c, "first", states), stage_ledger(c, "last", states)
    busiest, other = (first, last) if first.peak >= last.peak else (last, first)
    return Ledger(c, busiest, other, per_layer)
