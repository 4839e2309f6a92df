"""Query parameters: one name, one range and one validator for each quantity (DESIGN principle 11).

Every scene's params model is a frozen pydantic model built from the field types below, so a
parameter that means the same thing in two scenes (``world``, ``dp``, ``tp``, ``hidden``,
``intra_node_gbs`` …) is declared once and a scenario can flow from scene to scene with the same
query string. Cross-field invariants live in each model's ``model_validator`` and raise
:class:`Invalid` naming the parameter and the numbers involved
(``count (10) must be divisible by world (4)``).

:func:`parse` turns a query string into a params object or a list of :class:`Problem`, each
with a message that names the parameter and its allowed range — the 422 body on ``/api`` and
the inline message on pages.
"""

from __future__ import annotations

import contextvars
import inspect
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import UnionType
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin
from urllib.parse import urlencode

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from app.catalog.gpus import GPUS
from app.catalog.models import PRESETS


@dataclass(frozen=True)
class Control:
    """How a field is shown on its scene's page (DESIGN principle 13): written once in the params
    model, as ``stages: Annotated[Pp, Control("Stages p", help="…")] = 4``, and read by the
    templates through :func:`control`.

    ``kind``: ``slider``, ``number`` (a typed field), ``log2`` (a slider over log₂ of the value:
    ``bounds`` and ``step`` are exponents) or ``values`` (a slider over the positions of
    ``values``). ``bounds`` is the control's (low, high) where it is narrower than the field's
    validation range; None takes the field's own ge/gt and le/lt. ``step`` is a number or "any".
    ``help`` is also the field's description (JSON schema) where its type gives none.

    ``choice`` is one of a few values, drawn as ``widget`` ``radios`` (chips) or ``select``;
    ``options`` are its values with their texts, ``{"ring": "Ring", "tree": "Tree"}`` (or a
    sequence of values shown as themselves, ``(1, 2, 4, 8)``), or None: the field's Literal
    values, shown as themselves. A page may pass a list computed at render time instead
    (``field(model, "preset", v.preset, options=presets)``), and extra attributes per option
    (``option_attrs={"tree": 'data-ops="all_reduce"'}``). ``flag`` is a bool drawn as a checkbox
    (a bool drawn as two chips is a ``choice`` with ``options={False: "off", True: "on"}``).
    ``text`` is a typed string; its ``options`` are suggestions (a datalist) and its maxlength
    is the field's max_length.

    ``group`` names the parameter group (app/param_groups.py) whose field this is: "model",
    "network", "gpu" or "layout"; the page lays the group out with ``group()`` (fields.html),
    never field by field. A scene's own fields leave it empty.
    """

    label: str
    help: str = ""
    unit: str = ""
    kind: Literal["slider", "number", "log2", "values", "choice", "flag", "text"] = "slider"
    bounds: tuple[float, float] | None = None
    step: float | str = 1
    values: tuple[int, ...] | None = None
    options: Any = None
    widget: Literal["radios", "select"] = "radios"
    group: str = ""

    def __post_init__(self):
        if (self.kind == "values") != (self.values is not None):
            raise ValueError(f"{self.label}: values go with kind='values' and only with it")
        if self.kind == "log2" and self.bounds is None:
            raise ValueError(f"{self.label}: a log2 slider needs its exponent bounds")
        if self.widget != "radios" and self.kind != "choice":
            raise ValueError(f"{self.label}: a widget goes with kind='choice'")
        if self.options is not None and self.kind not in ("choice", "text"):
            raise ValueError(f"{self.label}: options go with kind='choice' or 'text'")
        if self.options is not None:   # frozen and hashable: ((value, text), …)
            items = (self.options.items() if isinstance(self.options, Mapping)
                     else ((v, str(v)) for v in self.options))
            object.__setattr__(self, "options", tuple(items))


GROUP_ORDER: dict[str, tuple[str, ...]] = {}
"""Each parameter group's fields in the group's own order, filled by app/param_groups.py."""


