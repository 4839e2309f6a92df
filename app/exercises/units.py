"""Quantities, their units, and how an answer typed by a student is read.

Every problem states its answer's unit (``bytes``, ``s``, ``ms``, ``fraction``, ``GB/s``,
``FLOP``, ``tokens`` …). An answer is a JSON number, read in that unit, or a string with a
number and optionally a unit: "31.4 GB", "31.4e9", "29.2 GiB", "3.1 ms", "0.25", "25 %",
"7.5B", "2^16", "1.5×10⁹ bytes". A unit of the problem's own kind is converted (GB = 10⁹ bytes,
GiB = 2³⁰ bytes, as REFERENCES.md fixes them); a unit of another kind ("ms" for bytes) or one not
known is refused with a message that says which units this problem accepts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


class AnswerError(ValueError):
    """An answer that cannot be read: the 422 message names the field and what is accepted."""

    def __init__(self, message: str, field: str = "answer"):
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Quantity:
    name: str                       # "bytes", "time" …: what the 422 message calls it
    units: tuple[tuple[str, float, str], ...]
    """(spelling, factor to the base unit, how unit_understood names it)"""
    base: str

    def find(self, text: str, exact: bool) -> tuple[float, str] | None:
        for spelling, factor, said in self.units:
            if spelling == text or (not exact and spelling.lower() == text.lower()):
                return factor, said
        return None

    def accepted(self) -> str:
        seen = []
        for spelling, _, _ in self.units:
            if spelling and spelling not in seen:
                seen.append(spelling)
        return ", ".join(seen[:16])


def _power(base: int, exponent: int) -> str:
    return f"{base}" + str(exponent).translate(str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻"))


def _prefixed(base: str, said: str, decimal: bool = True, binary: bool = False,
              small: bool = False) -> list[tuple[str, float, str]]:
    out = [(base, 1.0, said)]
    if decimal:
        for p, f in (("k", 1e3), ("K", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12), ("P", 1e15),
                     ("E", 1e18)):
            out.append((p + base, f, f"{p}{base} = {_power(10, round(math.log10(f)))} {said}"))
    if binary:
        for p, k in (("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50)):
            out.append((p + base, 2.0 ** k, f"{p}{base} = {_power(2, k)} {said}"))
    if small:
        for p, f in (("m", 1e-3), ("µ", 1e-6), ("μ", 1e-6), ("u", 1e-6), ("n", 1e-9)):
            out.append((p + base, f, f"{p}{base} = {_power(10, round(math.log10(f)))} {said}"))
    return out


_COUNT_WORDS = (("k", 1e3), ("K", 1e3), ("thousand", 1e3), ("M", 1e6), ("million", 1e6),
                ("B", 1e9), ("G", 1e9), ("billion", 1e9), ("T", 1e12), ("trillion", 1e12))


def _counts(nouns: tuple[str, ...]) -> tuple[tuple[str, float, str], ...]:
    out: list[tuple[str, float, str]] = [("", 1.0, "a count")]
    for noun in nouns:
        out.append((noun, 1.0, noun))
    for word, f in _COUNT_WORDS:
        out.append((word, f, f"{word} = {_power(10, round(math.log10(f)))}"))
        for noun in nouns:
            out.append((f"{word} {noun}", f, f"{word} {noun}"))
            out.append((f"{word}{noun}", f, f"{word} {noun}"))
    return tuple(out)


BYTES = Quantity("bytes", tuple(
    [("", 1.0, "bytes"), ("bytes", 1.0, "bytes"), ("byte", 1.0, "bytes")]
    + _prefixed("B", "bytes", binary=True)
    + [("KB", 1e3, "KB = 10^3 bytes")]), "bytes")
TIME = Quantity("time", tuple(
    [("", 1.0, "s"), ("seconds", 1.0, "s"), ("second", 1.0, "s"), ("sec", 1.0, "s")]
    + _prefixed("s", "s", decimal=False, small=True)
    + [("min", 60.0, "min = 60 s"), ("minutes", 60.0, "min = 60 s"), ("h", 3600.0, "h = 3600 s"),
       ("hours", 3600.0, "h = 3600 s"), ("hour", 3600.0, "h = 3600 s"),
       ("days", 86400.0, "days = 86,400 s"), ("day", 86400.0, "days = 86,400 s"),
       ("d", 86400.0, "days = 86,400 s")]), "s")
FRACTION = Quantity("a fraction", (("", 1.0, "a fraction of 1"), ("%", 0.01, "% = 1/100"),
                                   ("percent", 0.01, "% = 1/100")), "fraction")
RATIO = Quantity("a ratio", (("", 1.0, "a ratio"), ("×", 1.0, "a ratio (×)"),
                             ("x", 1.0, "a ratio (×)")), "ratio")
BANDWIDTH = Quantity("bandwidth", tuple(
    _prefixed("B/s", "bytes/s", binary=True)
    + [("", 1.0, "bytes/s"), ("bytes/s", 1.0, "bytes/s")]
    + [(p + "b/s", f / 8, f"{p}b/s = {_power(10, round(math.log10(f)))} bits/s")
       for p, f in (("M", 1e6), ("G", 1e9), ("T", 1e12))]
    + [(p + "bit/s", f / 8, f"{p}bit/s = {_power(10, round(math.log10(f)))} bits/s")
       for p, f in (("M", 1e6), ("G", 1e9), ("T", 1e12))]), "bytes/s")
FLOPS = Quantity("floating-point operations", tuple(
    [("", 1.0, "FLOP")] + _prefixed("FLOP", "FLOP") + _prefixed("FLOPs", "FLOP")[1:]
    + [("FLOPs", 1.0, "FLOP")]), "FLOP")
FLOP_RATE = Quantity("FLOP/s", tuple(
    [("", 1.0, "FLOP/s")] + _prefixed("FLOP/s", "FLOP/s") + _prefixed("FLOPS", "FLOP/s")[1:]),
    "FLOP/s")
COUNT = Quantity("a count", _counts(("tokens", "token", "parameters", "params", "elements",
                                     "scores", "assignments", "GPUs", "ranks", "steps",
                                     "micro-batches", "buckets", "layers", "sequences")), "")
TOKEN_RATE = Quantity("tokens per second", tuple(
    [("", 1.0, "tokens/s"), ("tokens/s", 1.0, "tokens/s"), ("tok/s", 1.0, "tokens/s"),
     ("/s", 1.0, "tokens/s")]
    + [(f"{w} tokens/s", f, f"{w} tokens/s") for w, f in _COUNT_WORDS]
    + [(f"{w}tokens/s", f, f"{w} tokens/s") for w, f in _COUNT_WORDS]
    + [(f"{w}/s", f, f"{w} tokens/s") for w, f in _COUNT_WORDS]), "tokens/s")

QUANTITIES = (BYTES, TIME, FRACTION, BANDWIDTH, FLOPS, FLOP_RATE, TOKEN_RATE, COUNT, RATIO)


@dataclass(frozen=True)
class ProblemUnit:
    """The unit a problem asks for: its quantity, the factor from it to the quantity's base,
    and how a sheet prints it."""

    name: str
    quantity: Quantity
    factor: float


PROBLEM_UNITS: dict[str, ProblemUnit] = {u.name: u for u in (
    ProblemUnit("bytes", BYTES, 1.0),
    ProblemUnit("GB", BYTES, 1e9),
    ProblemUnit("bytes per parameter", BYTES, 1.0),
    ProblemUnit("s", TIME, 1.0),
    ProblemUnit("ms", TIME, 1e-3),
    ProblemUnit("µs", TIME, 1e-6),
    ProblemUnit("days", TIME, 86400.0),
    ProblemUnit("time units", RATIO, 1.0),
    ProblemUnit("fraction", FRACTION, 1.0),
    ProblemUnit("ratio", RATIO, 1.0),
    ProblemUnit("GB/s", BANDWIDTH, 1e9),
    ProblemUnit("FLOP", FLOPS, 1.0),
    ProblemUnit("tokens/s", TOKEN_RATE, 1.0),
    ProblemUnit("tokens", COUNT, 1.0),
    ProblemUnit("parameters", COUNT, 1.0),
    ProblemUnit("elements", COUNT, 1.0),
    ProblemUnit("scores", COUNT, 1.0),
    ProblemUnit("assignments", COUNT, 1.0),
    ProblemUnit("GPUs", COUNT, 1.0),
    ProblemUnit("ranks", COUNT, 1.0),
    ProblemUnit("steps", COUNT, 1.0),
    ProblemUnit("micro-batches", COUNT, 1.0),
    ProblemUnit("buckets", COUNT, 1.0),
    ProblemUnit("layers", COUNT, 1.0),
    ProblemUnit("sequences", COUNT, 1.0),
    ProblemUnit("collectives", COUNT, 1.0),
    ProblemUnit("", RATIO, 1.0),
)}


SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_NUMBER = re.compile(r"""^\s*(?P<num>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)
                         (?:\s*(?:[×x*·]\s*10\s*(?:\^|\*\*)?\s*(?P<exp>[-+]?\d+)
                             |\s*(?:\^|\*\*)\s*(?P<pow>[-+]?\d+(?:\.\d+)?)))?
                         \s*(?P<unit>.*?)\s*$""", re.X)


def normalise(text: str) -> str:
    """Typographic variants made plain: true minus, superscript exponents (10⁹), thousands
    separators (1,024 or 1 024 or 1_024), a unit glued to the number."""
    text = text.strip().replace("−", "-").replace("–", "-").replace("\u202f", " ")
    text = re.sub(r"10([⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+)", lambda m: "10^" + m[1].translate(SUPERSCRIPT), text)
    text = re.sub(r"(?<=\d)[,_ ](?=\d{3}(?!\d))", "", text)
    text = re.sub(r"(?<=\d)[,_ ](?=\d{3}(?!\d))", "", text)
    return text


def read_number(text: str) -> tuple[float, str]:
    """(value, unit text) of "31.4 GB", "1.5×10⁹", "2^16 "; AnswerError if no number leads."""
    match = _NUMBER.match(normalise(text))
    if match is None:
        raise AnswerError(f"answer must be a number, optionally with a unit (such as "
                          f"\"31.4 GB\", \"3.1 ms\", \"25 %\", \"1.5e9\"); got {text!r}")
    value = float(match["num"])
    if match["exp"] is not None:
        value *= 10.0 ** int(match["exp"])
    if match["pow"] is not None:
        value = value ** float(match["pow"])
    if not math.isfinite(value):
        raise AnswerError(f"answer must be a finite number; got {text!r}")
    return value, match["unit"]


def convert(text_or_number, unit: ProblemUnit) -> tuple[float, str]:
    """The answer in the problem's unit, and how its unit was understood."""
    if isinstance(text_or_number, bool) or not isinstance(text_or_number, (int, float, str)):
        raise AnswerError(f"answer must be a JSON number (in {unit.name or 'plain numbers'}) or "
                          f"a string such as \"31.4 GB\"; got {type(text_or_number).__name__}")
    if not isinstance(text_or_number, str):
        value = float(text_or_number)
        if not math.isfinite(value):
            raise AnswerError("answer must be a finite number")
        return value, _plain(unit)
    value, spelled = read_number(text_or_number)
    if spelled == "" or spelled == unit.name:
        return value, _plain(unit)
    quantity = unit.quantity
    found = quantity.find(spelled, exact=True) or quantity.find(spelled, exact=False)
    if found is None:
        for other in QUANTITIES:
            if other is not quantity and (other.find(spelled, True) or other.find(spelled, False)):
                raise AnswerError(f"answer: \"{spelled}\" is a unit of {other.name}, but this "
                                  f"problem asks for {_asked(unit)} (accepted: "
                                  f"{quantity.accepted()})")
        raise AnswerError(f"answer: the unit \"{spelled}\" is not one this problem understands; "
                          f"it asks for {_asked(unit)} (accepted: {quantity.accepted()})")
    factor, said = found
    return value * factor / unit.factor, said


