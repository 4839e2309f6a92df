"""``/train``'s page: the deck of one step, and the panels beside it — the predicted split,
the layout's groups (the /parallelism mesh), memory per rank, the machine the prediction is for
and how far it is from a GPU node, the framework's modules, links to every parallelism's own
scene at these sizes, and the real run."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from markupsafe import Markup
from pydantic import ValidationError

from app.caches import DECKS, memoised
from app.draw.box import EXPORT, PAGE, Box
from app.draw.caption import CAPTION_HEIGHT, caption_lines
from app.humanize import human_bytes, human_time_us
from app.jobs.launch import torchrun_line
from app.scene import traced
from app.scenes.parallelism import deck as mesh_view
from app.scenes.parallelism import deck_svg as mesh_svg
from app.scenes.parallelism.page import mesh_style
from app.scenes.train import deck as view
from app.scenes.train import deck_svg as train_svg
from app.scenes.train.check import CHECK
from app.sim.parallelism.params import ParallelismParams
from app.sim.parallelism.simulate import simulate as layout_simulate
from app.sim.train.params import CPU, GPU, TrainParams
from app.sim.train.simulate import TrainTrace, simulate
from app.templating import LIGHT_COLOURS, PAGE_COLOURS, render


@memoised(DECKS)
def deck_of(p: TrainParams, box: Box) -> view.Deck:
    return view.build_deck(traced(simulate, p), box)


@memoised(DECKS)
def deck_svg(p: TrainParams, frame: int, box: Box) -> Markup:
    """The page's deck for ``box``, showing ``frame`` first (cached: decks are pure functions
    of their params and box)."""
    return train_svg.render(deck_of(p, box), frame)


@lru_cache(maxsize=2)
def train_style(standalone: bool) -> Markup:
    return Markup(render("_partials/train_style.css",
                         c=LIGHT_COLOURS if standalone else PAGE_COLOURS))


def mesh_markup(p: TrainParams) -> Markup:
    """The layout's ranks and groups as /parallelism draws them (hover a rank: its groups).
    The mesh is the ranks and their groups alone: of /parallelism's parameters the micro-batch
    count reaches only its traffic panel, so one mesh is drawn per layout, not per state
    (tests/scenes/test_train_deck.py holds it the same for every micro-batch count)."""
    return _mesh(p.layout_params().model_copy(update={"microbatches": 1}))


@lru_cache(maxsize=64)
def _mesh(layout: ParallelismParams) -> Markup:
    return mesh_svg.render(mesh_view.build_deck(layout_simulate(layout), only=0), 0)


def page_view(p: TrainParams, trace: TrainTrace, frame: int, box: Box = PAGE) -> dict:
    return {"deck_svg": deck_svg(p, frame, box), "deck_title": view.deck_title(p),
            "mesh_svg": mesh_markup(p), "split_rows": split_rows(trace),
            "memory_rows": [m.to_dict() for m in trace.memory], "links": scene_links(p),
            "groups": group_lines(trace), "torchrun": torchrun_line(CHECK, p, **nodes_of(p)),
            "human_bytes": human_bytes, "human_time": lambda s: human_time_us(s * 1e6),
            "cpu": CPU, "gpu": GPU,
            "default_machine": all(getattr(p, k) == v for k, v in CPU.items())}


def nodes_of(p: TrainParams) -> dict:
    """torchrun_line's nodes: world/nodes ranks a launcher (one node: --standalone)."""
    return {"gpus_per_node": p.gpus_per_node}


def form_view() -> dict:
    return {"style": Markup(mesh_style(False) + train_style(False))}


def export_view(p: TrainParams, trace: TrainTrace, frame: int, box: Box = EXPORT) -> dict:
    """Frame ``frame`` as a file whose page is ``box``: the drawing above, the caption under."""
    from app.templating import deck_style
    drawing = replace(box, height=box.height - CAPTION_HEIGHT)
    return {"deck_svg": train_svg.render(
        view.build_deck(trace, drawing, upto=frame), frame, standalone=True,
        caption=caption_lines(trace.frames[frame].caption, box.width),
        style=deck_style(standalone=True) + train_style(True))}


def split_rows(trace: TrainTrace) -> list[dict]:
    """Each rank's predicted split as shares of the step (for the bars), then the mean."""
    step = trace.step_s or 1.0
    rows = [{"name": str(r["rank"]), **r,
             "shares": [r["compute_s"] / step, r["comm_exposed_s"] / step, r["bubble_s"] / step]}
            for r in trace.rank_split]
    mean = trace.predicted
    rows.append({"name": "mean", **mean, "shares": [mean["compute_s"] / step,
                                                    mean["comm_exposed_s"] / step,
                                                    mean["bubble_s"] / step]})
    return rows


