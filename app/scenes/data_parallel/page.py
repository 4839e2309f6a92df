"""Chapter 4, data parallelism: ``/data-parallel`` and its embed, JSON, SVG and real run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from markupsafe import Markup

from app.caches import DECKS, memoised
from app.draw.box import EXPORT, PAGE, Box
from app.draw.caption import CAPTION_HEIGHT, caption_lines
from app.jobs.launch import torchrun_line
from app.scene import traced
from app.scenes.data_parallel import deck as view
from app.scenes.data_parallel import deck_svg as data_parallel_svg
from app.scenes.data_parallel.check import CHECK
from app.sim.data_parallel.params import DataParallelParams
from app.sim.data_parallel.simulate import simulate
from app.catalog.models import PRESETS
from app.templating import deck_style


@memoised(DECKS)
def deck_svg(p: DataParallelParams, frame: int, box: Box) -> Markup:
    """The page's deck for ``box``, showing ``frame`` first (cached: a deck is a pure function
    of its params and box)."""
    deck = view.build_deck(traced(simulate, p), box)
    return data_parallel_svg.render(deck, frame)


FIRST_SCRIPT = (Path(__file__).resolve().parents[3] / "workers" / "first_ddp.py").read_text()


def page_view(p: DataParallelParams, trace, frame: int, box: Box = PAGE) -> dict:
    return {"deck_svg": deck_svg(p, frame, box), "deck_title": view.deck_title(p, trace),
            **view.panels(trace), "torchrun": torchrun_line(CHECK, p),
            "first_script": FIRST_SCRIPT, "launch": launch_commands(trace.torchrun()),
            "model_params": PRESETS[p.preset].param_count()}


def form_view() -> dict:
    return {}


def export_view(p: DataParallelParams, trace, frame: int, box: Box = EXPORT) -> dict:
    """Frame ``frame`` as a file whose page is ``box``: the drawing above, the caption under."""
    drawing = replace(box, height=box.height - CAPTION_HEIGHT)
    return {"deck_svg": data_parallel_svg.render(
        view.build_deck(trace, drawing, upto=frame), frame, standalone=True,
        caption=caption_lines(trace.frames[frame].caption, box.width),
        style=deck_style(standalone=True))}


def launch_commands(info: dict) -> list[str]:
    """The torchrun line each node runs for the first DDP script."""
    if info["nodes"] == 1:
        return [f"torchrun --standalone --nproc-per-node {info['nproc_per_node']} "
                f"workers/first_ddp.py"]
    shown = [0, 1, info["nodes"] - 1] if info["nodes"] > 3 else range(info["nodes"])
    return [f"# node {n}: torchrun --nnodes {info['nodes']} --nproc-per-node "
            f"{info['nproc_per_node']} --node-rank {n} --master-addr $HEAD --master-port 29500 "
            f"workers/first_ddp.py" for n in sorted(set(shown))]
