"""Tensor parallelism with real matrices: Megatron-LM's blocks on ``tp`` simulated ranks.

``simulate(params)`` draws the block's seeded inputs (:mod:`app.sim.tensor_parallel.inputs`), runs it sharded
forward and backward, step by step, moving the real numbers between ranks with the collectives
that Megatron-LM calls (:mod:`app.sim.tensor_parallel.blocks`, :mod:`app.sim.tensor_parallel.sublayer`,
:mod:`app.sim.tensor_parallel.embedding`), computes the same block on one device
(:mod:`app.sim.tensor_parallel.reference`) and reports the largest difference. Alongside, the chosen model
preset at full scale (:mod:`app.sim.tensor_parallel.scale`): activation memory with and without sequence
parallelism, what each layer communicates, and how long that takes over NVLink or InfiniBand
next to the layer's compute.

References: Shoeybi et al. 2019, "Megatron-LM: Training Multi-Billion Parameter Language Models
Using Model Parallelism", §3; Korthikanti et al. 2022, "Reducing Activation Recomputation in
Large Transformer Models", §4.2 and Table 2.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from app.catalog.models import PRESETS
from app.sim.tensor_parallel.blocks import column_block, row_block
from app.sim.tensor_parallel.embedding import embedding_block
from app.sim.tensor_parallel.inputs import PRIMARY_WEIGHT, BlockInputs, make_inputs
from app.sim.tensor_parallel.program import BlockResult, Collective
from app.sim.tensor_parallel.reference import Reference, reference
from app.sim.tensor_parallel.scale import Scale, scale
from app.sim.tensor_parallel.sublayer import sublayer_block
from app.sim.trace import Frame, plain

if TYPE_CHECKING:
    from app.sim.tensor_parallel.params import TensorParallelParams

BLOCK_TITLES = {"column": "column-parallel linear", "row": "row-parallel linear",
                "mlp": "Megatron MLP", "attention": "self-attention",
                "embedding": "vocab-parallel embedding + cross-entropy"}


@dataclass(frozen=True)
class TensorParallelTrace:
    params: TensorParallelParams
    inputs: BlockInputs
    result: BlockResult
    reference: Reference
    frames: tuple[Frame, ...]
    errors: dict[str, float]
    """largest |difference| from the unsharded computation, per compared tensor"""
    scale: Scale

    @property
    def max_abs_error(self) -> float:
        return max(self.errors.values(), default=0.0)

    @property
    def comm(self) -> tuple[Collective, ...]:
        return tuple(s.collective for s in self.result.steps if s.collective is not None)

    @property
    def steps(self):
        return self.result.steps

    def to_dict(self) -> dict:
        """The JSON contract of ``/api/tensor-parallel`` (DESIGN.md), plus the details."""
        p, r, inp = self.params, self.result, self.inputs
        primary = PRIMARY_WEIGHT[p.block]
        body = {
            "block": p.block, "tp": p.tp, "tokens": p.tokens, "hidden": p.hidden, "ffn": p.ffn,
            "heads": p.heads, "vocab": p.vocab, "sequence_parallel": p.sequence_parallel,
            "seed": p.seed,
            "x": plain(inp.x),
            "weight": plain(inp.weights[primary]),
            "weight_name": primary,
            "weights": {k: plain(v) for k, v in inp.weights.items()},
            "output": plain(r.output.values[0]),
            "reference_output": plain(self.reference.output),
            "shards": [{"rank": rank, "weight": plain(w[primary]),
                        "output": plain(r.shard_outputs[rank]),
                        "result": plain(r.shard_results[rank]),
                        "weights": {k: plain(v) for k, v in w.items()},
                        "grads": {k: plain(v) for k, v in r.shard_grads[rank].items()}}
                       for rank, w in enumerate(r.shard_weights)],
            "max_abs_error": self.max_abs_error,
            "errors": self.errors,
            "comm": [c.to_dict() for c in self.comm],
            "grads": {k: plain(v) for k, v in r.grads.items()},
            "input_grad": None if r.input_grad is None else plain(r.input_grad),
            "upstream_grad": None if inp.dy is None else plain(inp.dy),
            "frames": [{"step": k, "pass": s.pass_, "kind": s.kind, "title": s.title,
                        "formula": s.formula, "caption": s.caption}
                       for k, s in enumerate(r.steps)],
            "scale": scale_dict(self.scale),
        }
        if p.block == "embedding":
            body.update(ids=plain(inp.ids), targets=plain(inp.targets),
                        logits=plain(r.extras["logits"]), losses=plain(r.extras["losses"]),
                        loss=float(r.extras["loss"]))
        if inp.mask is not None:
            body["dropout_mask"] = plain(inp.mask)
        return body


def scale_dict(s: Scale) -> dict:
    def variant(v):
        return {"activation_bytes_per_layer": v.activation_bytes,
                "comm": [{"op": c.op, "pass": c.pass_, "elements": c.elements,
                          "purpose": c.purpose, "sent_bytes_per_rank": c.sent_bytes,
                          "nvlink_us": c.nvlink_us, "infiniband_us": c.infiniband_us}
                         for c in v.collectives],
                "sent_bytes_per_rank": {"forward": v.total("sent_bytes", "forward"),
                                        "backward": v.total("sent_bytes", "backward")},
                "time_us": {"nvlink": v.total("nvlink_us"),
                            "infiniband": v.total("infiniband_us")}}
    return {"preset": s.model.name, "seq": s.seq, "micro_batch": s.micro_batch, "tp": s.tp,
            "activation_bytes_per_layer_no_parallelism": s.no_parallelism_bytes,
            "tp_only": variant(s.tp_only), "tp_sp": variant(s.tp_sp),
            "forward_flops_per_layer": s.forward_flops, "compute_us_per_layer": s.compute_us,
            "activation_terms": [{"name": n, "formula": f, "bytes": a, "bytes_tp": b,
                                  "bytes_tp_sp": c} for n, f, a, b, c in s.terms],
            "sweep": [{"tp": t, "compute_us": c, "comm_us_placed": pl, "comm_us_infiniband": ib,
                       "comm_us_nvlink": nv} for t, c, pl, ib, nv in s.sweep]}


def run_block(inp: BlockInputs, tp: int, sp: bool, heads: int) -> tuple[BlockResult, Reference]:
    ref = reference(inp, heads)
    if inp.block == "column":
        return column_block(inp, tp, sp, ref), ref
    if inp.block == "row":
        return row_block(inp, tp, sp, ref), ref
    if inp.block == "embedding":
        return embedding_block(inp, tp, sp, ref), ref
    return sublayer_block(inp, tp, sp, heads, ref), ref


def simulate(p: TensorParallelParams) -> TensorParallelTrace:
    inp = make_inputs(p.block, p.tokens, p.hidden, p.ffn, p.heads, p.vocab, p.seed)
    result, ref = run_block(inp, p.tp, p.sequence_parallel, p.heads)
    if p.tp == 1:
        first = result.steps[0]
        note = (" With tp = 1 the whole block runs on one GPU: there is nothing to split and "
                "every collective is skipped, as Megatron-LM does.")
        result = replace(result, steps=(replace(first, caption=first.caption + note),
                                        *result.steps[1:]))
    errors: dict[str, float] = {}
    for step in result.steps:
        for c in step.comparisons:
            errors[c.name] = max(errors.get(c.name, 0.0), c.error)
    frames = tuple(Frame(k, s.caption, (), s.pass_) for k, s in enumerate(result.steps))
    at_scale = scale(PRESETS[p.preset], p.seq, p.micro_batch, p.tp, p.sequence_parallel,
                     p.alpha_us, p.intra_node_gbs, p.inter_node_gbs, p.gpus_per_node,
                     p.gpu_tflops)
    return TensorParallelTrace(p, inp, result, ref, frames, errors, at_scale)