def group_fields(model: type[BaseModel], group: str) -> list[str]:
    """The fields of ``model`` that belong to parameter group ``group``, in the group's order
    (GROUP_ORDER; the same in every scene): what ``group()`` in fields.html lays out."""
    names = [name for name in model.model_fields
             if (spec := control_spec(model, name)) is not None and spec.group == group]
    order = GROUP_ORDER.get(group, ())
    return sorted(names, key=lambda n: order.index(n) if n in order else len(order))


def control_spec(model: type[BaseModel], name: str) -> Control | None:
    """The :class:`Control` of ``model.name``, or None when the field has none."""
    return next((m for m in _unwrap(model.model_fields[name])[1] if isinstance(m, Control)),
                None)


def control(model: type[BaseModel], name: str) -> dict:
    """What a template needs to draw ``model.name``'s control: name, kind, label, help, unit,
    min, max, step and values (``log2``: min and max are exponents; ``values``: min and max are
    the first and last value); a ``choice``: widget, boolean, options [(value as the query
    carries it, text)] and listed (whether the model lists them or they are its Literal's). A field without a :class:`Control` is an error."""
    spec = control_spec(model, name)
    if spec is None:
        raise KeyError(f"{model.__name__}.{name} has no Control")
    return _control(model, name, spec)


def option_value(value: Any) -> str:
    """An option's value as the query string carries it: true/false, "" for None."""
    return "" if value is None else _query_value(value)


def _control(model: type[BaseModel], name: str, spec: Control) -> dict:
    if spec.kind == "text":
        longest = [m.max_length for m in _unwrap(model.model_fields[name])[1]
                   if getattr(m, "max_length", None) is not None]
        return {"name": name, "kind": "text", "label": spec.label, "help": spec.help,
                "options": [v for v, _ in spec.options or ()],
                "maxlength": longest[0] if longest else None}
    if spec.kind in ("choice", "flag"):
        annotation = _unwrap(model.model_fields[name])[0]
        options = spec.options
        if options is None and get_origin(annotation) is Literal:
            options = tuple((v, str(v)) for v in get_args(annotation))
        return {"name": name, "kind": spec.kind, "label": spec.label, "help": spec.help,
                "widget": spec.widget, "boolean": annotation is bool,
                "listed": spec.options is not None,
                "options": [(option_value(v), text) for v, text in options or ()]}
    if spec.values is not None:
        low, high = spec.values[0], spec.values[-1]
    elif spec.bounds is not None:
        low, high = spec.bounds
    else:
        (low, _), (high, _) = _bounds(model.model_fields[name])
    return {"name": name, "kind": spec.kind, "label": spec.label, "help": spec.help,
            "unit": spec.unit, "min": low, "max": high, "step": spec.step,
            "values": list(spec.values) if spec.values is not None else None}


@dataclass(frozen=True)
class Renamed:
    """Names a scene's query had before, and what they are called now: ``{old: new}``.

    A query is *old-style* when it carries a name that only the old scheme had (an old name that
    is no field now: MoE's ``cost_hidden``, context parallelism's ``context``); every name of
    such a query is read the old way (MoE's ``hidden`` was the token width, so it becomes
    ``token_width``). A query with no old-only name is read the new way, whatever it holds. A
    query that mixes an old-only name with a new-only one (``context`` with ``example_seq``)
    cannot be read either way: :class:`Invalid`, naming the old parameter.

    The params model translates an old-style query itself (:meth:`SceneParams._old_names`), so
    /api, the CLI and the real runs read old queries as they were meant; pages, embeds, /svg
    and /export answer them with a 308 to the new query (app/routes/renamed.py)."""

    names: Mapping[str, str]

    def old_only(self, model: type[BaseModel]) -> list[str]:
        return [old for old in self.names if old not in model.model_fields]

    def new_only(self) -> list[str]:
        return [new for new in self.names.values() if new not in self.names]

    def is_old(self, model: type[BaseModel], query: Mapping[str, Any]) -> bool:
        return any(old in query for old in self.old_only(model))

    def rename(self, model: type[BaseModel], pairs: Iterable[tuple[str, Any]]
               ) -> list[tuple[str, Any]]:
        """``pairs`` (an old-style query's) with every old name replaced by its new one; an
        :class:`Invalid` when they also hold a new-only name."""
        pairs = list(pairs)
        keys = {k for k, _ in pairs}
        mixed = [new for new in self.new_only() if new in keys]
        if mixed:
            old = next(o for o in self.old_only(model) if o in keys)
            moves = ", ".join(f"{a} → {b}" for a, b in self.names.items())
            raise Invalid(old, f"{old} is an old name ({moves}) and {mixed[0]} a new one: a "
                               f"query takes one or the other — write {self.names[old]} for "
                               f"{old}")
        return [(self.names.get(k, k), v) for k, v in pairs]


