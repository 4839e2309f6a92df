"""What the classroom tools need from the server: the stops of a scene's key parameter that the
current state accepts.

In presentation mode the scene's key parameter (``Scene.key_slider``) stays at hand in a small
overlay (static/js/classroom.js). Its slider runs over every stop the control has, but not every
stop is valid in every state — on /context-parallel with Ulysses, cp must divide the heads, so
cp = 5 is refused — and a refused state would leave the projector with an error and no figure.
:func:`key_stops` lists the stops the params model accepts *here*, other fields unchanged, so the
overlay skips the others (the player root's ``data-key-stops``). Each stop is checked with the
model's own validation: nothing is decided twice (DESIGN principles 11 and 13).
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import ValidationError

from app.params import SceneParams, control, option_value
from app.scene import scene_of

MAX_STOPS = 256
"""A slider with more positions than this (a float slider, a typed number) is not listed: its
overlay moves freely, as on the page."""


def candidates(model: type[SceneParams], name: str) -> list | None:
    """Every value the control of ``model.name`` can be moved to, in order; None when it is not
    a short list (a continuous slider, a typed number, a text)."""
    c = control(model, name)
    if c["kind"] == "values":
        return list(c["values"])
    if c["kind"] == "choice":
        return [value for value, _ in c["options"]]
    if c["kind"] == "slider" and isinstance(c["step"], int) and c["step"] >= 1:
        low, high = int(c["min"]), int(c["max"])
        if (high - low) // c["step"] + 1 <= MAX_STOPS:
            return list(range(low, high + 1, c["step"]))
    return None


@lru_cache(maxsize=2048)
def key_stops(params: SceneParams) -> str:
    """The stops of the scene's key parameter that ``params`` accepts with only that parameter
    changed, as the control carries them ("2 4 8 16"); "" when the scene has no key parameter or
    its control is not a short list of stops."""
    scene = scene_of(params)
    if scene is None or not scene.key_slider:
        return ""
    name = scene.key_slider
    values = candidates(type(params), name)
    if values is None:
        return ""
    base = params.model_dump()
    ok = []
    for value in values:
        try:
            type(params).model_validate({**base, name: value})
        except ValidationError:
            continue
        ok.append(option_value(value))
    return " ".join(ok)
