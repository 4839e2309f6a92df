"""What each group of a 5D layout sends in one training step, and over which link.

Bytes are per rank (what one member of a group sends), for one optimizer step of ``microbatches``
micro-batches of ``micro_batch`` sequences, on the busiest pipeline stage (⌈layers/pp⌉ layers),
16-bit activations and gradients, ring algorithms (an all-reduce of S bytes over n ranks sends
2(n−1)/n·S per rank; all-gather, reduce-scatter and all-to-all (n−1)/n·S). With
A = b·(s/cp)·h·2 bytes, the activation of one micro-batch on one CP rank:

  tp  4 all-reduces of A per layer (2 forward, 2 backward; Megatron-LM, Shoeybi et al. 2019,
      §3); with sequence parallelism 4 all-gathers + 4 reduce-scatters of A — the same bytes
      (Korthikanti et al. 2022, §4.2.2)                    → 4·2(t−1)/t·A per layer
  cp  ring attention: K and V of the rank's s/cp tokens pass cp−1 hops forward; backward passes
      K, V and dK, dV (Megatron-LM context parallel)       → 3·(cp−1)·b·(s/cp)·2·kv_dim/t·2
  ep  all-to-all dispatch and combine, forward and backward, of the rank's tokens × top_k
      (Lepikhin et al. 2020, GShard)                        → 4·(ep−1)/ep·tokens·k·h·2
  pp  one activation forward and one gradient backward per micro-batch to the neighbour stage
      (sequence-sharded under SP)
  dp  the dense gradients of the rank's shard (Ψ/(tp·pp)) reduced over dp·cp once a step
  edp the expert gradients (experts/ep experts of the stage's layers) reduced over dp·cp/ep

A group kind "crosses nodes" when any of its groups spans more than one node
(r // gpus_per_node); its traffic then goes over InfiniBand, else over NVLink.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from app.catalog.models import PRESETS
from app.sim.parallelism.layout import Layout

BYTES = 2
"""bf16 activations and gradients."""

MLP_NAMES = ("mlp.", "feed_forward.")


@dataclass(frozen=True)
class Flow:
    """One kind of group's traffic per step. ``over``: the group list it runs on."""

    group: str
    over: str
    collective: str
    bytes_per_step: int
    crosses_nodes: bool
    link: str
    group_size: int
    what: str

    def seconds(self, intra_gbs: float, inter_gbs: float) -> float:
        gbs = inter_gbs if self.link == "infiniband" else intra_gbs
        return self.bytes_per_step / (gbs * 1e9)

    def to_dict(self) -> dict:
        return {"group": self.group, "over": self.over, "collective": self.collective,
                "bytes_per_step": self.bytes_per_step, "crosses_nodes": self.crosses_nodes,
                "link": self.link, "group_size": self.group_size, "what": self.what}


def stage_layers(params) -> int:
    return ceil(PRESETS[params.preset].layers / params.pp)