class SceneParams(BaseModel):
    """Base of every scene's parameters: frozen, NaN and ∞ refused, unknown keys ignored (a
    page URL may carry ``frame``). ``renamed``: the names its query had before
    (:class:`Renamed`), read the old way when a query uses them."""

    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False,
                              validate_default=True)
    renamed: ClassVar[Renamed | None] = None

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """A field whose type has no description takes its control's help text."""
        super().__pydantic_init_subclass__(**kwargs)
        changed = False
        for name, field in cls.model_fields.items():
            spec = control_spec(cls, name)
            if field.description is None and spec is not None and spec.help:
                field.description = spec.help
                changed = True
        if changed:
            cls.model_rebuild(force=True)

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        """An old-style query (:attr:`renamed`) read with its old meaning."""
        if cls.renamed is not None and isinstance(data, Mapping) and cls.renamed.is_old(cls, data):
            return dict(cls.renamed.rename(cls, data.items()))
        return data

    def query(self, **overrides: Any) -> str:
        """The canonical query string of these params: every field that is set — the scene's
        own fields in declaration order, then those of its parameter groups
        (app/param_groups.py), group by group in each group's order; an optional field left at
        None is left out."""
        values = {**self.model_dump(), **overrides}
        return urlencode({k: _query_value(values[k]) for k in _query_order(type(self))
                          if values.get(k) is not None})


@lru_cache(maxsize=None)
def _query_order(model: type[SceneParams]) -> tuple[str, ...]:
    """The scene's own fields in declaration order, then each group's (GROUP_ORDER) in the
    group's order."""
    own = [n for n in model.model_fields
           if (spec := control_spec(model, n)) is None or not spec.group]
    return (*own, *(n for group in GROUP_ORDER for n in group_fields(model, group)))


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class Invalid(ValueError):
    """A cross-field invariant failed: ``param`` is the parameter to change."""

    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param
        self.message = message


def nearby_multiples(value: int, divisor: int, most: int | None = None) -> str:
    """The multiples of ``divisor`` either side of ``value``, for a message's "try …": "8 or
    16"; one when the other is 0 or above ``most``."""
    down = value // divisor * divisor
    up = down + divisor
    options = [v for v in (down, up) if v > 0 and (most is None or v <= most)]
    return " or ".join(map(str, options or [divisor]))


_SUGGESTING = contextvars.ContextVar("suggesting", default=False)


def suggest(model: BaseModel, name: str, candidates: Iterable[int], count: int = 2) -> str:
    """" — try {name} a or b" for a 422 message: the first ``count`` of ``candidates`` (nearest
    first) that pass every check of ``model``'s class when put in place of ``name``, so that no
    suggestion is refused in turn; "" when none does. Called from a model validator; while it
    checks a candidate, the validators it re-runs suggest nothing (no recursion)."""
    if _SUGGESTING.get():
        return ""
    token = _SUGGESTING.set(True)
    try:
        base, ok = model.model_dump(), []
        for value in list(dict.fromkeys(candidates))[:32]:   # bounded work
            try:
                type(model).model_validate({**base, name: value})
            except ValidationError:
                continue
            ok.append(value)
            if len(ok) == count:
                break
    finally:
        _SUGGESTING.reset(token)
    return f" — try {name} {' or '.join(map(str, sorted(ok)))}" if ok else ""