def group_lines(trace: TrainTrace) -> list[tuple[str, str, str]]:
    """(kind, what it does here, its groups) for every group kind with more than one rank."""
    p, layout = trace.params, trace.layout
    what = {"tp": "f/g all-reduces (or SP all-gather + reduce-scatter), the vocab-parallel loss",
            "cp": "the ring: K/V blocks forward, K/V and their gradients backward",
            "pp": "activations forward, their gradients back",
            "dp_cp": "the dense gradients, bucket by bucket" + (" (reduce-scatter, then "
                                                                "all-gather of the update)"
                                                                if p.zero else ""),
            "ep": "the MoE dispatch and combine all-to-alls",
            "edp": "the experts' gradients"}
    out = []
    for kind in ("tp", "cp", "pp", "dp_cp", "ep", "edp"):
        groups = layout.groups(kind)
        if len(groups[0]) > 1 and (kind not in ("ep", "edp") or p.moe):
            text = " ".join("[" + ",".join(map(str, g)) + "]" for g in groups[:8])
            out.append((kind, what[kind], text + (" …" if len(groups) > 8 else "")))
    return out


def _link(path: str, model, values: dict, drop: tuple[str, ...] = ()) -> str | None:
    """``path?query`` for ``values`` if the scene accepts them (else without ``drop``)."""
    for attempt in (values, {k: v for k, v in values.items() if k not in drop}):
        try:
            return f"{path}?{model.model_validate(attempt).query()}"
        except ValidationError:
            continue
    return None


def scene_links(p: TrainParams) -> list[tuple[str, str, str]]:
    """(title, URL, what it shows) of each parallelism's own scene at these sizes."""
    from app.sim.context_parallel.params import ContextParallelParams
    from app.sim.data_parallel.params import DataParallelParams
    from app.sim.moe.params import MoeParams
    from app.sim.pipeline.params import PipelineParams
    from app.sim.tensor_parallel.params import TensorParallelParams
    from app.sim.zero.params import ZeroParams
    candidates = [
        ("Tensor parallelism", _link("/tensor-parallel", TensorParallelParams,
                                     {"block": "attention", "tp": max(2, p.tp),
                                      "hidden": p.hidden, "ffn": p.ffn, "heads": p.heads,
                                      "tokens": p.seq // p.cp,
                                      "sequence_parallel": p.sequence_parallel},
                                     ("tokens", "hidden", "ffn")),
         "the column/row-parallel block and where its all-reduces go"),
        ("Context parallelism", _link("/context-parallel", ContextParallelParams,
                                      {"method": "ring", "cp": max(2, p.cp), "seq": p.seq,
                                       "heads": p.heads, "kv_heads": p.kv_heads,
                                       "head_dim": p.head_dim, "causal": True,
                                       "balance": "zigzag"}, ("seq", "head_dim")),
         "ring attention's blocks and the online-softmax merge"),
        ("Pipeline parallelism", _link("/pipeline", PipelineParams,
                                       {"schedule": p.schedule, "stages": max(2, p.pp),
                                        "microbatches": p.microbatches}),
         f"{'GPipe' if p.schedule == 'gpipe' else '1F1B'}'s order and its bubble"),
        ("Data parallelism", _link("/data-parallel", DataParallelParams,
                                   {"mode": "ddp", "dp": max(2, p.dp * p.cp)}),
         "DDP's buckets overlapping the backward"),
        ("ZeRO", _link("/zero", ZeroParams, {"stage": max(1, p.zero), "dp": max(2, p.dp * p.cp)}),
         "what ZeRO-1 shards and sends"),
        ("Mixture of experts", _link("/moe", MoeParams,
                                     {"experts": max(2, p.experts), "top_k": p.top_k,
                                      "ep": max(2, p.ep), "capacity_factor": 0,
                                      "tokens": max(16, p.seq // p.cp)}, ("tokens",)),
         "the router and the all-to-all's uneven splits"),
        ("The 5D layout", _link("/parallelism", type(p.layout_params()),
                                p.layout_params().model_dump()),
         "every group of this layout on its nodes, and its traffic"),
    ]
    return [(title, url, what) for title, url, what in candidates if url]
