"""Chapter 10, mixture of experts: ``/moe`` — the deck, the load-balancing chart, the EP×DP×TP×PP
table of the MoE presets, the real run's command line."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.draw.box import EXPORT, PAGE, Box
from app.draw.caption import CAPTION_HEIGHT, caption_lines
from app.draw.plot import line_chart
from app.jobs.launch import torchrun_line
from app.scene import traced
from app.scenes.moe import deck as view
from app.scenes.moe import deck_svg as moe_svg
from app.scenes.moe.check import CHECK
from app.sim.moe.losses import METHODS
from app.sim.moe.parallel import (
    MoeLayout,
    check_layout,
    per_gpu_share,
    training_flops_per_token,
)
from app.sim.moe.params import MoeParams
from app.sim.moe.presets import PRESETS
from app.sim.moe.simulate import simulate
from app.templating import deck_style

METHOD_NAMES = {"none": "no balancing", "aux_loss": "auxiliary loss E·Σ fᵢPᵢ",
                "z_loss": "router z-loss only", "aux_free_bias": "aux-loss-free bias (DeepSeek-V3)"}

LAYOUTS = {
    "deepseek-v3": (MoeLayout(tp=1, pp=16, dp=128, ep=64, etp=1),
                    "DeepSeek-V3's training: 2048 H800, PP 16, EP 64 over 8 nodes, ZeRO-1 DP"),
    "mixtral-8x7b": (MoeLayout(tp=2, pp=4, dp=8, ep=8, etp=1), "an example: 64 GPUs"),
    "qwen1.5-moe-a2.7b": (MoeLayout(tp=2, pp=3, dp=4, ep=4, etp=1), "an example: 24 GPUs"),
}
"""One layout per preset for the EP×DP×TP×PP table (chapter 11's planner searches them)."""

BALANCE_EXPERTS = 16
"""The load table lists each expert up to this many experts, else the busiest and idlest."""


@memoised(DECKS)
def deck_svg(p: MoeParams, frame: int, box: Box) -> Markup:
    """The page's deck laid out for ``box``, showing ``frame`` first; later frames wait in a
    template (cached: a deck is a pure function of its params and box)."""
    return moe_svg.render(view.build_deck(traced(simulate, p), box), frame)


def page_view(p: MoeParams, trace, frame: int, box: Box = PAGE) -> dict:
    return {"deck_svg": deck_svg(p, frame, box), "deck_title": view.deck_title(p),
            "balance_chart": balance_chart(p, trace), "balance_rows": balance_rows(p, trace),
            "layouts": layout_rows(), "torchrun": torchrun_line(CHECK, p),
            "dropped_share": len(trace.drops.dropped) / (p.tokens * p.top_k),
            "hf_aux": p.top_k * trace.aux_loss,
            "expert_chosen": trace.drops.load.sum(axis=0).tolist(),
            "rank_sent": (trace.dispatch.sum(axis=1) - trace.dispatch.diagonal()).tolist()}


def form_view() -> dict:
    return {}


def export_view(p: MoeParams, trace, frame: int, box: Box = EXPORT) -> dict:
    """Frame ``frame`` as a file whose page is ``box``: the drawing above, the caption under."""
    drawing = replace(box, height=box.height - CAPTION_HEIGHT)
    return {"deck_svg": moe_svg.render(view.build_deck(trace, drawing), frame, standalone=True,
                                       caption=caption_lines(trace.frames[frame].caption,
                                                             box.width),
                                       style=deck_style(standalone=True))}


def balance_chart(p: MoeParams, trace):
    """MaxVio = (max load − mean) / mean after each router-training step, per method."""
    data = [(METHOD_NAMES[t.method].split(" (")[0].split(" E·")[0], list(range(len(t.max_violation))),
             list(t.max_violation)) for t in trace.training]
    return line_chart(data, x_label="router training step", y_label="MaxVio (max − mean) / mean",
                      title=f"Load imbalance over {p.router_steps} steps (skew {p.skew:g})",
                      x_format=lambda v: f"{v:g}", y_format=lambda v: f"{v:.2g}")


@dataclass(frozen=True)
class BalanceRow:
    method: str
    name: str
    first: tuple[int, ...]
    last: tuple[int, ...]
    vio_first: float
    vio_last: float
    aux_last: float
    z_last: float


def balance_rows(p: MoeParams, trace) -> list[BalanceRow]:
    rows = []
    for t in trace.training:
        rows.append(BalanceRow(t.method, METHOD_NAMES[t.method], tuple(int(v) for v in t.loads[0]),
                               tuple(int(v) for v in t.loads[-1]), t.max_violation[0],
                               t.max_violation[-1], t.aux_loss[-1], t.z_loss[-1]))
    return rows


@dataclass(frozen=True)
class LayoutRow:
    name: str
    layout: MoeLayout
    note: str
    total: float
    active: float
    flops_active: float
    flops_dense: float
    dense_params: float
    expert_params: float
    bytes_total: float
    optimizer_bytes: float
    alternative: str


@lru_cache(maxsize=1)
def layout_rows() -> tuple[LayoutRow, ...]:
    rows = []
    for key, (layout, note) in LAYOUTS.items():
        m = PRESETS[key]
        share = per_gpu_share(m, layout, zero=1)
        flops = training_flops_per_token(m)
        other = MoeLayout(layout.tp, layout.pp, layout.dp, layout.ep,
                          layout.tp if layout.etp == 1 else 1)
        if other.etp == layout.etp:
            alternative = f"tp {layout.tp}: expert-TP and whole experts coincide"
        elif check_layout(m, other) is None:
            s2 = per_gpu_share(m, other, zero=1)
            alternative = (f"etp {other.etp}: {s2.expert_params / 1e9:.3g} B expert params, "
                           f"{s2.total_bytes / 2**30:.3g} GiB")
        else:
            alternative = (f"etp {other.etp} does not fit: ep × etp must divide tp × dp "
                           f"({layout.tp} × {layout.dp})")
        rows.append(LayoutRow(m.name, layout, note, m.total_params, m.active_params,
                              flops.active, flops.dense_equivalent, share.dense_params,
                              share.expert_params, share.total_bytes,
                              share.dense.optimizer + share.experts.optimizer, alternative))
    return tuple(rows)



__all__ = ["page_view", "form_view", "export_view", "METHODS"]
