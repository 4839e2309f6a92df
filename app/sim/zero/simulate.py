"""Chapter 5, ZeRO: a tiny model trained for real under stage 0–3, and what the same stage costs
for a real-sized model (Rajbhandari et al. 2019, "ZeRO: Memory Optimizations Toward Training
Trillion Parameter Models": Table 1 for memory, §7 for communication; Ren et al. 2021,
ZeRO-Offload; Rajbhandari et al. 2021, ZeRO-Infinity).

``simulate(params)`` trains the tiny MLP on ``dp`` simulated ranks with the chosen stage
(:mod:`app.sim.data_parallel.training`) and draws its last step as ownership grids
(:mod:`app.sim.zero.frames`). The parameters after ``steps`` steps are the same bits for every
stage: ZeRO changes who stores and updates what, not the arithmetic. The scenario model of Ψ =
``param_count`` parameters gets ZeRO's bytes per GPU, its communication per step and a step
timeline with the chosen offload (:mod:`app.sim.zero.scale`); its memory over the step follows
the tiny model's grids, the Ψ parameters cut into as many equal layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from app.sim.zero import frames as zero_frames

from app.sim.zero import scale as zero_scale
from app.sim.collectives.cost import Links
from app.sim.data_parallel.training import Training, train
from app.sim.memory.model_states import ModelStates
from app.sim.tiny_mlp import TinyMLP
from app.sim.trace import Frame, Transfer, plain

if TYPE_CHECKING:
    from app.sim.zero.params import ZeroParams

STAGE_NAMES = {0: "DDP (no ZeRO)", 1: "ZeRO-1 (P_os)", 2: "ZeRO-2 (P_os+g)",
               3: "ZeRO-3 (P_os+g+p)"}


@dataclass(frozen=True)
class ZeroTrace:
    params: ZeroParams
    model: TinyMLP
    training: Training
    grids: zero_frames.Grids
    frames: tuple[Frame, ...]
    placement: zero_scale.Placement            # the scenario model, one rank
    comm_elements: int                         # the scenario model, per rank per step
    memory: tuple[ModelStates, ...]            # the scenario model's GPU bytes at each frame
    step: zero_scale.OffloadStep

    @property
    def tiny_at_rest(self) -> list[dict]:
        """Elements each rank holds of the tiny model after the step, padding included."""
        units, stage = self.training.units, self.params.stage
        shard = sum(u.shard for u in units)
        full = self.model.param_count
        padded = full + sum(u.padding for u in units)
        real = sum(u.real_in_shard(np.arange(self.params.dp)) for u in units)
        return [{"params": shard if stage >= 3 else (padded if stage else full),
                 "grads": shard if stage >= 2 else padded,
                 "optimizer": shard if stage >= 1 else full,
                 "real_in_shard": int(k)} for k in real]

    def to_dict(self) -> dict:
        p, t, place = self.params, self.training, self.placement
        gpu = place.gpu
        return {
            "stage": p.stage, "stage_name": STAGE_NAMES[p.stage], "dp": p.dp,
            "steps": p.steps, "seed": p.seed, "offload": p.offload,
            "param_count": p.param_count,
            "final_params": plain(t.final_params),
            "per_rank_bytes": [{"params": gpu.params, "grads": gpu.grads,
                                "optimizer": gpu.optimizer}] * p.dp,
            "per_rank_host_bytes": [{"cpu": place.cpu, "nvme": place.nvme}] * p.dp,
            "comm_elements_per_step": self.comm_elements,
            "comm_bytes_per_step": self.comm_elements * zero_scale.P_BYTES,
            "comm_factor": (3 if p.stage == 3 else 2) * (p.dp - 1) / p.dp,
            "step_time": {
                "step_us": self.step.step_us, "bound": self.step.bound,
                "busy_us": self.step.busy_us, "critical_us": self.step.critical_us,
                "transfer_bytes": self.step.transfers,
                "spans": [s.to_dict() for s in self.step.spans],
            },
            "memory_over_step": [{"frame": k, "params": m.params, "grads": m.grads,
                                  "optimizer": m.optimizer, "total": m.total}
                                 for k, m in enumerate(self.memory)],
            "tiny": {
                "layers": self.model.layers, "width": self.model.width,
                "micro_batch": p.micro_batch, "param_count": self.model.param_count,
                "units": [{"layer": u.index, "numel": u.numel, "shard": u.shard,
                           "padding": u.padding} for u in t.units],
                "per_rank_elements": self.tiny_at_rest,
                "comm_elements_per_step": plain(t.sent[-1]),
                "losses": plain(t.losses),
            },
            "frames": [{"step": f.step, "phase": f.phase, "caption": f.caption,
                        "transfers": [x.to_dict() for x in f.transfers]}
                       for f in self.frames],
        }


def simulate(p: ZeroParams) -> ZeroTrace:
    model = TinyMLP(p.mlp_layers, p.mlp_width)
    training = train(model, f"zero{p.stage}", p.dp, p.micro_batch, p.steps, p.seed)
    grids = zero_frames.build(p.stage, training.units, training.last, p.dp)
    links = Links(p.alpha_us, p.intra_node_gbs, p.inter_node_gbs, p.gpus_per_node)
    machine = zero_scale.Machine(links, p.gpu_tflops, p.pcie_gbs, p.nvme_gbs, p.cpu_mem_gbs)
    step = zero_scale.step(p.param_count, p.dp, p.stage, p.offload, p.mlp_layers,
                           p.micro_batch * p.seq, machine)
    memory = tuple(_memory(grids, k, p) for k in range(len(grids.phases)))
    frames = tuple(Frame(ph.step, _caption(p, model, training, grids, ph), _transfers(ph, grids.ranks, p.dp),
                         ph.phase) for ph in grids.phases)
    return ZeroTrace(p, model, training, grids, frames,
                     zero_scale.placement(p.param_count, p.dp, p.stage, p.offload),
                     zero_scale.comm_elements(p.param_count, p.dp, p.stage), memory, step)


def _memory(grids: zero_frames.Grids, k: int, p: ZeroParams) -> ModelStates:
    """Rank 0's GPU bytes for the scenario model in frame k: each layer's row counts in full
    if rank 0 holds the whole layer, as a shard if only its own, else not at all."""
    real = np.array([c.flat >= 0 for c in grids.columns])
    status = grids.status[k][:, :, real]                             # (rows, ranks, real columns)
    units = np.array([c.unit for c in grids.columns])[real]
    own = np.array([c.owner == grids.ranks[0] for c in grids.columns])[real]
    per_unit = p.param_count / p.mlp_layers
    shard = zero_scale.shard(p.param_count, p.dp) / p.mlp_layers
    out = []
    for row, width in zip(range(3), (zero_scale.P_BYTES, zero_scale.G_BYTES, zero_scale.K_ADAM)):
        total = 0.0
        for u in range(p.mlp_layers):
            held = status[row, 0, units == u] != zero_frames.EMPTY
            mine = own[units == u]
            if held.all() and not mine.all():
                total += width * per_unit
            elif held[mine].any() or (held.any() and p.dp == 1):
                on_host = ((row == 2 and p.offload != "none")
                           or (row == 1 and p.offload != "none" and p.stage >= 2)
                           or (row == 0 and p.offload == "nvme"))
                total += 0.0 if on_host else width * (per_unit if p.dp == 1 else shard)
        out.append(total)
    return ModelStates(*out)


def _transfers(phase: zero_frames.Phase, ranks: tuple[int, ...], dp: int) -> tuple[Transfer, ...]:
    """What the drawn ranks send to their ring neighbours in this phase."""
    if phase.sent == 0 or dp < 2:
        return ()
    reduce = phase.phase in ("all_reduce", "reduce_scatter")
    return tuple(Transfer(r, (r + 1) % dp, phase.sent, reduce, phase.phase.replace("_", "-"))
                 for r in ranks)


def _numbers(values, most: int = 4, digits: int = 4) -> str:
    shown = ", ".join(f"{v:.{digits}g}" for v in values[:most])
    return f"{shown}{', …' if len(values) > most else ''}"


def _caption(p: ZeroParams, model: TinyMLP, t: Training, g: zero_frames.Grids,
             ph: zero_frames.Phase) -> str:
    last, n = t.last, p.dp
    # no "Step k of 7 ·" before the text: the deck's header and the player already say it
    unit = t.units[ph.unit] if ph.unit >= 0 else None
    first = unit.start if unit else 0
    if ph.phase == "start":
        shards = ", ".join(f"{u.shard}" for u in t.units[:1])
        pad = sum(u.padding for u in t.units)
        text = (f"Before training step {p.steps} of {p.steps} under {STAGE_NAMES[p.stage]} on "
                f"{n} rank{'s' if n > 1 else ''}. The {model.param_count} parameters form "
                f"{model.layers} layer units of {model.unit_size}; each is cut into {n} shards of "
                f"{shards} elements")
        text += (f", {pad} of them padding (hatched)." if pad else ", with no padding.")
        return text + f" {_holds(p.stage)}"
    if ph.phase == "forward" or (ph.phase == "all_gather" and ph.unit >= 0):
        samples = f"{p.micro_batch} sample{'s' if p.micro_batch > 1 else ''}"
        losses = f"losses per rank: {_numbers(last.losses)}."
        if ph.unit < 0:
            return f"Every rank runs the forward pass on its own {samples}; {losses}"
        text = (f"All-gather layer {ph.unit} ({ph.sent} elements sent by every rank, "
                f"padding included) and run its forward on each rank's own {samples}; the "
                f"other ranks' shards are freed again when the next layer starts.")
        return text + (f" End of forward, {losses}" if ph.unit == model.layers - 1 else "")
    if ph.phase == "backward":
        grads = _numbers(last.local_grads[:, first])
        gather = (f"All-gather layer {ph.unit} again ({ph.sent} elements per rank), then " if
                  p.stage == 3 else "")
        return (gather + f"backward of layer {ph.unit}: each rank's gradient of its "
                f"first weight, already divided by dp = {n}: {grads} — different on every "
                f"rank, since every rank saw different samples.")
    mean = last.mean_grad[first]
    if ph.phase == "all_reduce":
        return (f"All-reduce of layer {ph.unit} as a ring reduce-scatter then "
                f"all-gather: every rank sends {ph.sent} elements and ends with the mean "
                f"gradient ({mean:.4g} for the first weight).")
    if ph.phase == "reduce_scatter":
        scope = f"layer {ph.unit}'s gradients" if unit else "every layer's gradients"
        kept = ("ZeRO-1 keeps the whole buffer allocated until the step." if p.stage == 1 else
                "The other shards are freed at once, and so are the layer's gathered "
                "parameters." if p.stage == 3 else "The other shards are freed at once.")
        return (f"Reduce-scatter of {scope}: rank r receives the sum of shard r from "
                f"every rank; each rank sends {ph.sent} elements, padding included. "
                f"{kept} Rank 0's first mean gradient: {mean:.4g}.")
    if ph.phase == "optimizer":
        before, after = last.params_before[0], last.params_after[0]
        who = ("every rank updates every parameter (the same numbers on every rank)"
               if p.stage == 0 else "each rank updates only its own shard")
        return (f"Adam: {who}. Rank 0's first weight goes {before:.4g} → {after:.4g}, "
                f"its momentum {last.m_before[0]:.4g} → {last.m_after[0]:.4g}."
                + ("" if p.stage in (1, 2) else _done(p, t)))
    return (f"All-gather the updated parameters: every rank sends {ph.sent} elements "
            f"and holds the whole new model again." + _done(p, t))


def _holds(stage: int) -> str:
    return {0: "Every rank holds all parameters, gradients and optimizer states.",
            1: "Every rank holds all parameters and gradients, but only its own shard of the "
               "optimizer states (colour = owner).",
            2: "Every rank holds all parameters, but gradients and optimizer states only for "
               "its own shard.",
            3: "Every rank holds only its own shard of everything; layers are gathered when "
               "needed."}[stage]


def _done(p: ZeroParams, t: Training) -> str:
    sent = int(t.sent[-1].max())
    return (f" Done: each rank sent {sent} elements this step "
            f"({3 if p.stage == 3 else 2}·(n−1)·shard). After {p.steps} step"
            f"{'s' if p.steps > 1 else ''} the parameters start {_numbers(t.final_params, 3)} — "
            f"the same bits under DDP and ZeRO-1, 2 and 3.")
