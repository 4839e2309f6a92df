"""One training step of a real-sized model on a cluster, as a timeline: DataParallel, DDP with
bucketed all-reduce, and FSDP with or without prefetching.

**Compute** (Narayanan et al. 2021, §5.1; Korthikanti et al. 2022, §6): a matrix multiply with a
weight of p elements costs 2·tokens·p FLOPs forward and twice that backward; attention's two
batched products add 4·b·s²·h per layer forward. tokens = micro_batch · seq, one GPU's share.
Durations are FLOPs / (TFLOP/s achieved). Norms, biases and embedding look-ups cost ~nothing.
Adam touches 28 bytes per parameter (reads p, g, m, v; writes p, m, v, all fp32) at
:data:`HBM_GBS` of GPU memory bandwidth.

**Communication** comes from :func:`app.sim.collectives.cost.ring_time_us`: the α–β time of the
ring schedules of chapter 2 on ``dp`` ranks, NVLink inside a node, InfiniBand between nodes.

**Order** (:mod:`app.sim.timeline`): one compute lane and one communication lane per GPU (all
ranks do the same, so one GPU is drawn), except DataParallel, whose GPUs differ.

- DDP: backward produces gradients in reverse (:mod:`app.sim.data_parallel.buckets`); a bucket's
  all-reduce is queued as soon as its last gradient is ready and runs while backward goes on.
- FSDP: :mod:`app.sim.data_parallel.fsdp_timeline`.
- DataParallel: GPU 0 replicates the parameters (a broadcast), scatters the inputs, gathers
  every replica's outputs (logits, b·s·V values each) to compute the loss, scatters the
  outputs' gradients back, reduces the parameter gradients to itself and alone runs Adam;
  nothing overlaps.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from app.sim.data_parallel import buckets as ddp_buckets

from app.sim import timeline
from app.sim.collectives.cost import Links, ring_time_us
from app.catalog.models import ModelShape
from app.sim.timeline import Task

HBM_GBS = 2000.0             # GPU memory bandwidth for the optimizer step (A100 80 GB ≈ 2 TB/s)
ADAM_BYTES = 28              # bytes Adam reads and writes per parameter
TOKEN_ID_BYTES = 8           # int64 token ids, what DataParallel scatters


@dataclass(frozen=True)
class Workload:
    shape: ModelShape
    micro_batch: int
    tflops: float
    dp: int
    links: Links
    element_bytes: int       # bytes of a parameter / gradient element on the wire

    @property
    def tokens(self) -> int:
        return self.micro_batch * self.shape.seq

    @cached_property
    def tensors(self) -> tuple[tuple[str, int], ...]:
        return self.shape.parameters()

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.tensors)

    def flops_us(self, flops: float) -> float:
        return flops / (self.tflops * 1e6)          # 1 TFLOP/s = 10⁶ FLOP per µs

    def is_matmul(self, name: str, numel: int) -> bool:
        embedding = name.startswith(("wte", "wpe", "tok_embeddings"))
        return name.endswith(".weight") and numel > self.shape.hidden and not embedding

    def attention_us(self) -> float:
        """One layer's attention products, forward."""
        s = self.shape
        return self.flops_us(4 * self.micro_batch * s.seq * s.seq * s.hidden)

    def head_us(self) -> float:
        """The tied output head's forward (GPT; Llama's output.weight is an ordinary tensor)."""
        s = self.shape
        return self.flops_us(2 * self.tokens * s.vocab * s.hidden) if s.tied_embeddings else 0.0

    def backward_us(self) -> list[float]:
        return self.backward

    @cached_property
    def backward(self) -> list[float]:
        """Backward time spent on each tensor (model order), attention folded into the first
        tensor backward meets after leaving the attention output projection."""
        out = []
        for name, numel in self.tensors:
            t = self.flops_us(4 * self.tokens * numel) if self.is_matmul(name, numel) else 0.0
            if name.endswith(("attn.qkv.bias", "attention.wv.weight")):
                t += 2 * self.attention_us()
            out.append(t)
        return out

    def forward_us(self) -> float:
        return self.forward

    @cached_property
    def forward(self) -> float:
        matmuls = sum(self.flops_us(2 * self.tokens * n) for name, n in self.tensors
                      if self.is_matmul(name, n))
        return matmuls + self.shape.layers * self.attention_us() + self.head_us()

    @cached_property
    def ready(self) -> list[float]:
        """When each tensor's gradient is ready in DDP's backward (model order)."""
        clock = self.forward_us() + 2 * self.head_us()
        ready = [0.0] * len(self.tensors)
        for _, members in self.layer_runs:
            for t in members:
                clock += self.backward[t]
                ready[t] = clock
        return ready

    @cached_property
    def layer_runs(self) -> list[tuple[str, list[int]]]:
        """Tensors in gradient-ready order, grouped by layer."""
        return _consecutive_layers(self.tensors,
                                   ddp_buckets.ready_order(self.names))

    def optimizer_us(self, params: float) -> float:
        return ADAM_BYTES * params / (HBM_GBS * 1e3)

    def collective_us(self, op: str, elements: float) -> float:
        return ring_time_us(op, self.dp, elements * self.element_bytes, self.links)


