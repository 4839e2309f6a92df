"""The five parallelisms on one model (chapter 1's survey): what each splits, what it sends,
when, how much per step, and the chapter that takes it apart.

  DP  replicates the model, splits the batch (dim 0 of every activation); all-reduces
      gradients once a step (Li et al. 2020, PyTorch DDP)
  TP  splits each weight matrix: column-parallel by output features (dim 0 of the torch weight),
      row-parallel by input features (dim 1); all-reduces activations in every layer
      (Shoeybi et al. 2019, Megatron-LM)
  PP  splits the layers into stages; sends activations between neighbouring stages each
      micro-batch (Huang et al. 2019, GPipe; Narayanan et al. 2021)
  CP  splits the sequence (the token dim of every activation); passes K, V around a ring in
      attention (Liu et al. 2023, Ring Attention; Megatron-LM context parallel)
  EP  splits the experts of each MoE layer; all-to-alls tokens to their experts and back
      (Lepikhin et al. 2020, GShard)

The bytes come from :mod:`app.sim.parallelism.traffic` for the chosen model and layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.catalog.models import PRESETS
from app.sim.parallelism.traffic import Flow


@dataclass(frozen=True)
class Strategy:
    name: str            # "dp" | "tp" | "pp" | "cp" | "ep"
    title: str
    size: int
    splits: str          # the tensor and its dimension
    communicates: str    # the collective and what it carries
    when: str
    bytes_per_step: int  # per rank, 0 when size is 1
    chapter: str         # the page that explains it

    def to_dict(self) -> dict:
        return {"name": self.name, "title": self.title, "size": self.size,
                "splits": self.splits, "communicates": self.communicates, "when": self.when,
                "bytes_per_step": self.bytes_per_step, "chapter": self.chapter}


def strategies(params, flows: tuple[Flow, ...]) -> tuple[Strategy, ...]:
    model = PRESETS[params.preset]
    h, f, L = model.hidden, model.ffn, model.layers
    b, s = params.micro_batch, params.seq
    sent = {fl.group: fl.bytes_per_step for fl in flows}
    return (
        Strategy("dp", "Data parallel", params.dp,
                 f"the batch: each replica takes {b} of the sequences (dim 0 of every "
                 f"activation, b × s × h); the weights are copied whole",
                 "all-reduce of the gradients (sum, then ÷ dp)",
                 "once a step, overlapped with backward bucket by bucket",
                 sent.get("dp", 0), "/data-parallel"),
        Strategy("tp", "Tensor parallel", params.tp,
                 f"every weight matrix: QKV and the MLP's {f}-wide up projection by output "
                 f"features (dim 0 of the torch weight), the output projections by input "
                 f"features (dim 1); h = {h}",
                 "all-reduce of the activations (all-gather + reduce-scatter with sequence "
                 "parallelism)",
                 "twice per layer forward and twice backward, on the critical path",
                 sent.get("tp", 0), "/tensor-parallel"),
        Strategy("pp", "Pipeline parallel", params.pp,
                 f"the {L} layers: stage k runs layers k·{L}/{params.pp} … (the model's depth)",
                 "send/recv of one activation forward and its gradient backward",
                 "once per micro-batch between neighbouring stages; the bubble waits",
                 sent.get("pp", 0), "/pipeline"),
        Strategy("cp", "Context parallel", params.cp,
                 f"the sequence: each rank holds s/cp = {s // params.cp} of the {s} tokens "
                 f"(dim 1 of every activation)",
                 "ring send/recv of K and V (attention needs every earlier token)",
                 "in every attention layer, overlapped with the blockwise attention",
                 sent.get("cp", 0), "/context-parallel"),
        Strategy("ep", "Expert parallel", params.ep,
                 f"the {params.experts} experts of each MoE layer: each rank holds "
                 f"{params.experts // params.ep} whole expert MLPs",
                 f"all-to-all of the routed tokens (top-{params.top_k}) to their experts and "
                 f"back",
                 "twice per MoE layer forward (dispatch, combine) and twice backward",
                 sent.get("ep", 0), "/moe"),
    )
