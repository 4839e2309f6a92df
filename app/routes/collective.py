"""Chapter 2, collective communication: ``/collective`` and its embed, JSON, SVG and real run."""

from __future__ import annotations

import textwrap
from functools import lru_cache
from typing import Annotated, Literal

from markupsafe import Markup
from pydantic import Field, model_validator

from app.params import (AlphaUs, Dtype, GpusPerNode, InterNodeGBs, IntraNodeGBs, Invalid, Rank,
                        SceneParams, Seed, SizeBytes, World, nearby_multiples)
from app.scene import Scene, trace_of
from app.templating import deck_style
from app.verify.collective import CHECK, torch_call
from app.sim.collective_schedules import SPLITTING_OPS, SUPPORTED, is_power_of_two, step_count
from app.sim.collective_cost import BYTES_PER_ELEMENT
from app.sim.collectives import SEMANTICS, simulate
from app.views import collective as view
from app.views import collective_svg
from app.views.plot import human_bytes, human_time_us, line_chart

MAX_CELLS = 2**21
"""Bound on the numbers a trace holds (frames × world × buffer length): about 2 M, which keeps
any accepted request well under half a second."""

Op = Literal["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all"]
Algorithm = Literal["ring", "tree", "halving_doubling", "direct"]
Count = Annotated[int, Field(ge=1, le=65536, description="elements of the full logical tensor")]


class CollectiveParams(SceneParams):
    op: Op = "all_reduce"                     # the collective, with torch.distributed semantics
    algorithm: Algorithm = "ring"             # how the ranks exchange chunks
    world: World = 4                          # ranks taking part
    count: Count = 8                          # elements of the full logical tensor
    seed: Seed = 0                            # seed of the integer inputs
    root: Rank = 0                            # broadcast's source / reduce's destination
    dtype: Dtype = "fp32"                     # element type, for bytes and time
    alpha_us: AlphaUs = 5.0                   # α: latency of one message
    intra_node_gbs: IntraNodeGBs = 300.0      # β⁻¹ inside a node (NVLink, A100 ≈ 300 GB/s)
    inter_node_gbs: InterNodeGBs = 50.0       # β⁻¹ between nodes (400 Gb/s InfiniBand ≈ 50 GB/s)
    gpus_per_node: GpusPerNode = 8            # ranks per node; ring links between nodes are slower
    cost_bytes: SizeBytes = 64 * 2**20        # message size for the cost panel

    @model_validator(mode="after")
    def _consistent(self) -> CollectiveParams:
        if self.op not in SUPPORTED[self.algorithm]:
            able = ", ".join(a for a, ops in SUPPORTED.items() if self.op in ops)
            raise Invalid("algorithm", f"algorithm {self.algorithm} does not implement "
                                       f"{self.op}; {self.op} supports: {able}")
        if self.algorithm == "halving_doubling" and not is_power_of_two(self.world):
            below = 1 << (self.world.bit_length() - 1)
            raise Invalid("world", f"halving_doubling needs a power-of-two world; world "
                                   f"({self.world}) is not — try {below} or {below * 2}")
        if self.op in SPLITTING_OPS and self.count % self.world:
            raise Invalid("count", f"count ({self.count}) must be divisible by world "
                                   f"({self.world}) for {self.op} — try "
                                   f"{nearby_multiples(self.count, self.world, 65536)}")
        if self.root >= self.world:
            raise Invalid("root", f"root ({self.root}) must be a rank from 0 to {self.world - 1}")
        steps = step_count(self.op, self.algorithm, self.world, self.count)
        width = 2 if self.op == "all_to_all" else 1
        cells = (steps + 1) * self.world * self.count * width
        if cells > MAX_CELLS:
            most = MAX_CELLS // ((steps + 1) * self.world * width)
            if self.op in SPLITTING_OPS:
                most = most // self.world * self.world
            raise Invalid("count", f"count ({self.count}) is too large for {self.op} on "
                                   f"{self.world} ranks: the trace would hold {cells:,} numbers "
                                   f"(at most {MAX_CELLS:,}) — use count ≤ {most}")
        return self


