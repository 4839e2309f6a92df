"""The Jinja environment: templates/, shared filters, and block rendering for htmx fragments.

A page template renders whole for a normal request and only its named block (``stage``) for an
htmx request, so one template serves both (DESIGN principle 6) — jinja2-fragments' way, with the
blocks the template inherits too: a scene's template extends templates/_partials/scene_layout.html,
which holds the stage block itself.
"""

from __future__ import annotations

import hashlib
import html
import math
from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, nodes, select_autoescape
from markupsafe import Markup

from app.draw.box import client_config
from app.humanize import human_bytes, human_time_us
from app.param_groups import PRESET_SIZES
from app.params import control, group_fields

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
STATIC = ROOT / "static"


@lru_cache(maxsize=1)
def asset_version() -> str:
    """A hash of the static files, appended to their URLs so browsers refetch after a change."""
    digest = hashlib.sha256()
    for path in sorted(STATIC.rglob("*")):
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(
        enabled_extensions=("html", "svg")), undefined=StrictUndefined, trim_blocks=True,
        lstrip_blocks=True, auto_reload=False)
    env.filters["bytes"] = human_bytes
    env.filters["time_us"] = human_time_us
    env.filters["num"] = lambda v, digits=3: f"{v:.{digits}g}"
    env.filters["log2"] = _log2
    env.filters["text"] = lambda v: Markup(html.escape(str(v), quote=False))  # element text
    env.globals["asset_version"] = asset_version()
    env.globals["deck_style"] = deck_style
    env.globals["box_config"] = client_config()   # static/js/box.js's buckets and type scales
    env.globals["control"] = control  # a params field's label, bounds and help (fields.html)
    env.globals["group_fields"] = group_fields  # a parameter group's fields in a model
    env.globals["preset_sizes"] = PRESET_SIZES  # a preset's sizes: the shape fields' placeholders
    from app.export.trace import TIMELINES
    env.globals["timelines"] = frozenset(TIMELINES)  # scenes with /export/<slug>.trace
    return env


def _log2(value) -> float:
    """log₂ of a slider's value; 0 for what is not a positive number (a rejected query)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return math.log2(number) if number > 0 and math.isfinite(number) else 0.0


PAGE_COLOURS = {"bg": "var(--svg-bg)", "ink": "var(--ink)", "muted": "var(--muted)",
                "line": "var(--line)", "empty": "var(--empty)",
                "cell_stroke": "var(--cell-stroke, 2.5px)", "complete": "var(--complete)",
                "complete_ink": "var(--complete-ink)", "cell_edge": "var(--cell-edge)",
                "good": "var(--good)", "bad": "var(--bad)"}
LIGHT_COLOURS = {"bg": "#ffffff", "ink": "#1a1a1a", "muted": "#555c66", "line": "#c4c9d0",
                 "empty": "#8a939e", "cell_stroke": "2.5px", "complete": "#3b4252",
                 "complete_ink": "#ffffff", "cell_edge": "none", "good": "#007a55",
                 "bad": "#b3261e"}


@lru_cache(maxsize=4)
def deck_style(standalone: bool) -> Markup:
    """The decks' CSS: theme variables for pages, fixed light colours for exported files."""
    colours = LIGHT_COLOURS if standalone else PAGE_COLOURS
    return Markup(render("_partials/deck_style.css", c=colours))


def compile_templates() -> int:
    """Compile every template (Jinja compiles one the first time it is rendered: a scene's
    first page paid about twice its render for its template and partials). Called while the
    server starts, before the first request; returns how many."""
    env = environment()
    names = env.list_templates()
    for name in names:
        env.get_template(name)
    return len(names)


def render(template: str, block: str | None = None, **context) -> str:
    """``template`` rendered whole, or only its block ``block`` (a fragment)."""
    env = environment()
    if block is None:
        return env.get_template(template).render(**context)
    ctx = env.get_template(template).new_context(context)
    for parent in _parents(template):     # as rendering the whole page would: the template's
        for name, func in env.get_template(parent).blocks.items():   # own blocks first
            ctx.blocks.setdefault(name, []).append(func)
    try:
        return env.concat(ctx.blocks[block][0](ctx))
    except Exception:
        env.handle_exception()


@lru_cache(maxsize=None)
def _parents(template: str) -> tuple[str, ...]:
    """The templates ``template`` extends, nearest first (the names its {% extends %} give)."""
    env = environment()
    source = env.loader.get_source(env, template)[0]
    extends = env.parse(source).find(nodes.Extends)
    if extends is None:
        return ()
    parent = extends.template.value
    return (parent, *_parents(parent))