def _plain(unit: ProblemUnit) -> str:
    return (f"{unit.name} (a number without a unit is read in the problem's unit)"
            if unit.name else "a plain number")


def _asked(unit: ProblemUnit) -> str:
    if unit.name and unit.name != unit.quantity.base:
        return f"{unit.quantity.name}, in {unit.name}"
    return unit.quantity.name


# --- numbers as a problem prints them -------------------------------------------------------

_SUPER = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def sci(mantissa: str, exponent: int) -> str:
    return f"{mantissa}×10{str(exponent).translate(_SUPER)}"


def num(x: float, digits: int = 5) -> str:
    """A number in a formula: integers below 10⁶ plainly, large or small ones as m×10ᵏ, at most
    ``digits`` significant digits; what it prints evaluates back to the number (tests read the
    worked solutions' arithmetic back with :func:`evaluate`)."""
    x = float(x)
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e6:
        return str(int(x))
    if 1e-3 <= abs(x) < 1e6:
        text = f"{x:.{digits}g}"
        return text if "e" not in text else num(float(text), digits)
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return sci(mantissa, int(exponent))


def evaluate(expression: str) -> float:
    """A worked step's arithmetic as printed ("2 × 7.5×10⁹ + 12 × 7.5×10⁹ / 64"), evaluated:
    × · → *, ÷ → /, − → -, ⌈x⌉ → ceil, ⌊x⌋ → floor, ^ → **, mod → %, min/max/log2/sqrt."""
    text = expression.replace("−", "-")
    text = re.sub(r"(\d(?:\.\d+)?)×10([⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)",
                  lambda m: f"{m[1]}e{m[2].translate(SUPERSCRIPT)}", text)
    text = re.sub(r"10([⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)", lambda m: f"1e{m[1].translate(SUPERSCRIPT)}", text)
    for a, b in (("×", "*"), ("·", "*"), ("÷", "/"), ("^", "**"), ("⌈", "ceil("), ("⌉", ")"),
                 ("⌊", "floor("), ("⌋", ")"), ("√", "sqrt"), (" mod ", " % ")):
        text = text.replace(a, b)
    if re.search(r"[^0-9eE.+\-*/() ,a-z_%]", text):
        raise ValueError(f"not arithmetic: {expression!r}")
    names = {"ceil": math.ceil, "floor": math.floor, "min": min, "max": max, "log2": math.log2,
             "sqrt": math.sqrt, "abs": abs, "log": math.log, "exp": math.exp}
    return float(eval(text, {"__builtins__": {}}, names))   # noqa: S307 — arithmetic only