COUNT_SLIDER_MAX = 128
"""The page's count slider stops here: every op and algorithm fits MAX_CELLS up to 64 ranks."""


@lru_cache(maxsize=64)
def deck_svg(p: CollectiveParams, frame: int) -> Markup:
    """The page's deck, showing ``frame`` first (cached: decks are pure functions of params)."""
    return collective_svg.render(view.build_deck(simulate_cached(p)), frame)


def page_view(p: CollectiveParams, trace, frame: int) -> dict:
    factor = {"all_reduce": "2(n−1)/n", "broadcast": "1", "reduce": "1"}.get(p.op, "(n−1)/n")
    return {"deck_svg": deck_svg(p, frame), "deck_title": view.deck_title(p),
            "chart_geometry": cost_chart(p, trace),
            "semantics": SEMANTICS[p.op], "torch_call": torch_call(p.op, p.root),
            "stats_bytes": p.count * BYTES_PER_ELEMENT[p.dtype],
            "busbw_formula": f"{factor} = {trace.stats.busbw_factor:.3g}",
            "panel_sent_bytes": max(trace.stats.elements_sent) / p.count * p.cost_bytes,
            "swatches": view.rank_swatches(p.world), "torchrun": torchrun_command(p)}


def form_view() -> dict:
    return {"count_max": COUNT_SLIDER_MAX, "supported": SUPPORTED, "splitting": SPLITTING_OPS,
            "sizes": [(2**k, human_bytes(2**k)) for k in range(10, 35)]}


def export_view(p: CollectiveParams, trace, frame: int) -> dict:
    caption = tuple(textwrap.wrap(trace.frames[frame].caption, 128)[:3])
    return {"deck_svg": collective_svg.render(view.build_deck(trace, upto=frame), frame,
                                              standalone=True, caption=caption,
                                              style=deck_style(standalone=True))}


def simulate_cached(p: CollectiveParams):
    return trace_of(SCENE, p)


def cost_chart(p: CollectiveParams, trace):
    markers = [(p.cost_bytes, f"{human_bytes(p.cost_bytes)}")]
    if trace.cost.crossover_bytes:
        markers.append((trace.cost.crossover_bytes, "ring faster from here"))
    return line_chart(
        [(c.algorithm.replace("_", "-"), c.sizes, c.times_us) for c in trace.cost.curves],
        x_label="message size", y_label="time (α–β model)",
        title=f"{p.op} on {p.world} ranks: time against message size",
        x_log=True, y_log=True, x_format=human_bytes, y_format=human_time_us,
        x_tick_base=4, x_tick_every=2, markers=markers)


def torchrun_command(p: CollectiveParams) -> str:
    nodes = -(-p.world // p.gpus_per_node)
    per_node = min(p.world, p.gpus_per_node)
    args = (f"--op {p.op} --algorithm {p.algorithm} --count {p.count} --seed {p.seed} "
            f"--root {p.root} --out report.json")
    if nodes == 1:
        return f"torchrun --standalone --nproc-per-node {per_node} workers/collective.py {args}"
    return (f"torchrun --nnodes {nodes} --nproc-per-node {per_node} --rdzv-backend c10d "
            f"--rdzv-endpoint $HEAD_NODE:29500 workers/collective.py {args}")


SCENE = Scene(
    slug="collective",
    title="Collective communication",
    chapter=2,
    summary="AllReduce, ReduceScatter, AllGather, Broadcast, Reduce and All-to-All, chunk by "
            "chunk with real numbers; ring, double binary tree and halving-doubling; the α–β "
            "cost model and nccl-tests' bus bandwidth.",
    params=CollectiveParams,
    simulate=simulate,
    template="scenes/collective.html",
    view=page_view,
    form=form_view,
    svg_template="scenes/collective.svg",
    export=export_view,
    verify=CHECK,
    key_slider="world",
    preview="world=6&count=12&frame=4",
)