@dataclass(frozen=True)
class StepTimeline:
    mode: str
    spans: tuple[timeline.Span, ...]
    step_us: float
    compute_us: float                # busy time of the (first) GPU's compute lane
    comm_us: float                   # busy time of its communication
    exposed_comm_us: float           # communication nothing hides
    buckets: tuple[ddp_buckets.Bucket, ...] = ()
    peak_gathered_elements: int = 0  # FSDP: most parameters held gathered at once (beyond the shard)
    gathered: tuple[tuple[float, float, int], ...] = ()   # FSDP: (from µs, to µs, elements)
    ready_us: tuple[float, ...] = ()  # DDP: when each tensor's gradient is ready (model order)

    @property
    def hidden_fraction(self) -> float:
        return 1.0 - self.exposed_comm_us / self.comm_us if self.comm_us > 0 else 1.0


def measure(mode, spans, compute_lane, comm_lane, **extra) -> StepTimeline:
    return StepTimeline(mode, spans, timeline.makespan(spans), timeline.busy_us(spans, compute_lane),
                        timeline.busy_us(spans, comm_lane),
                        timeline.exposed_us(spans, comm_lane, compute_lane), **extra)


def ddp(w: Workload, bucket_mb: float | None) -> StepTimeline:
    """Compute never waits for communication in DDP, so each gradient's ready time is the
    forward plus the backward done before it; a bucket is released when its last gradient is
    ready (``earliest_us``) and the NCCL stream runs the released buckets in order."""
    sizes = tuple(n for _, n in w.tensors)
    buckets = ddp_buckets.buckets(sizes, w.element_bytes, bucket_mb, names=w.names)
    backward, ready = w.backward_us(), w.ready
    tasks = [Task("forward", "compute", w.forward_us(), kind="forward",
                  detail=f"forward of {w.micro_batch} × {w.shape.seq} tokens")]
    if w.head_us():
        tasks.append(Task("backward head", "compute", 2 * w.head_us(), ("forward",), "backward",
                          "backward of the tied output head"))
    for group, members in w.layer_runs:                            # one task per layer
        tasks.append(Task(f"backward {group}", "compute", sum(backward[t] for t in members),
                          (tasks[-1].name,), "backward", f"backward of {group}"))
    last_compute = tasks[-1].name
    for b in buckets:
        tasks.append(Task(f"bucket {b.index}", "comm", w.collective_us("all_reduce", b.elements),
                          (), "all_reduce", f"bucket {b.index}: {len(b.tensors)} tensors, "
                          f"{b.bytes:,} bytes", earliest_us=max(ready[t] for t in b.tensors)))
    tasks.append(Task("optimizer", "compute", w.optimizer_us(sum(sizes)),
                      tuple(f"bucket {b.index}" for b in buckets) + (last_compute,),
                      "optimizer", "Adam on every parameter, on every rank"))
    spans = timeline.schedule(tasks)
    return measure("ddp", spans, "compute", "comm", buckets=buckets, ready_us=tuple(ready))


