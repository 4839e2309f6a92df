"""What a problem template is, and what solving one gives.

A :class:`Template` is one kind of problem (``zero-model-states``): its chapter and scene, the
kind and unit of its answer, and three functions — ``draw`` (a :class:`~app.exercises.draw.Draw`
→ the givens), ``prompt`` (givens → the question in words) and ``solve`` (givens → a
:class:`Worked` solution). ``solve`` computes the answer by calling the simulation or formula
objects the scene itself uses, never a second copy of a formula; its steps say, for each
intermediate value, the formula, the numbers put in and the value, and its mistakes are the
values the classic wrong turns give, each with the hint that points at the step that went wrong.

Templates are declared with :func:`exercise` on a class that holds the functions as a namespace
(plain functions of the givens: no ``self``, no ``@staticmethod``); a ``draw`` or ``scene`` that
several problems share is given to :func:`exercise` once instead. The registry :data:`BANK`
keeps them in course order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from app.exercises.draw import GENERATOR_VERSION, Draw
from app.params import option_value
from app.exercises.units import PROBLEM_UNITS, amount, num

KINDS = ("number", "integer", "choice", "coords", "ranks")
"""number: within 1 % relative; integer, coords, ranks and choice: exactly."""
RELATIVE_TOLERANCE = 0.01


@dataclass(frozen=True)
class Step:
    """One line of a worked solution: what it finds, the formula, the numbers put in, the
    value (in ``unit``, a key of app.exercises.units.PROBLEM_UNITS or free text)."""

    step: str
    formula: str
    numbers: str
    value: Any
    unit: str = ""

    def shown(self) -> str:
        if self.unit in PROBLEM_UNITS and isinstance(self.value, (int, float)):
            return amount(self.value, self.unit)
        if isinstance(self.value, float):
            return f"{num(self.value, 4)} {self.unit}".strip()
        return f"{self.value} {self.unit}".strip()

    def line(self) -> str:
        """"Fp16 gradients: 2Ψ = 2 × 7.5×10⁹ = 15 GB": the step as a sheet prints it."""
        shown = self.shown()
        parts = [self.formula]
        if self.numbers and self.numbers not in (self.formula, shown, str(self.value)):
            parts.append(self.numbers)
        if shown not in parts:
            parts.append(shown)
        return f"{self.step}: " + " = ".join(p for p in parts if p)

    def to_dict(self) -> dict:
        return {"step": self.step, "formula": self.formula, "numbers": self.numbers,
                "value": self.value, "unit": self.unit, "shown": self.shown(),
                "line": self.line()}


@dataclass(frozen=True)
class Mistake:
    """A wrong turn: the answer it gives and the hint for it (which never states the answer)."""

    value: Any
    hint: str


@dataclass(frozen=True)
class Worked:
    answer: Any
    steps: tuple[Step, ...]
    mistakes: tuple[Mistake, ...] = ()


@dataclass(frozen=True)
class Template:
    id: str
    chapter: int
    scene: str
    """the slug of the scene whose simulation computes it"""
    title: str
    kind: str
    unit: str
    source: str
    """where the formula comes from (paper, table, code)"""
    ranges: dict[str, Any]
    """each given's range: (low, high) or a tuple of allowed values (held by the tests)"""
    draw: Callable[[Draw], dict]
    prompt: Callable[[dict], str]
    solve: Callable[[dict], Worked]
    scene_query: Callable[[dict], dict]
    choices: Callable[[dict], tuple[str, ...]] | None = None
    keys: tuple[str, ...] = ()
    """coords: the coordinates asked for, in order"""
    scene_hides: tuple[str, ...] = ()
    """scene parameters that would give the answer away: left out of the problem's link, put
    back in the solution's"""

    def given(self, seed: int, version: int = GENERATOR_VERSION) -> dict:
        return self.draw(Draw(self.id, seed, version))

    def scene_url(self, given: dict, solved: bool = False) -> str:
        query = {k: option_value(v) for k, v in self.scene_query(given).items()
                 if v is not None and (solved or k not in self.scene_hides)}
        return f"/{self.scene}" + (f"?{urlencode(query)}" if query else "")


@dataclass
class Bank:
    templates: dict[str, Template] = field(default_factory=dict)

    def add(self, template: Template) -> Template:
        if template.id in self.templates:
            raise ValueError(f"two templates named {template.id!r}")
        if template.kind not in KINDS:
            raise ValueError(f"{template.id}: kind {template.kind!r} is not one of {KINDS}")
        if template.kind in ("number", "integer") and template.unit not in PROBLEM_UNITS:
            raise ValueError(f"{template.id}: unit {template.unit!r} is not a problem unit")
        self.templates[template.id] = template
        return template

    def chapter(self, number: int) -> list[Template]:
        return [t for t in self.templates.values() if t.chapter == number]


BANK = Bank()
"""Every template, in the order the chapter modules declare them."""


def exercise(id: str, *, chapter: int, scene: str, title: str, kind: str, unit: str = "",
             source: str, ranges: dict[str, Any], keys: tuple[str, ...] = (),
             scene_hides: tuple[str, ...] = (), draw: Callable[[Draw], dict] | None = None,
             query: Callable[[dict], dict] | None = None):
    """Declare a template from a class holding its functions — ``draw`` (a Draw → the givens),
    ``prompt`` (givens → the question), ``solve`` (givens → :class:`Worked`), ``scene`` (givens
    → the scene's query) and, for a choice, ``choices`` — written as plain functions of their
    argument (the class is only their namespace). ``draw`` and ``query`` here are a draw and a
    scene query that several of a chapter's problems share, in place of the class's own."""

    def register(cls):
        def one(name: str, shared: Callable | None) -> Callable:
            own = getattr(cls, name, None)
            if (own is None) == (shared is None):
                raise TypeError(f"{id}: {name} must come from the class or from exercise(), "
                                f"once")
            return own or shared

        BANK.add(Template(id, chapter, scene, title, kind, unit, source, ranges,
                          one("draw", draw), cls.prompt, cls.solve, one("scene", query),
                          getattr(cls, "choices", None), keys, scene_hides))
        return cls

    return register
