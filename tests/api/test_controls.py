"""Every scene's controls come from its params model (DESIGN principle 13): the page's sliders and
number fields carry the bounds, step and label of the field's app.params.Control, every bound lies
inside the field's validation range, every default inside its slider; chips, selects, checkboxes
and text fields carry the Control's legend, help and options; every field a page shows has a
Control; and no scene template types a bound, a label, a help text or an option list. The shared
parameter groups (app/param_groups.py) are defined once: every field named like a group's is the
group's field, and a page lays a group out whole (group() in fields.html), never field by
field."""

from __future__ import annotations

import json
import math
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from pydantic import create_model

from app.main import SCENES
from app.param_groups import GROUPS, PRESET_SIZES, SHAPE_FIELDS
from app.params import (SceneParams, _bounds, _unwrap, check_field, control, control_spec,
                        describe, group_fields, option_value)
from app.view import NAMES as VIEW_NAMES
from app.sim.memory.params import MemoryParams
from app.sim.pipeline.params import PipelineParams

TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "scenes"

# Bounds a template sets from other values on purpose (field(..., min=…, max=…, step=…)).
DYNAMIC = {("collective", "count"): {"min", "step"},   # steps of world for the splitting ops
           ("collective", "root"): {"max"},            # world - 1
           ("checkpointing", "recompute_layers"): {"max"},  # at most the model's layers
           **{("train", n): {"max"} for n in ("tp", "cp", "ep", "dp", "pp")}}  # ≤ max_world
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
        elif tag in ("output", "span") and self._label is not None:
            self._label = None   # the label's text ends where the value or the unit starts
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
            values, shown = [str(x) for x in c["values"]], attrs["data-values"].split()
            if "max" in fixed:
                assert shown == values, where
            else:                              # the model's values, stopped lower by the page
                assert shown and shown == values[:len(shown)], where
            assert (attrs["min"], attrs["max"]) == ("0", str(len(shown) - 1)), where
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
    assert schema["description"] == "Fewer than a: grouped-query attention; they must divide a."
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
        elif tag == "output" or (tag == "span" and "unit" in a.get("class", "")):
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


# --- parameter groups (app/param_groups.py) ---------------------------------------------------

