"""Every scene's controls come from its params model (DESIGN principle 13): the page's sliders and
number fields carry the bounds, step and label of the field's app.params.Control, every bound lies
inside the field's validation range, every default inside its slider, and no scene template types
a bound or a help text into a control call."""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from app.main import SCENES
from app.params import _bounds, control, control_spec, describe
from app.sim.memory.params import MemoryParams
from app.sim.pipeline.params import PipelineParams

TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "scenes"

# Bounds a template sets from other values on purpose (field(..., min=…, max=…, step=…)).
DYNAMIC = {("collective", "count"): {"min", "step"},   # steps of world for the splitting ops
           ("collective", "root"): {"max"},            # world - 1
           ("checkpointing", "recompute_layers"): {"max"}}  # at most the model's layers
# Defaults that lie off their slider on purpose, with why.
OFF_SLIDER = {("pipeline", "chunks"): "chunks = 1 is the non-interleaved schedules'; the slider "
                                      "(2–8) is disabled for them and shows 2"}


class Controls(HTMLParser):
    """The controls form's range and number inputs (attributes, by the parameter they set) and
    the text of each control's label."""

    def __init__(self):
        super().__init__()
        self.inputs: dict[str, dict] = {}
        self.labels: dict[str, str] = {}
        self._label: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "label" and a.get("for", "").startswith("f-"):
            self._label = a["for"][2:]
            self.labels[self._label] = ""
        elif tag == "output" and self._label is not None:
            self._label = None   # the label's text ends where the value starts
        elif tag == "input" and a.get("type") in ("range", "number") and \
                (a.get("id") or "").startswith("f-"):          # the form's, not the player's
            name = a.get("data-log2-for") or a.get("data-target") or a["name"]
            self.inputs[name] = a

    def handle_endtag(self, tag):
        if tag == "label":
            self._label = None

    def handle_data(self, data):
        if self._label is not None:
            self.labels[self._label] += data


def number(text: str) -> float | str:
    return text if text == "any" else float(text)


def inside(value: float, field, strict_allowed: bool) -> bool:
    """value within the field's validation range (a strict bound counts as reached when the
    control may sit on it, as a typed number field's min may)."""
    (low, strict_low), (high, strict_high) = _bounds(field)
    if low is not None and (value < low or (value == low and strict_low and not strict_allowed)):
        return False
    if high is not None and (value > high
                             or (value == high and strict_high and not strict_allowed)):
        return False
    return True


def page_controls(client, slug: str, query: str = "") -> Controls:
    r = client.get(f"/{slug}?{query}")
    assert r.status_code == 200, r.text[:300]
    parser = Controls()
    parser.feed(r.text)
    return parser


@pytest.mark.parametrize("scene", SCENES, ids=lambda s: s.slug)
def test_page_controls_match_the_model(client, scene):
    model = scene.params
    page = page_controls(client, scene.slug)
    assert page.inputs, f"/{scene.slug} has no sliders or number fields"
    for name, attrs in page.inputs.items():
        assert name in model.model_fields, f"{scene.slug}: a control for unknown {name}"
        assert control_spec(model, name) is not None, f"{scene.slug}.{name} has no Control"
        c = control(model, name)
        field = model.model_fields[name]
        where = f"{scene.slug}.{name}"
        assert page.labels[name].strip() == c["label"], where
        fixed = {"min", "max", "step"} - DYNAMIC.get((scene.slug, name), set())
        if c["kind"] == "values":
            assert attrs["data-values"].split() == [str(x) for x in c["values"]], where
            assert (attrs["min"], attrs["max"]) == ("0", str(len(c["values"]) - 1)), where
            assert all(inside(x, field, False) for x in c["values"]), where
            assert list(c["values"]) == sorted(set(c["values"])), f"{where}: values in order"
            continue
        typed = attrs["type"] == "number"
        for key in fixed & set(attrs):   # a typed field may leave max to the validation
            assert number(attrs[key]) == number(str(c[key])), \
                f"{where}: {key}={attrs[key]!r} on the page, {c[key]!r} in the model"
        low, high = float(attrs["min"]), float(attrs.get("max", c["max"]))
        assert low <= high, where
        ends = (2**low, 2**high) if c["kind"] == "log2" else (low, high)
        for end in ends:
            assert inside(end, field, strict_allowed=typed), \
                f"{where}: the control's bound {end} is outside {describe(model, name)}"
        value = attrs.get("value", "")
        if value and not typed:
            assert low <= float(value) <= high, f"{where}: value {value} off the slider"


