"""A lecturer's problem sheet: ``n`` problems of one chapter from one seed, and its answer key.

Problem i of a sheet is the chapter's template i mod T (T templates, in the bank's order) with
seed ``seed + i // T``: the first pass through the chapter uses the sheet's seed, a longer
sheet takes the next seeds. So (chapter, seed, n) fix every problem, and a sheet printed today is
the same sheet next year (app/exercises/draw.py); every problem carries its permalink,
``/exercises/<id>?seed=<s>``, where a student checks an answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.course import chapter as course_chapter
from app.exercises.check import expected_text, problem
from app.exercises.draw import GENERATOR_VERSION, MAX_SEED
from app.exercises.model import BANK, Template
from app.exercises.units import AnswerError, PROBLEM_UNITS

MAX_PROBLEMS = 40
DEFAULT_PROBLEMS = 8


@dataclass(frozen=True)
class SheetProblem:
    number: int
    template: Template
    seed: int
    body: dict
    """app.exercises.check.problem's JSON"""

    @property
    def permalink(self) -> str:
        return f"/exercises/{self.template.id}?seed={self.seed}"

    def answer(self) -> tuple[str, list]:
        """(the answer as text, the worked steps as dicts) — for the key only."""
        worked = self.template.solve(self.body["given"])
        return (expected_text(self.template, worked.answer),
                [s.to_dict() for s in worked.steps])

    @property
    def unit_text(self) -> str:
        t = self.template
        if t.kind == "choice":
            return "one of: " + ", ".join(self.body["choices"])
        if t.kind == "coords":
            return "coordinates " + ", ".join(f"{k} = …" for k in t.keys)
        if t.kind == "ranks":
            return "a list of ranks"
        unit = t.unit or "a plain number"
        quantity = PROBLEM_UNITS[t.unit].quantity.name
        return f"{unit}" + (f" ({quantity})" if quantity not in (unit, "a ratio") else "") + (
            ", exactly" if t.kind == "integer" else ", within 1 %")


@dataclass(frozen=True)
class Sheet:
    chapter: int
    title: str
    seed: int
    problems: tuple[SheetProblem, ...]
    version: int = GENERATOR_VERSION

    @property
    def query(self) -> str:
        return f"seed={self.seed}&n={len(self.problems)}"


def chapter_number(text: str) -> int | None:
    """"5" → 5 when chapter 5 has problems; None otherwise."""
    if not text.isdigit():
        return None
    number = int(text)
    return number if BANK.chapter(number) else None


def parse_count(raw: str | None) -> int:
    if raw is None or raw == "":
        return DEFAULT_PROBLEMS
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PROBLEMS:
        raise AnswerError(f"n must be an integer from 1 to {MAX_PROBLEMS} (got {raw!r})", "n")
    return int(raw)


def sheet(chapter: int, seed: int, n: int) -> Sheet:
    templates = BANK.chapter(chapter)
    out = []
    for i in range(n):
        t = templates[i % len(templates)]
        s = min(MAX_SEED, seed + i // len(templates))
        out.append(SheetProblem(i + 1, t, s, problem(t, s)))
    return Sheet(chapter, course_chapter(chapter).title, seed, tuple(out))