def grad_bytes(params) -> tuple[int, int]:
    """(dense, expert) gradient bytes one rank holds on the busiest stage: its TP shard of the
    stage's layers (the MLP replaced by experts/ep experts when experts > 1) plus the larger of
    the first stage's and the last stage's own tensors."""
    model = PRESETS[params.preset]
    layer = [(t.name, t.numel) for t in model.tensors() if t.place == "layer"]
    mlp = sum(n for name, n in layer if name.startswith(MLP_NAMES))
    rest = sum(n for _, n in layer) - mlp
    ends = max(sum(t.numel for t in model.tensors() if t.place == p) for p in ("first", "last"))
    if params.pp == 1:
        ends = sum(t.numel for t in model.tensors() if t.place in ("first", "last"))
    layers = stage_layers(params)
    moe = params.experts > 1
    dense = layers * (rest + (0 if moe else mlp)) + ends
    expert = layers * mlp * (params.experts // params.ep) if moe else 0
    return dense * BYTES // params.tp, expert * BYTES // params.tp


def flows(params, layout: Layout | None = None) -> tuple[Flow, ...]:
    """Traffic of every group kind of size > 1, in the order tp, cp, ep, pp, dp, edp."""
    layout = layout or Layout.of(params)
    model = PRESETS[params.preset]
    t, c, e, p = params.tp, params.cp, params.ep, params.pp
    b, m, L = params.micro_batch, params.microbatches, stage_layers(params)
    tokens = b * params.seq // c                             # tokens one CP rank holds
    act = tokens * model.hidden * BYTES                      # A
    sharded = act // t if params.sequence_parallel else act
    head_dim = model.hidden // model.heads
    kv_dim = model.kv_heads * head_dim // t if t <= model.kv_heads else head_dim
    dense_grads, expert_grads = grad_bytes(params)
    dp_cp = params.dp * c
    edp = dp_cp // e

    def ring(n: int, size: float, all_reduce: bool = False) -> float:
        return (2 if all_reduce else 1) * (n - 1) / n * size

    out: list[Flow] = []

    def add(group: str, over: str, size: int, collective: str, nbytes: float, what: str):
        if size > 1:
            crosses = layout.crosses_nodes(over)
            out.append(Flow(group, over, collective, round(nbytes), crosses,
                            "infiniband" if crosses else "nvlink", size, what))

    sp = params.sequence_parallel
    add("tp", "tp", t, "all_gather + reduce_scatter" if sp else "all_reduce",
        L * m * 4 * ring(t, act, all_reduce=True),
        f"{'8 all-gathers/reduce-scatters' if sp else '4 all-reduces'} of the "
        f"{b}×{tokens // b}×{model.hidden} activation per layer, {L} layers × {m} micro-batches")
    add("cp", "cp", c, "send_recv ring (K, V)",
        L * m * 3 * (c - 1) * tokens * 2 * kv_dim * BYTES,
        f"K and V of {tokens} tokens around the ring ({c - 1} hops) per layer, 3× with backward")
    if params.experts > 1:
        ep_tokens = tokens // t if sp else tokens
        add("ep", "ep", e, "all_to_all",
            L * m * 4 * ring(e, ep_tokens * params.top_k * model.hidden * BYTES),
            f"{ep_tokens} tokens × top-{params.top_k} dispatched and combined, forward and "
            f"backward, per MoE layer")
    add("pp", "pp", p, "send / recv", m * (2 if p > 2 else 1) * sharded,
        f"one {'sequence-sharded ' if sp else ''}activation (forward) and its gradient "
        f"(backward) per micro-batch to the next / previous stage")
    add("dp", "dp_cp", dp_cp, "all_reduce", ring(dp_cp, dense_grads, all_reduce=True),
        f"the rank's {dense_grads / 2**20:,.0f} MiB of dense gradients, once a step, over "
        f"dp·cp = {dp_cp} ranks")
    if params.experts > 1:
        add("edp", "edp", edp, "all_reduce", ring(edp, expert_grads, all_reduce=True),
            f"the rank's {expert_grads / 2**20:,.0f} MiB of expert gradients over dp·cp/ep = "
            f"{edp} ranks")
    return tuple(out)


# -- comparing orders ------------------------------------------------------------------------

CANDIDATE_ORDERS = ("tp-cp-ep-dp-pp", "tp-cp-pp-ep-dp", "cp-tp-ep-dp-pp", "dp-cp-ep-tp-pp",
                    "pp-tp-cp-ep-dp", "pp-dp-ep-cp-tp")
"""Megatron-LM's default, its other supported order, and orders that move tp later."""


@dataclass(frozen=True)
class OrderLoad:
    """The slowest link's load under one ``order``: what each rank pushes over InfiniBand per
    step (all groups that cross nodes share the NIC) and the time it takes."""

    order: str
    valid: bool
    inter_node_bytes: int
    inter_node_s: float
    intra_node_bytes: int
    crossing: tuple[str, ...]
    problem: str = ""

    def to_dict(self) -> dict:
        return {"order": self.order, "valid": self.valid,
                "inter_node_bytes": self.inter_node_bytes, "inter_node_s": self.inter_node_s,
                "intra_node_bytes": self.intra_node_bytes, "crossing": list(self.crossing),
                "problem": self.problem}


def order_loads(params) -> tuple[OrderLoad, ...]:
    """The chosen order and :data:`CANDIDATE_ORDERS`, each with its InfiniBand load."""
    from app.sim.parallelism.layout import pp_mismatch
    out = []
    for order in dict.fromkeys((params.order, *CANDIDATE_ORDERS)):
        variant = params.model_construct(**{**params.model_dump(), "order": order})
        problem = pp_mismatch(variant)
        if problem:
            out.append(OrderLoad(order, False, 0, 0.0, 0, (), problem))
            continue
        fs = flows(variant)
        inter = sum(f.bytes_per_step for f in fs if f.link == "infiniband")
        intra = sum(f.bytes_per_step for f in fs if f.link == "nvlink")
        out.append(OrderLoad(order, True, inter, inter / (params.inter_node_gbs * 1e9), intra,
                             tuple(f.group for f in fs if f.crosses_nodes)))
    return tuple(out)


def why_tp_first(params, fs: tuple[Flow, ...]) -> str:
    """The reason, in this layout's numbers, that Megatron-LM puts tp first."""
    if not fs:
        return "Every group has one rank: nothing moves between GPUs."
    heaviest = max(fs, key=lambda f: f.bytes_per_step)
    tp = next((f for f in fs if f.group == "tp"), None)
    if tp is None:
        return (f"With tp = 1 there is no TP traffic; the heaviest group is {heaviest.group} "
                f"({heaviest.bytes_per_step / 1e9:.2f} GB per rank per step).")
    fits = params.tp <= params.gpus_per_node
    return (f"TP sends {tp.bytes_per_step / 1e9:.2f} GB per rank per step"
            f"{' — the most of any group' if heaviest is tp else ''}, in small collectives on "
            f"every layer's critical path, forward and backward. Putting tp first makes each TP "
            f"group {params.tp} consecutive ranks, "
            + ("so it stays inside one node on NVLink; the groups that can wait (dp once a step, "
               "pp once a micro-batch) take the slower links between nodes."
               if fits else f"but tp ({params.tp}) exceeds gpus_per_node "
                            f"({params.gpus_per_node}), so even then it crosses nodes."))