# --- amounts in words, for the answer shown after a check -----------------------------------

def bytes_text(n: float) -> str:
    """"31.4 GB (29.3 GiB)": both conventions, as students meet both."""
    if abs(n) < 1e3:
        return f"{n:.4g} bytes"
    for p, f in (("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12), ("P", 1e15)):
        if abs(n) < f * 1e3 or p == "P":
            dec = f"{n / f:.4g} {p}B"
            break
    for p, f in (("Ki", 2**10), ("Mi", 2**20), ("Gi", 2**30), ("Ti", 2**40), ("Pi", 2**50)):
        if abs(n) < f * 1024 or p == "Pi":
            return f"{dec} ({n / f:.4g} {p}B)"
    return dec


def time_text(seconds: float) -> str:
    s = abs(seconds)
    if s >= 86400 * 2:
        return f"{seconds / 86400:.4g} days"
    if s >= 1:
        return f"{seconds:.4g} s"
    if s >= 1e-3:
        return f"{seconds * 1e3:.4g} ms"
    if s >= 1e-6:
        return f"{seconds * 1e6:.4g} µs"
    return f"{seconds * 1e9:.4g} ns"


def amount(value, unit: str) -> str:
    """A value in a problem's unit, as text for a reader."""
    if isinstance(value, (dict, list, tuple, str)) or value is None:
        return str(value)
    u = PROBLEM_UNITS[unit]
    base = value * u.factor
    if u.quantity is BYTES and unit == "bytes":
        return bytes_text(base)
    if u.quantity is TIME:
        return time_text(base)
    if unit == "fraction":
        return f"{value:.4g} ({100 * value:.3g} %)"
    if unit == "GB/s":
        return f"{value:.4g} GB/s"
    if unit == "FLOP":
        return sci(*(lambda m, e: (m.rstrip("0").rstrip("."), int(e)))(*f"{value:.3e}".split("e"))) + " FLOP"
    text = num(value, 4) if not float(value).is_integer() or abs(value) >= 1e6 else f"{int(value):,}"
    return f"{text} {unit}".strip()


def given_text(value) -> str:
    """A given as a problem's table shows it: 7,500,000,000; 0.0032; [14, 0, 2]; tp = 1, …"""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() and abs(value) >= 1e4 else f"{value:g}"
    if isinstance(value, dict):
        return ", ".join(f"{k} = {given_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(given_text(v) for v in value) + "]"
    return str(value)
