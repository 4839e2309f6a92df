"""What a scene is: its parameters, its simulation and its templates.

Each ``app/routes/<scene>.py`` declares one :class:`Scene`; ``app/routes/scenes.py`` turns it
into the four endpoints every scene has (page, embed, JSON, SVG) and ``app/routes/verify.py``
into its verification job. Simulations are pure, so their traces and JSON are cached by params.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from app.params import SceneParams


@dataclass(frozen=True)
class Scene:
    slug: str
    """URL segment: /{slug}, /embed/{slug}, /api/{slug}, /svg/{slug}"""
    title: str
    chapter: int
    summary: str
    """one sentence for the course index"""
    params: type[SceneParams]
    simulate: Callable[[Any], Any]
    """params → trace (a frozen dataclass with ``to_dict()`` and ``frames``)"""
    template: str
    """the page template; its block "stage" is what htmx swaps, block "deck" what embeds show"""
    view: Callable[[Any, Any, int], dict]
    """(params, trace, frame) → template context beyond params and trace"""
    form: Callable[[], dict]
    """template context of the controls, which show even when the query is invalid"""
    svg_template: str
    export: Callable[[Any, Any, int], dict]
    """(params, trace, frame) → context of the standalone SVG of one frame"""
    verify: Any = None
    """an :class:`app.verify.jobs.Check`, or None when the scene has no real run"""
    key_slider: str = ""
    """the control a lecturer drags first; ``make bench`` times slider → repaint on it"""

    def frame_count(self, trace: Any) -> int:
        return len(trace.frames)


@lru_cache(maxsize=32)
def trace_of(scene: Scene, params: SceneParams) -> Any:
    return scene.simulate(params)


@lru_cache(maxsize=64)
def json_of(scene: Scene, params: SceneParams) -> bytes:
    """The trace's JSON: its own ``to_json()`` bytes when it has one (a trace too large to
    build as dicts quickly, such as a pipeline of 10⁵ passes), else ``to_dict()`` via orjson."""
    trace = trace_of(scene, params)
    to_json = getattr(trace, "to_json", None)
    if to_json is not None:
        return to_json()
    return orjson.dumps(trace.to_dict(), option=orjson.OPT_SERIALIZE_NUMPY)
