"""Every scene's controls come from its params model (DESIGN principle 13): the page's sliders and
number fields carry the bounds, step and label of the field's app.params.Control, every bound lies
inside the field's validation range, every default inside its slider; chips, selects, checkboxes
and text fields carry the Control's legend, help and options; every field a page shows has a
Control; and no scene template types a bound, a label, a help text or an option list."""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from app.main import SCENES
from app.view import NAMES as VIEW_NAMES
from app.params import _bounds, check_field, control, control_spec, describe, option_value
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
        if c["kind"] == "choice" and c["options"]:
            assert option_value(default) in [v for v, _ in c["options"]], \
                f"{scene.slug}.{name}: default {default!r} is not an option"
            continue
        if c["kind"] in ("choice", "flag", "text"):
            continue
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
# A label, legend or option list typed for a params field: a call of the macros field() draws
# with (radios, select, checkbox), a field() given a literal list of options, or a raw form
# control (a radio, checkbox, select, text input or option list written out).
CHOICE_CALL = re.compile(r"\{\{\s*(?:radios|select|select_number|checkbox|text)\(")
LITERAL_OPTIONS = re.compile(r"\bfield\([^)]*?\boptions=\s*[\[({]")
RAW_CONTROL = re.compile(r"""<input(?![^>]*\bdata-ui\b)[^>]*type=["'](?:radio|checkbox|text)["']"""
                         r"""|<select\b|<datalist\b|<legend\b|<option\b""")
"""A control typed in a template; ``data-ui`` marks an input that is the page's own (the
planner's launch-config tabs), never a parameter: it sends nothing to the server."""


def literal_bounds(source: str) -> list[str]:
    """The places in a template's source that type a control's bound, label, help or options."""
    found = []
    for pattern in (OLD_CALL, LITERAL_OVERRIDE, RAW_BOUND, HELP_IN_FIELD, CHOICE_CALL,
                    LITERAL_OPTIONS, RAW_CONTROL):
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
    assert literal_bounds('{{ radios("op", "Collective", v.op, [("ring", "Ring", "")]) }}')
    assert literal_bounds('{{ select_number("tp", "Tensor parallel t", v.tp, [1, 2, 4]) }}')
    assert literal_bounds('{{ checkbox("sequence_parallel", "SP", v.sequence_parallel) }}')
    assert literal_bounds('{{ field(model, "dp", v.dp, options=[(1, "1"), (2, "2")]) }}')
    assert literal_bounds('{{ field(model, "gpu", v.gpu, options={"h100-80": "H100"}) }}')
    assert literal_bounds('<select name="gpu"><option value="h100-80">H100</option></select>')
    assert literal_bounds('<label><input type="radio" name="op" value="ring"> Ring</label>')
    assert literal_bounds('<input type="text" id="f-order" name="order" list="orders">')
    assert not literal_bounds('<input data-ui type="radio" name="launch-tab" id="launch-x">')
    assert not literal_bounds('{{ field(model, "preset", v.preset, options=presets) }}')
    assert not literal_bounds('{{ field(model, "algorithm", v.algorithm, '
                              'option_attrs=alg_attrs) }}')


@pytest.mark.parametrize("path", sorted(TEMPLATES.glob("*.html")), ids=lambda p: p.name)
def test_no_template_types_a_bound(path):
    assert literal_bounds(path.read_text()) == [], \
        f"{path.name} types a control's bound, label, help or options"


def test_help_is_the_description_where_the_type_has_none():
    kv = MemoryParams.model_fields["kv_heads"]   # Optional: its type's description is inside
    assert kv.description == control(MemoryParams, "kv_heads")["help"]
    schema = MemoryParams.model_json_schema()["properties"]["kv_heads"]
    assert schema["description"] == "Fewer than a: grouped-query attention."
    stages = PipelineParams.model_fields["stages"]      # Pp's own description stays
    assert stages.description == "pipeline-parallel size (stages)"
    assert describe(PipelineParams, "stages") == "an integer from 1 to 64"
    assert describe(PipelineParams, "t_f") == "a number in (0, 1000]"


# --- chips, selects, checkboxes and text fields ---------------------------------------------