@pytest.mark.parametrize("scene", SCENES, ids=lambda s: s.slug)
def test_defaults_lie_on_their_controls(scene):
    model = scene.params
    controlled = [n for n in model.model_fields if control_spec(model, n) is not None]
    assert controlled, f"{scene.slug}: no field has a Control"
    for name in controlled:
        c, default = control(model, name), model.model_fields[name].default
        if default is None or (scene.slug, name) in OFF_SLIDER:
            continue
        if c["kind"] == "values":
            assert default in c["values"], f"{scene.slug}.{name}: default {default} not a stop"
            continue
        position = math.log2(default) if c["kind"] == "log2" else default
        assert c["min"] <= position <= c["max"], \
            f"{scene.slug}.{name}: default {default} outside its control {c['min']}–{c['max']}"


def test_every_slider_of_a_page_is_drawn_from_its_model(client):
    """A second state of each page: the controls a schedule or op reveals also match."""
    for slug, query in [("pipeline", "schedule=interleaved_1f1b&chunks=4"),
                        ("collective", "op=reduce_scatter&world=8"),
                        ("checkpointing", "preset=gpt2&recompute=full")]:
        scene = next(s for s in SCENES if s.slug == slug)
        page = page_controls(client, slug, query)
        for name, attrs in page.inputs.items():
            if attrs.get("type") == "range" and "data-values" not in attrs:
                assert float(attrs["min"]) <= float(attrs["value"]) <= float(attrs["max"]), name
            assert page.labels[name].strip() == control(scene.params, name)["label"]
    page = page_controls(client, "collective", "op=reduce_scatter&world=8")
    assert (page.inputs["count"]["min"], page.inputs["count"]["step"]) == ("8", "8")
    page = page_controls(client, "checkpointing", "preset=gpt2")
    assert page.inputs["recompute_layers"]["max"] == "12"   # GPT-2's layers, below the 48 stop


# A numeric literal where a control call sets a bound: an old macro call with a number among its
# arguments, a field() override written as a number, or a raw input's min/max/step/data-values.
OLD_CALL = re.compile(r"\{\{\s*(?:log_)?slider\(|\{\{\s*number\(")
LITERAL_OVERRIDE = re.compile(r"\bfield\([^)]*?\b(?:min|max|step)=\s*\(?\s*-?\d")
RAW_BOUND = re.compile(r"""\b(?:min|max|step|data-values)=["']-?\d""")
HELP_IN_FIELD = re.compile(r"\bfield\([^)]*?\bhelp=")


def literal_bounds(source: str) -> list[str]:
    """The places in a template's source that type a control's bound or help."""
    found = []
    for pattern in (OLD_CALL, LITERAL_OVERRIDE, RAW_BOUND, HELP_IN_FIELD):
        found += [m.group(0) for m in pattern.finditer(source)]
    return found


def test_the_pattern_finds_a_typed_bound():
    assert literal_bounds('{{ slider("t_f", "Forward", v.t_f, 0.1, 5, 0.1) }}')
    assert literal_bounds('{{ number("seed", "Seed", v.seed, 0, 2147483647) }}')
    assert literal_bounds('{{ field(model, "root", v.root, max=63) }}')
    assert literal_bounds('{{ field(model, "t_f", v.t_f, help="One pass.") }}')
    assert literal_bounds('<input type="range" min="0" max="40" data-values="1 2 4">')
    assert not literal_bounds('{{ field(model, "root", v.root, max=v.world|int - 1) }}')
    assert not literal_bounds('{{ field(model, "count", v.count, '
                              'min=(v.world if splits else count.min)) }}')


@pytest.mark.parametrize("path", sorted(TEMPLATES.glob("*.html")), ids=lambda p: p.name)
def test_no_template_types_a_bound(path):
    assert literal_bounds(path.read_text()) == [], f"{path.name} types a control's bound or help"


def test_help_is_the_description_where_the_type_has_none():
    kv = MemoryParams.model_fields["kv_heads"]   # Optional: its type's description is inside
    assert kv.description == control(MemoryParams, "kv_heads")["help"]
    schema = MemoryParams.model_json_schema()["properties"]["kv_heads"]
    assert schema["description"] == "Fewer than a: grouped-query attention."
    stages = PipelineParams.model_fields["stages"]      # Pp's own description stays
    assert stages.description == "pipeline-parallel size (stages)"
    assert describe(PipelineParams, "stages") == "an integer from 1 to 64"
    assert describe(PipelineParams, "t_f") == "a number in (0, 1000]"