GROUP_NAMES = {name: group for group, fields in GROUPS.items() for name in fields}
# Fields that share a group field's name but not its meaning, each with why (DESIGN principle
# 11 is kept everywhere else: a name of a group means the group's field).
NOT_THE_GROUPS = {
    ("tensor-parallel", "hidden"): "the worked example's width (DESIGN.md's /api/tensor-parallel)",
    ("tensor-parallel", "ffn"): "the worked example's MLP (DESIGN.md's /api/tensor-parallel)",
    ("tensor-parallel", "heads"): "the worked example's heads (DESIGN.md's /api/tensor-parallel)",
    ("tensor-parallel", "vocab"): "the worked example's vocabulary (/api/tensor-parallel)",
    ("context-parallel", "heads"): "the worked example's heads (/api/context-parallel)",
    ("context-parallel", "kv_heads"): "the worked example's heads (/api/context-parallel)",
    ("planner", "preset"): "dense and MoE presets (app.sim.moe.presets)",
    ("planner", "micro_batch"): "a pin of the search: empty searches it",
    **{("train", name): "the tiny model trained for real: sliders over what a CPU trains in "
                        "seconds (app.sim.train.params.TINY)"
       for name in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq")},
    ("train", "alpha_us"): "a calibrated constant of the machine that runs it (gloo on CPU: "
                           "60 µs), beside one link_gbs: not the two-link cluster of the group",
}


def reference_field(group: str, name: str, optional: bool):
    """The group's own definition of ``name`` (``| None`` where the scene lets it be empty), as
    a model field."""
    kind = GROUPS[group][name]
    return create_model("Reference", __base__=SceneParams,
                        value=(kind | None if optional else kind, ...)).model_fields["value"]


@pytest.mark.parametrize("scene", SCENES, ids=lambda s: s.slug)
def test_a_groups_name_is_the_groups_field(scene):
    """Every field named like a group's field is that field — the same type, range, label and
    help, only its default the scene's own — or a listed exception."""
    model = scene.params
    for name, field in model.model_fields.items():
        spec = control_spec(model, name)
        group = spec.group if spec is not None else ""
        if name not in GROUP_NAMES or (GROUP_NAMES[name] == "layout"
                                       and not takes_the_layout(model)):
            assert not group, f"{scene.slug}.{name} claims group {group!r}"
            continue
        if (scene.slug, name) in NOT_THE_GROUPS:
            assert group == "", f"{scene.slug}.{name} is listed as not the group's field"
            continue
        assert group == GROUP_NAMES[name], \
            f"{scene.slug}.{name}: not the {GROUP_NAMES[name]} group's field"
        ref = reference_field(group, name, optional=field.default is None)
        assert _unwrap(field) == _unwrap(ref), \
            f"{scene.slug}.{name}: a second range or Control beside the group's"
        assert field.description == ref.description, scene.slug + "." + name


def takes_the_layout(model) -> bool:
    """The layout is a group as a whole — its order names all five axes — so a scene takes all
    of it or none; one that asks for a size alone (/memory's t, /zero's N_d, the planner's pins)
    draws its own control over the shared type (app.params.Tp, Dp …)."""
    return set(GROUPS["layout"]) <= set(model.model_fields)


@pytest.mark.parametrize("scene", SCENES, ids=lambda s: s.slug)
def test_the_layout_is_taken_whole_or_not_at_all(scene):
    tagged = set(group_fields(scene.params, "layout"))
    assert tagged in (set(), set(GROUPS["layout"])), (scene.slug, tagged)
    if takes_the_layout(scene.params):
        assert tagged, f"{scene.slug} has tp … order of its own: take the layout group"


def test_the_layout_is_parallelism_and_train():
    assert [s.slug for s in SCENES if group_fields(s.params, "layout")] == \
        ["parallelism", "train"]


def test_the_exceptions_are_still_exceptions():
    for (slug, name), why in NOT_THE_GROUPS.items():
        scene = next(s for s in SCENES if s.slug == slug)
        assert name in scene.params.model_fields, (slug, name, why)


def test_every_scene_with_a_network_takes_the_whole_group_or_says_why():
    partial = {"parallelism": {"alpha_us"}, "planner": {"alpha_us"}}  # per-link latencies / none
    for scene in SCENES:
        have = set(group_fields(scene.params, "network"))
        if have:
            assert set(GROUPS["network"]) - have == partial.get(scene.slug, set()), scene.slug


# A group's field written out in a template: a field() call naming it, or a loop over names.
FIELD_CALL = re.compile(r"""\bfield\(\s*model\s*,\s*["'](\w+)["']""")
NAME_LOOP = re.compile(r"""\{%-?\s*for\s+\w+\s+in\s+[\[(]([^\])]*)[\])]""")


def listed_group_fields(source: str, model) -> list[str]:
    """The fields of ``model``'s groups that a template's source lists one by one."""
    named = FIELD_CALL.findall(source)
    for names in NAME_LOOP.findall(source):
        named += re.findall(r"""["'](\w+)["']""", names)
    return [n for n in named if n in model.model_fields
            and (spec := control_spec(model, n)) is not None and spec.group]


def test_the_pattern_finds_a_listed_group_field():
    from app.sim.memory.params import MemoryParams as M
    assert listed_group_fields('{{ field(model, "micro_batch", v.micro_batch) }}', M) == \
        ["micro_batch"]
    assert listed_group_fields('{% for n in ("layers", "hidden") %}{{ field(model, n, v[n]) }}'
                               '{% endfor %}', M) == ["layers", "hidden"]
    assert listed_group_fields('{{ field(model, "dp", v.dp) }}', M) == []
    assert listed_group_fields('{{ group(model, "model", v) }}', M) == []
    from app.sim.tensor_parallel.params import TensorParallelParams as T
    assert listed_group_fields('{{ field(model, "hidden", v.hidden) }}', T) == []   # its own


@pytest.mark.parametrize("scene", SCENES, ids=lambda s: s.slug)
def test_no_template_lists_a_groups_fields(scene):
    source = (TEMPLATES / Path(scene.template).name).read_text()
    assert listed_group_fields(source, scene.params) == [], \
        f"{scene.template} lists a group's fields one by one: use group(model, …)"


class Groups(HTMLParser):
    """The data-field names inside each data-group element of the controls form, in order, and
    the placeholders of its number fields."""

    def __init__(self):
        super().__init__()
        self.groups: dict[str, list[str]] = {}
        self.placeholders: dict[str, str] = {}
        self.folded: list[str] = []
        self._stack: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        group = a.get("data-group")
        if tag not in ("input", "option", "br", "img"):
            self._stack.append((tag, group))
        if group is not None:
            assert group not in self.groups, f"group {group} twice"
            self.groups[group] = []
        current = next((g for _, g in reversed(self._stack) if g), None)
        if current and "data-field" in a:
            self.groups[current].append(a["data-field"])
            if any(t == "details" for t, _ in self._stack):
                self.folded.append(a["data-field"])
        if tag == "input" and "placeholder" in a:
            self.placeholders[a["name"]] = a["placeholder"]

    def handle_endtag(self, tag):
        if tag in ("input", "option", "br", "img"):
            return
        while self._stack:
            if self._stack.pop()[0] == tag:
                break


@pytest.mark.parametrize("scene", SCENES, ids=lambda s: s.slug)
def test_a_page_lays_out_its_groups(client, scene):
    """Each group the model has is on the page once, with exactly its fields, in the group's
    order; a model shape's optional sizes are folded and show the preset's as placeholders."""
    page = client.get(f"/{scene.slug}").text
    parser = Groups()
    parser.feed(page)
    model = scene.params
    for group in GROUPS:
        fields = group_fields(model, group)
        if not fields:
            assert group not in parser.groups, f"/{scene.slug} shows an empty {group} group"
            continue
        shown = parser.groups.get(group)
        assert shown is not None, f"/{scene.slug} lays out no {group} group"
        if group == "model":       # the preset, the folded sizes, then the rest
            optional = [n for n in fields if n != "preset" and model.model_fields[n].default is None]
            required = [n for n in fields if n != "preset" and n not in optional]
            fields = ["preset"] * ("preset" in fields) + optional + required
            assert set(optional) <= set(parser.folded), scene.slug
            preset = model.model_fields["preset"].default if "preset" in model.model_fields \
                else None
            for n in optional:
                if preset in PRESET_SIZES:
                    assert parser.placeholders[n] == str(PRESET_SIZES[preset][n]), (scene.slug, n)
        assert [n for n in shown if n in model.model_fields and
                control_spec(model, n).group == group] == fields, f"/{scene.slug} {group}"


def test_choosing_a_preset_shows_its_sizes(client):
    """The preset's options carry every preset's sizes (data-fill), for the optional fields the
    page has — never a field the scene always asks for."""
    for slug, fields in [("memory", SHAPE_FIELDS), ("checkpointing", SHAPE_FIELDS),
                         ("tensor-parallel", ())]:
        page = client.get(f"/{slug}").text
        fills = dict(re.findall(r"""<option value="([\w.-]+)"[^>]*data-fill='([^']*)'""", page))
        if not fields:
            assert not fills, slug
            continue
        assert set(fills) == set(PRESET_SIZES), slug
        for preset, text in fills.items():
            assert json.loads(unescape(text)) == {f: PRESET_SIZES[preset][f] for f in fields}