class Fields(HTMLParser):
    """Each control of the controls form (an element with data-field): its legend or label text
    (up to the value's <output>), its help text, its options [(value, text)] (radios, select
    options, datalist suggestions), the kind of its inputs; and every name a form input sends."""

    def __init__(self):
        super().__init__()
        self.fields: dict[str, dict] = {}
        self.names: set[str] = set()
        self._in_form = False
        self._field: dict | None = None
        self._depth = 0
        self._text: str | None = None   # "label", "help" or "option" while inside one

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("id") == "controls":
            self._in_form = True
        if not self._in_form:
            return
        if tag in ("input", "select") and a.get("name"):
            self.names.add(a["name"])
        if self._field is None:
            if "data-field" in a:
                self._field = {"name": a["data-field"], "tag": tag, "label": "", "help": "",
                               "options": [], "inputs": set()}
                self.fields[a["data-field"]] = self._field
                self._depth = 1
            return
        if tag == self._field["tag"]:
            self._depth += 1
        if tag in ("legend", "label") and not self._field["label"]:
            self._text = "label"
        elif tag == "output":
            self._text = None
        elif tag == "small" and "help" in a.get("class", ""):
            self._text = "help"
        elif tag == "option":
            self._field["options"].append([a.get("value"), ""])
            self._text = "option"
        elif tag == "input" and a.get("type") == "radio":
            self._field["options"].append([a.get("value"), ""])
            self._field["inputs"].add("radio")
            self._text = "option"
        elif tag in ("input", "select"):
            self._field["inputs"].add(a.get("type", tag) if tag == "input" else "select")

    def handle_endtag(self, tag):
        if tag == "form":
            self._in_form = False
        if self._field is None:
            return
        if tag in ("legend", "small", "option", "span") or (tag == "label" and
                                                          self._text == "label"):
            self._text = None
        if tag == self._field["tag"]:
            self._depth -= 1
            if self._depth == 0:
                self._field = None

    def handle_data(self, data):
        if self._field is None or self._text is None:
            return
        if self._text == "option":
            self._field["options"][-1][1] += data
        else:
            self._field[self._text] += data


def page_fields(client, slug: str, query: str = "") -> Fields:
    r = client.get(f"/{slug}?{query}")
    assert r.status_code in (200, 422), r.text[:300]
    parser = Fields()
    parser.feed(r.text)
    return parser


def is_a_value(model, name: str, value: str) -> None:
    """An option's value validates as the field (ValueError naming it if not); "" stands for
    None, the default of an optional field."""
    if value == "":
        assert model.model_fields[name].default is None, f"{name}: an empty option"
    else:
        check_field(model, name, value)


def squash(text: str) -> str:
    return " ".join(text.split())


# A choice whose options the page computes at render time (presets, sizes, schedules …): the
# model's Control gives label and help, the page the list (checked against the field's type).
STATES = {"collective": ["op=broadcast&algorithm=tree"], "memory": ["sequence_parallel=true"],
          "planner": ["recompute=full"], "pipeline": ["schedule=zbv"],
          "data-parallel": ["mode=fsdp&prefetch=false"], "zero": ["stage=3&offload=nvme"]}
WIDGET = {"radios": {"radio"}, "select": {"select"}}


@pytest.mark.parametrize("scene", SCENES, ids=lambda s: s.slug)
def test_every_control_carries_its_models_texts(client, scene):
    model = scene.params
    for query in ["", *STATES.get(scene.slug, [])]:
        page = page_fields(client, scene.slug, query)
        where = f"/{scene.slug}?{query}"
        assert page.fields, f"{where} shows no controls"
        for name in page.names - set(VIEW_NAMES):   # the deck's box and font: app/view.py
            assert name in model.model_fields, f"{where}: the form sends unknown {name}"
            assert control_spec(model, name) is not None, f"{where}: {name} has no Control"
        for name, shown in page.fields.items():
            c = control(model, name)
            here = f"{where} {name}"
            assert squash(shown["label"]) == c["label"], here
            assert squash(shown["help"]) == squash(c["help"]), here
            if c["kind"] == "flag":
                assert shown["inputs"] == {"checkbox"}, here
            elif c["kind"] == "text":
                assert shown["inputs"] == {"text"}, here
                assert [v for v, _ in shown["options"]] == c["options"], here
            elif c["kind"] == "choice":
                assert shown["inputs"] == WIDGET[c["widget"]], here
                for value, _ in shown["options"]:
                    is_a_value(model, name, value)
                if c["listed"]:   # the model's list, in its order, with its texts
                    listed = [(v, squash(t)) for v, t in shown["options"]]
                    assert listed[:len(c["options"])] == c["options"], here
                    assert len(listed) - len(c["options"]) <= 1, here  # + a URL's value


def test_a_value_off_the_list_stays_selected(client):
    page = page_fields(client, "moe", "experts=10")
    options = page.fields["experts"]["options"]
    assert options[-1] == ["10", "10"] and ["60", "60"] in options


def test_options_are_values_of_their_field():
    """Every option a model lists validates as its field and has a text."""
    for scene in SCENES:
        model = scene.params
        for name in model.model_fields:
            spec = control_spec(model, name)
            if spec is None or spec.kind != "choice":
                continue
            for value, text in control(model, name)["options"]:
                assert text, f"{scene.slug}.{name}: an option without text"
                is_a_value(model, name, value)


def test_a_bool_choice_checks_what_the_url_says(client):
    page = page_fields(client, "tensor-parallel", "sequence_parallel=true")
    assert page.fields["sequence_parallel"]["options"] == [["false", "off"], ["true", "on"]]
    r = client.get("/tensor-parallel?sequence_parallel=true")
    assert 'name="sequence_parallel" value="true" checked' in r.text
    r = client.get("/memory?sequence_parallel=true")
    assert re.search(r'name="sequence_parallel" value="true" checked', r.text)
    r = client.get("/memory")
    assert not re.search(r'name="sequence_parallel" value="true" checked', r.text)
