"""What a scene is: its parameters, its simulation and its templates.

Each ``app/scenes/<slug>/__init__.py`` declares one :class:`Scene`; ``app/routes/scenes.py`` turns it
into the four endpoints every scene has (page, embed, JSON, SVG) and ``app/routes/verify.py``
into its verification job. Simulations are pure, so their traces and JSON are kept by params (app/caches.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from app.caches import JSON, TRACES, memoised
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
    view: Callable[[Any, Any, int], dict]
    """(params, trace, frame) → template context beyond params and trace"""
    form: Callable[[], dict]
    """template context of the controls, which show even when the query is invalid"""
    export: Callable[[Any, Any, int], dict]
    """(params, trace, frame) → context of the standalone SVG of one frame"""
    verify: Any = None
    """an :class:`app.jobs.runner.Check`, or None when the scene has no real run"""
    key_slider: str = ""
    """the control a lecturer drags first; ``make bench`` times slider → repaint on it"""
    preview: str = ""
    """query of the course index's thumbnail (``/svg/{slug}?{preview}``); none if empty"""
    also_in: tuple[int, ...] = ()
    """further chapters whose course entry lists this scene (after their own scenes' order)"""
    boxed: bool = False
    """whether its deck is laid out for the box it is shown in (issue 27, app/draw/box.py):
    then ``view`` and ``export`` take the :class:`app.draw.box.Box` as a fourth argument.
    False for the scenes still to do (docs/legibility.md): their decks keep a fixed size."""

    def __post_init__(self):
        _BY_PARAMS.setdefault(self.params, self)

    @property
    def chapters(self) -> tuple[int, ...]:
        """Every chapter that lists the scene: its own first."""
        return (self.chapter, *self.also_in)

    @property
    def template(self) -> str:
        """The page template, ``templates/scenes/<slug with underscores>.html``: its block
        "stage" is what htmx swaps, its block "deck" what embeds show."""
        return f"scenes/{self.slug.replace('-', '_')}.html"

    def frame_count(self, trace: Any) -> int:
        return len(trace.frames)

    def page_context(self, params: Any, trace: Any, frame: int, box: Any = None) -> dict:
        """``view``'s context, for ``box`` when the scene is :attr:`boxed`."""
        return (self.view(params, trace, frame, box) if self.boxed and box is not None
                else self.view(params, trace, frame))

    def export_context(self, params: Any, trace: Any, frame: int, box: Any = None) -> dict:
        """``export``'s context (a standalone file of one frame), for ``box`` when the scene
        is :attr:`boxed`: the file's page, caption included."""
        return (self.export(params, trace, frame, box) if self.boxed and box is not None
                else self.export(params, trace, frame))


_BY_PARAMS: dict[type, Scene] = {}
"""Each declared scene by its params model (the first to declare a model owns it)."""


def scene_of(params: SceneParams) -> Scene | None:
    """The scene whose params model ``params`` is an instance of, if one was declared."""
    return _BY_PARAMS.get(type(params))


def trace_of(scene: Scene, params: SceneParams) -> Any:
    return traced(scene.simulate, params)


@memoised(TRACES)
def traced(simulate: Callable[[Any], Any], params: SceneParams) -> Any:
    """The trace of ``params``, simulated once while it stays among the recent ones (a scene's
    page, deck and JSON all read the same trace)."""
    return simulate(params)


def json_of(scene: Scene, params: SceneParams) -> bytes:
    """The trace as JSON bytes, computed once per params: the trace's own ``to_json()`` when it
    has one (a trace too large to build as dicts quickly, such as a pipeline of 10⁵ passes),
    else ``to_dict()`` through orjson."""
    body = JSON.get((scene, params))
    if body is None:
        trace = trace_of(scene, params)
        to_json = getattr(trace, "to_json", None)
        body = (to_json() if to_json is not None
                else orjson.dumps(trace.to_dict(), option=orjson.OPT_SERIALIZE_NUMPY))
        JSON.put((scene, params), body)
    return body


def cached_json(scene: Scene, params: SceneParams) -> bytes | None:
    """The JSON if it is cached, else None (never computes)."""
    return JSON.get((scene, params))
