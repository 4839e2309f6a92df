"""Checking an answer on the server, and the hint for a wrong one.

``problem(template, seed)`` is what ``GET /api/exercises/{id}?seed=S`` answers — never the
answer. ``check(template, seed, answer, reveal)`` is the body of ``POST …/check``:

* a number is right within 1 % relative (:data:`RELATIVE_TOLERANCE`), an integer, a choice, a
  set of coordinates or a rank list exactly;
* a wrong answer gets a hint, tried in this order: one of the template's named mistakes (the 2
  of ring all-reduce, the fp32 master copy, (N−1)/N dropped …); the value of an intermediate
  step (stopped one step early); a factor that gives the slip away (GB vs GiB, a prefix, %,
  bits, a stray 2); else how far off it is and the first step to recompute. A hint never
  states the answer;
* ``expected``, ``tolerance`` and the worked ``solution`` come only with a right answer or
  ``reveal``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from app.exercises.draw import GENERATOR_VERSION
from app.exercises.model import BANK, RELATIVE_TOLERANCE, Template, Worked
from app.exercises.units import PROBLEM_UNITS, AnswerError, amount, convert


def problem(template: Template, seed: int) -> dict:
    """The contract's problem: id, seed, chapter, prompt, given, unit, kind, choices?,
    scene_url — and never the answer (the template's source, whose text may quote a published
    value, comes with the solution)."""
    given = template.given(seed)
    body = {"id": template.id, "seed": seed, "version": GENERATOR_VERSION,
            "chapter": template.chapter, "scene": template.scene, "title": template.title,
            "prompt": template.prompt(given), "given": given, "unit": template.unit,
            "kind": template.kind, "scene_url": template.scene_url(given)}
    if template.kind == "choice":
        body["choices"] = list(template.choices(given))
    if template.kind == "coords":
        body["keys"] = list(template.keys)
    return body


@lru_cache(maxsize=4096)
def _solved(template_id: str, seed: int) -> tuple[dict, Worked]:
    """(givens, worked solution) of a problem: pure functions of (id, seed), kept."""
    template = BANK.templates[template_id]
    given = template.given(seed)
    return given, template.solve(given)


def check(template: Template, seed: int, answer: Any, reveal: bool = False) -> dict:
    if BANK.templates.get(template.id) is template:
        given, worked = _solved(template.id, seed)
    else:                                   # a template outside the bank (tests)
        given = template.given(seed)
        worked = template.solve(given)
    reader = {"number": _number, "integer": _integer, "choice": _choice, "coords": _coords,
              "ranks": _ranks}[template.kind]
    if answer is None and reveal:
        correct, understood, hint = False, "no answer given", None
    else:
        correct, understood, hint = reader(template, given, worked, answer)
    out: dict[str, Any] = {"correct": correct, "unit_understood": understood}
    if not correct and hint:
        out["hint"] = hint
    if correct or reveal:
        out["expected"] = worked.answer
        out["expected_text"] = expected_text(template, worked.answer)
        out["tolerance"] = RELATIVE_TOLERANCE if template.kind == "number" else 0
        out["tolerance_text"] = ("within 1 % (relative)" if template.kind == "number"
                                 else "exactly")
        out["solution"] = [s.to_dict() for s in worked.steps]
        out["scene_url"] = template.scene_url(given, solved=True)
        out["source"] = template.source
    return out


def expected_text(template: Template, answer: Any) -> str:
    if template.kind == "coords":
        return ", ".join(f"{k} = {answer[k]}" for k in template.keys)
    if template.kind == "ranks":
        return "[" + ", ".join(map(str, answer)) + "]"
    if template.kind == "choice":
        return str(answer)
    return amount(answer, template.unit)


# --- numbers ----------------------------------------------------------------------------------

def close(a: float, b: float, rel: float = RELATIVE_TOLERANCE) -> bool:
    return abs(a - b) <= rel * abs(b) if b != 0 else abs(a) <= 1e-12


def _number(template: Template, given: dict, worked: Worked, answer: Any):
    value, understood = convert(answer, PROBLEM_UNITS[template.unit])
    expected = float(worked.answer)
    if close(value, expected):
        return True, understood, None
    return False, understood, number_hint(template, worked, value)


def _integer(template: Template, given: dict, worked: Worked, answer: Any):
    value, understood = convert(answer, PROBLEM_UNITS[template.unit])
    if abs(value - round(value)) <= 1e-9 * max(1.0, abs(value)) and round(value) == worked.answer:
        return True, understood, None
    if abs(value - round(value)) > 1e-9 * max(1.0, abs(value)):
        return False, understood, ("The answer is a whole number of "
                                   f"{template.unit or 'units'}: "
                                   + (number_hint(template, worked, value) or "")).strip()
    return False, understood, number_hint(template, worked, value, exact=True)


def number_hint(template: Template, worked: Worked, value: float, exact: bool = False) -> str:
    expected = float(worked.answer)
    same = (lambda a, b: a == b) if exact else close
    for mistake in worked.mistakes:
        if isinstance(mistake.value, (int, float)) and not close(float(mistake.value), expected,
                                                                 2 * RELATIVE_TOLERANCE):
            if same(value, float(mistake.value)):
                return mistake.hint
    last = len(worked.steps) - 1
    for k, step in enumerate(worked.steps[:-1]):
        if (isinstance(step.value, (int, float)) and step.unit == template.unit
                and not close(float(step.value), expected, 2 * RELATIVE_TOLERANCE)
                and same(value, float(step.value))):
            ahead = worked.steps[k + 1].step
            return (f"That is the value of step {k + 1} of {last + 1} (“{step.step}”): "
                    f"keep going — next, {_lower(ahead)}.")
    if expected == 0 or value == 0:
        return "Recompute from the first step: " + _first(worked)
    ratio = value / expected
    for factor, hint in _FACTOR_HINTS:
        for r, word in ((factor, "high"), (1 / factor, "low")):
            if close(ratio, r, 0.012):
                return hint.replace("{dir}", word)
    if ratio < 0:
        return "The sign is wrong: recheck which way it goes. " + _first(worked)
    # how far off, in coarse words only: an exact percentage would give the answer away
    word = "high" if ratio > 1 else "low"
    spread = max(ratio, 1 / ratio)
    if spread < 1.1:
        return (f"Close, but not within 1 % (a little too {word}): recheck the arithmetic — "
                f"was an intermediate value rounded too early? " + _first(worked))
    if spread < 2:
        return f"Too {word}, but within a factor of 2. Recheck each step: {_first(worked)}"
    if spread < 10:
        return f"Too {word} by more than a factor of 2. Start again from: {_first(worked)}"
    return (f"Too {word} by more than a factor of 10 — check the units and the formula. "
            f"Start from: {_first(worked)}")


def _first(worked: Worked) -> str:
    step = worked.steps[0]
    return f"{_lower(step.step)} ({step.formula})."


def _lower(text: str) -> str:
    """"The bubble" → "the bubble", but "FLOPs per token" stays."""
    return text[0].lower() + text[1:] if text[1:2].islower() else text


_FACTOR_HINTS = (
    (2**30 / 1e9, "Too {dir} by 2³⁰/10⁹ ≈ 1.074: GB (10⁹ bytes) and GiB (2³⁰ bytes) are "
                  "mixed up. Convert once, at the end."),
    (2**20 / 1e6, "Too {dir} by 2²⁰/10⁶ ≈ 1.049: MB (10⁶) and MiB (2²⁰) are mixed up."),
    (2**40 / 1e12, "Too {dir} by 2⁴⁰/10¹² ≈ 1.1: TB and TiB are mixed up."),
    (1e3, "Too {dir} by exactly 1000: check the unit prefix (k, M, G, or ms and s, µs and ms)."),
    (1e6, "Too {dir} by 10⁶: check the unit prefixes (M and no prefix, or µs and s)."),
    (1e9, "Too {dir} by 10⁹: check the unit (GB/s, 10⁹ bytes per second; GB, 10⁹ bytes)."),
    (1e12, "Too {dir} by 10¹²: TFLOP/s are 10¹² FLOP per second."),
    (100, "Too {dir} by 100: a fraction is 0.25, or write it as \"25 %\"."),
    (8, "Too {dir} by 8: bits and bytes are mixed up (1 byte = 8 bits; Gb/s ÷ 8 = GB/s)."),
    (2, "Off by exactly a factor of 2: which step counts something twice, or should?"),
    (4, "Off by exactly a factor of 4: check the bytes per element (2 for 16-bit, 4 for fp32) "
        "and anything counted twice."),
)


# --- exact kinds ------------------------------------------------------------------------------

def _choice(template: Template, given: dict, worked: Worked, answer: Any):
    options = template.choices(given)
    if not isinstance(answer, str):
        raise AnswerError(f"answer must be one of {', '.join(options)} (a string); got "
                          f"{answer!r}")
    picked = next((o for o in options if o.lower() == answer.strip().lower()), None)
    if picked is None:
        raise AnswerError(f"answer must be one of {', '.join(options)}; got {answer!r}")
    if picked == worked.answer:
        return True, f"the choice {picked}", None
    hint = next((m.hint for m in worked.mistakes if m.value == picked), None)
    return False, f"the choice {picked}", hint or ("Not this one. " + _first(worked))


def _coords(template: Template, given: dict, worked: Worked, answer: Any):
    keys = template.keys
    values = read_coords(answer, keys)
    if values == worked.answer:
        return True, "coordinates " + ", ".join(f"{k} = {values[k]}" for k in keys), None
    for mistake in worked.mistakes:
        if mistake.value == values:
            return False, "coordinates", mistake.hint
    right = [k for k in keys if values[k] == worked.answer[k]]
    wrong = [k for k in keys if values[k] != worked.answer[k]]
    said = ("coordinates " + ", ".join(f"{k} = {values[k]}" for k in keys))
    # point at the step that computes the first wrong coordinate, where there is one
    step = next((s for s in worked.steps if s.step.startswith(f"{wrong[0]}:")
                 or s.step.lower().startswith(wrong[0].lower())), worked.steps[0])
    where = f"Recheck {_lower(step.step)} ({step.formula})."
    return False, said, (f"{_list(right)} {'is' if len(right) == 1 else 'are'} right; "
                         f"{_list(wrong)} {'is' if len(wrong) == 1 else 'are'} not. "
                         if right else f"None of {_list(wrong)} is right. ") + where


def _list(words: list[str]) -> str:
    return ", ".join(words[:-1]) + (" and " if len(words) > 1 else "") + words[-1]


def read_coords(answer: Any, keys: tuple[str, ...]) -> dict[str, int]:
    fields = ", ".join(f'"{k}": …' for k in keys)
    example = ", ".join(f"{k}=…" for k in keys)
    accepted = (f"an object {{{fields}}}, a list of {len(keys)} integers in the order "
                f"{', '.join(keys)}, or a string such as \"{example}\"")
    if isinstance(answer, str):
        pairs = re.findall(r"([a-z_]+)\s*[=:]?\s*(-?\d+)", answer.lower())
        if pairs and all(k in keys for k, _ in pairs):
            answer = {k: int(v) for k, v in pairs}
        else:
            numbers = re.findall(r"-?\d+", answer)
            if len(numbers) != len(keys):
                raise AnswerError(f"answer must be {accepted}; got {answer!r}")
            answer = [int(n) for n in numbers]
    if isinstance(answer, (list, tuple)):
        if len(answer) != len(keys):
            raise AnswerError(f"answer must be {accepted}; got {len(answer)} values")
        answer = dict(zip(keys, answer))
    if not isinstance(answer, dict):
        raise AnswerError(f"answer must be {accepted}")
    missing = [k for k in keys if k not in answer]
    if missing:
        raise AnswerError(f"answer lacks {', '.join(missing)}: it must be {accepted}")
    out = {}
    for k in keys:
        v = answer[k]
        if isinstance(v, str) and re.fullmatch(r"\s*-?\d+\s*", v):
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or float(v) != int(v):
            raise AnswerError(f"answer: {k} must be an integer; got {v!r}")
        out[k] = int(v)
    return out


def _ranks(template: Template, given: dict, worked: Worked, answer: Any):
    ranks = read_ranks(answer)
    expected = sorted(worked.answer)
    said = "ranks " + ", ".join(map(str, sorted(ranks)))
    if sorted(ranks) == expected:
        return True, said, None
    for mistake in worked.mistakes:
        if sorted(mistake.value) == sorted(ranks):
            return False, said, mistake.hint
    if len(ranks) != len(expected):
        return False, said, (f"The group has {len(expected)} ranks, not {len(ranks)}: "
                             + _first(worked))
    hits = len(set(ranks) & set(expected))
    return False, said, (f"Right size, but {len(expected) - hits} of these ranks are not in "
                         f"the group. " + _first(worked))


def read_ranks(answer: Any) -> list[int]:
    accepted = "a list of rank numbers, such as [0, 4, 8, 12] or \"0, 4, 8, 12\""
    if isinstance(answer, str):
        if re.search(r"[^\d\s,;\[\]()]", answer):
            raise AnswerError(f"answer must be {accepted}; got {answer!r}")
        answer = [int(n) for n in re.findall(r"\d+", answer)]
    if not isinstance(answer, (list, tuple)) or not answer:
        raise AnswerError(f"answer must be {accepted}")
    out = []
    for v in answer:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise AnswerError(f"answer must be {accepted}; {v!r} is not a rank")
        out.append(v)
    if len(set(out)) != len(out):
        raise AnswerError(f"answer lists a rank twice: {out}")
    return out


def parse_seed(raw: str | None, default: int | None = None) -> int:
    """A query's seed: an integer from 0 to 2³¹ − 1 (AnswerError naming ``seed`` otherwise)."""
    from app.exercises.draw import MAX_SEED
    if raw is None or raw == "":
        if default is None:
            raise AnswerError(f"seed must be an integer from 0 to {MAX_SEED} (missing)", "seed")
        return default
    try:
        seed = int(raw)
    except (TypeError, ValueError):
        seed = -1
    if not 0 <= seed <= MAX_SEED or str(raw).strip().lstrip("+") != str(seed):
        raise AnswerError(f"seed must be an integer from 0 to {MAX_SEED} (got {raw!r})", "seed")
    return seed