def multiples_near(value: int, divisor: int, most: int | None = None,
                   tries: int = 16) -> Iterator[int]:
    """Positive multiples of ``divisor`` (≤ ``most``), nearest ``value`` first: the candidates of
    :func:`suggest` for "must be divisible by"."""
    down = value // divisor * divisor
    for i in range(tries):
        for v in (down - i * divisor, down + (i + 1) * divisor):
            if v > 0 and (most is None or v <= most):
                yield v


def divisors_near(n: int, k: int, low: int = 1) -> list[int]:
    """Divisors of ``n`` (≥ ``low``), nearest ``k`` first: the candidates of :func:`suggest`
    for "must divide"."""
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    every = {*small, *(n // d for d in small)}
    return sorted((d for d in every if d >= low), key=lambda d: (abs(d - k), d))


@dataclass(frozen=True)
class Problem:
    param: str
    message: str

    def to_dict(self) -> dict:
        return {"param": self.param, "message": self.message}


class ParamsError(Exception):
    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems

    def to_dict(self) -> dict:
        return {"detail": [p.to_dict() for p in self.problems], "message": str(self)}


# --- shared field types ---------------------------------------------------------------------
# Ranges are generous enough for real models and clusters and tight enough to bound the work.

Seed = Annotated[int, Field(ge=0, le=2**31 - 1, description="seed of the random inputs")]
World = Annotated[int, Field(ge=2, le=64, description="number of ranks in the group")]
Rank = Annotated[int, Field(ge=0, le=63, description="a rank id")]
Dtype = Literal["fp32", "bf16", "fp16", "fp8"]
DTYPE_TEXTS = {"fp32": "fp32 (4 bytes)", "bf16": "bf16 (2 bytes)", "fp16": "fp16 (2 bytes)",
               "fp8": "fp8 (1 byte)"}
"""A dtype's option text on the pages."""

AlphaUs = Annotated[float, Field(ge=0, le=1000, description="latency per message, µs")]
IntraNodeGBs = Annotated[float, Field(ge=0.1, le=10000,
                                      description="link bandwidth inside a node (NVLink), GB/s")]
InterNodeGBs = Annotated[float, Field(ge=0.1, le=10000,
                                      description="link bandwidth between nodes (InfiniBand), GB/s")]
GpusPerNode = Annotated[int, Field(ge=1, le=64, description="GPUs in each node")]
SizeBytes = Annotated[int, Field(ge=1, le=2**36, description="a message size in bytes")]
GpuTflops = Annotated[float, Field(ge=1, le=100000,
                                   description="sustained matmul throughput of one GPU, TFLOP/s")]

# Model and parallelism sizes shared by the later chapters.
Dp = Annotated[int, Field(ge=1, le=1024, description="data-parallel size")]
Tp = Annotated[int, Field(ge=1, le=64, description="tensor-parallel size")]
Pp = Annotated[int, Field(ge=1, le=64, description="pipeline-parallel size (stages)")]
Cp = Annotated[int, Field(ge=1, le=64, description="context-parallel size (splits the sequence)")]
Ep = Annotated[int, Field(ge=1, le=256, description="expert-parallel size (carved out of dp·cp)")]
Order = Annotated[str, Field(min_length=14, max_length=14, pattern=r"^[a-z]{2}(-[a-z]{2}){4}$",
                             description="the five axes tp, cp, ep, dp, pp joined by '-', "
                                         "fastest-varying first")]
Layers = Annotated[int, Field(ge=1, le=512, description="transformer layers")]
Tokens = Annotated[int, Field(ge=1, le=65536,
                              description="tokens in a batch (the rows of an activation matrix)")]
Hidden = Annotated[int, Field(ge=1, le=131072, description="hidden size h")]
Heads = Annotated[int, Field(ge=1, le=512, description="attention heads a")]
Ffn = Annotated[int, Field(ge=1, le=524288, description="MLP inner size")]
Vocab = Annotated[int, Field(ge=1, le=1048576, description="vocabulary size V")]
Seq = Annotated[int, Field(ge=1, le=1048576, description="sequence length s")]
MicroBatch = Annotated[int, Field(ge=1, le=4096, description="micro-batch size b")]
Microbatches = Annotated[int, Field(ge=1, le=1024,
                                    description="micro-batches per training step (m)")]
Chunks = Annotated[int, Field(ge=1, le=8, description="model chunks per pipeline rank (v)")]

# Training set-up shared by the memory ledger, optimizers, ZeRO, precision and checkpointing
# (chapters 1, 3, 5 and 8). Optimizer names are app.sim.memory.model_states.OPTIMIZERS; a scene that
# animates fewer of them says which in an Invalid("optimizer", …).
ModelPreset = Literal[tuple(PRESETS)]  # gpt2, gpt3-175b, llama3-8b, llama3-70b, llama3-405b
KvHeads = Annotated[int, Field(ge=1, le=512,
                               description="key/value heads (grouped-query attention)")]
ParamCount = Annotated[int, Field(ge=1, le=10**15, description="parameters Ψ")]
ZeroStage = Annotated[int, Field(ge=0, le=3, description="ZeRO stage")]
Recompute = Literal["none", "selective", "full"]
Optimizer = Literal["sgd", "momentum", "adam", "adamw", "adafactor", "adam8bit"]
Precision = Literal["fp32", "mixed"]          # mixed: 16-bit params and grads, fp32 master/states
GpuModel = Literal[tuple(GPUS)]  # a100-40, a100-80, h100-80, h200-141, mi300x-192
Steps = Annotated[int, Field(ge=1, le=64, description="optimizer steps")]
LearningRate = Annotated[float, Field(gt=0, le=10, description="learning rate")]
WeightDecay = Annotated[float, Field(ge=0, le=1, description="weight-decay coefficient λ")]
GradAccum = Annotated[int, Field(ge=1, le=1024,
                                 description="gradient-accumulation steps (micro-batches per "
                                             "optimizer step)")]
# Data parallelism and ZeRO (chapters 4 and 5).
Offload = Literal["none", "cpu", "nvme"]
PcieGBs = Annotated[float, Field(ge=0.1, le=1000,
                                 description="host ↔ GPU bandwidth per GPU (PCIe), GB/s")]
NvmeGBs = Annotated[float, Field(ge=0.1, le=1000,
                                 description="NVMe ↔ host bandwidth per GPU, GB/s")]
CpuMemGBs = Annotated[float, Field(ge=0.1, le=10000,
                                   description="host memory bandwidth per GPU's process, GB/s")]
BucketMb = Annotated[float, Field(gt=0, le=4096,
                                  description="DDP gradient bucket size (bucket_cap_mb), MiB")]
TrainSteps = Annotated[int, Field(ge=1, le=10, description="training steps of the tiny model")]
MlpLayers = Annotated[int, Field(ge=1, le=6, description="layers of the tiny MLP trained for real")]
MlpWidth = Annotated[int, Field(ge=1, le=8, description="width of the tiny MLP trained for real")]


# --- parsing with messages ------------------------------------------------------------------

def parse(model: type[SceneParams], query: Mapping[str, str]) -> SceneParams:
    """``model`` from a query mapping, or :class:`ParamsError` with one message per problem."""
    try:
        return model.model_validate(dict(query))
    except ValidationError as error:
        raise ParamsError(problems(model, error, query)) from None


def problems(model: type[SceneParams], error: ValidationError,
             query: Mapping[str, str]) -> list[Problem]:
    out: list[Problem] = []
    for item in error.errors():
        cause = (item.get("ctx") or {}).get("error")
        if isinstance(cause, Invalid):
            out.append(Problem(cause.param, cause.message))
            continue
        name = str(item["loc"][0]) if item["loc"] else "query"
        got = query.get(name, item.get("input"))
        allowed = describe(model, name)
        out.append(Problem(name, f"{name} must be {allowed} (got {got!r})"))
    return out


def describe(model: type[SceneParams], name: str) -> str:
    """The allowed values of ``model.name`` in words: "an integer from 2 to 64"."""
    field = model.model_fields.get(name)
    if field is None:
        return "a known parameter"
    annotation, _ = _unwrap(field)
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(str(v) for v in get_args(annotation))
    if annotation is bool:
        return "true or false"
    (low, strict_low), (high, strict_high) = _bounds(field)
    kind = "an integer" if annotation is int else "a number"
    if low is not None and high is not None:
        if strict_low or strict_high:
            return f"{kind} in {'(' if strict_low else '['}{low}, {high}{')' if strict_high else ']'}"
        return f"{kind} from {low} to {high}"
    if low is not None:
        return f"{kind} {'>' if strict_low else '≥'} {low}"
    if high is not None:
        return f"{kind} {'<' if strict_high else '≤'} {high}"
    return kind


FIELD_COMMENT = re.compile(r"^    (\w+): [^#\n]*#\s*(.+)$", re.M)
COMMENT_ABOVE = re.compile(r"^    #\s*(.+)\n    (\w+):", re.M)


@lru_cache(maxsize=None)
def field_comments(model: type[SceneParams]) -> dict[str, str]:
    """The comment of each field in the model's source — after its default, or on the line
    above a field too long for one (every field has one: DESIGN principle 5) — the models'
    bases included."""
    out: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if isinstance(cls, type) and issubclass(cls, SceneParams):
            try:
                source = inspect.getsource(cls)
                out.update((name, text) for text, name in COMMENT_ABOVE.findall(source))
                out.update(FIELD_COMMENT.findall(source))
            except (OSError, TypeError):
                pass
    return out


def field_type(model: type[SceneParams], name: str) -> Any:
    """The type of ``model.name``, looking inside ``X | None``: int, float, bool, str or a
    Literal (for a command line's ``type`` and ``choices``)."""
    return _unwrap(model.model_fields[name])[0]


def check_field(model: type[SceneParams], name: str, value: Any) -> Any:
    """``value`` validated as ``model.name`` on its own (its type and range, not the model's
    cross-field invariants); ValueError, with :func:`describe`'s words, when it is not one."""
    try:
        return _adapter(model, name).validate_python(value)
    except ValidationError:
        raise ValueError(f"{name} must be {describe(model, name)} (got {value!r})") from None


@lru_cache(maxsize=None)
def _adapter(model: type[SceneParams], name: str) -> TypeAdapter:
    annotation, metadata = _unwrap(model.model_fields[name])
    return TypeAdapter(Annotated[(annotation, *metadata)] if metadata else annotation)


def _unwrap(field) -> tuple[Any, list]:
    """(type, constraints) of a field, looking inside ``X | None`` where X is Annotated."""
    annotation, metadata = field.annotation, list(field.metadata)
    if get_origin(annotation) in (Union, UnionType):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        if len(inner) == 1:
            annotation = inner[0]
            if get_origin(annotation) is Annotated:
                annotation, *extra = get_args(annotation)
                for meta in extra:
                    metadata += getattr(meta, "metadata", [meta])
    return annotation, metadata


def _bounds(field) -> tuple[tuple[Any, bool], tuple[Any, bool]]:
    """((low, strict), (high, strict)) from a field's ge/gt/le/lt constraints."""
    low = high = (None, False)
    for meta in _unwrap(field)[1]:
        for attr, strict, is_low in (("ge", False, True), ("gt", True, True),
                                     ("le", False, False), ("lt", True, False)):
            value = getattr(meta, attr, None)
            if value is not None:
                if is_low:
                    low = (value, strict)
                else:
                    high = (value, strict)
    return low, high