def ddp_summary(w: Workload, bucket_mb: float | None) -> tuple[float, float]:
    """(step µs, exposed communication µs) of :func:`ddp`, without drawing the timeline: the
    buckets' all-reduces run in order, each from max(its last gradient, the previous one's end);
    whatever runs after backward ends is exposed. The bucket-size sweep calls this."""
    sizes = tuple(n for _, n in w.tensors)
    backward_end = w.forward_us() + 2 * w.head_us() + sum(w.backward_us())
    comm_end, exposed = 0.0, 0.0
    for b in ddp_buckets.buckets(sizes, w.element_bytes, bucket_mb, names=w.names):
        start = max(comm_end, max(w.ready[t] for t in b.tensors))
        comm_end = start + w.collective_us("all_reduce", b.elements)
        exposed += max(0.0, comm_end - max(start, backward_end))
    return max(backward_end, comm_end) + w.optimizer_us(sum(sizes)), exposed


def _consecutive_layers(tensors, order):
    """Runs of tensors (in ``order``) that belong to the same layer: [("layer 11", [...]), …]."""
    runs: list[tuple[str, list[int]]] = []
    for t in order:
        name = tensors[t][0]
        if name.startswith("h."):
            group = f"layer {name.split('.')[1]}"
        else:   # before the layers in backward: final norm and head; after: the embeddings
            seen_layers = any(g.startswith("layer") for g, _ in runs)
            group = "the embeddings" if seen_layers else "the final norm and head"
        if runs and runs[-1][0] == group:
            runs[-1][1].append(t)
        else:
            runs.append((group, [t]))
    return runs


def data_parallel(w: Workload, drawn_gpus: int) -> StepTimeline:
    """torch.nn.DataParallel on ``dp`` GPUs of one node, GPU 0 driving them all."""
    s, n = w.shape, w.dp
    psi = s.param_count()
    logits = w.micro_batch * s.seq * s.vocab
    bw = w.links.intra_node_gbs * 1e3                     # bytes per µs
    copies = lambda size: (n - 1) * (w.links.alpha_us + size / bw)  # noqa: E731 - GPU 0 ↔ each
    gpus = [f"GPU {g}" for g in range(min(n, drawn_gpus))]
    tasks = [Task("replicate", "links", w.collective_us("broadcast", psi), (), "broadcast",
                  "replicate: broadcast every parameter from GPU 0"),
             Task("scatter inputs", "links", copies(w.micro_batch * s.seq * TOKEN_ID_BYTES), (),
                  "scatter", "scatter the batch's token ids from GPU 0")]
    for g in gpus:
        tasks.append(Task(f"forward ({g})", g, w.forward_us(), ("replicate", "scatter inputs"), "forward",
                          f"forward of replica {g}"))
    tasks.append(Task("gather outputs", "links", copies(logits * w.element_bytes),
                      tuple(f"forward ({g})" for g in gpus), "gather",
                      f"gather {n} × {logits:,} logits onto GPU 0"))
    tasks.append(Task("loss", gpus[0], 3 * n * logits * w.element_bytes / (HBM_GBS * 1e3),
                      ("gather outputs",), "loss", "GPU 0 computes the loss of the whole batch"))
    tasks.append(Task("scatter grads", "links", copies(logits * w.element_bytes), ("loss",),
                      "scatter", "scatter the logits' gradients back"))
    for g in gpus:
        tasks.append(Task(f"backward ({g})", g, sum(w.backward_us()) + 2 * w.head_us(), ("scatter grads",),
                          "backward", f"backward of replica {g}"))
    tasks.append(Task("reduce grads", "links", w.collective_us("reduce", psi),
                      tuple(f"backward ({g})" for g in gpus), "reduce", "reduce every gradient onto GPU 0"))
    tasks.append(Task("optimizer", gpus[0], w.optimizer_us(psi), ("reduce grads",), "optimizer",
                      "GPU 0 alone runs Adam; the others wait"))
    return measure("dp", timeline.schedule(tasks), gpus[0], "links")

