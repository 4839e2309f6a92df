"""The stable generator every problem draws its givens from: the same (template id, seed) give
the same problem forever.

A problem's numbers come from a PCG64 bit generator whose 128-bit state and increment are taken
from SHA-256 of ``"<GENERATOR_VERSION>:<template id>:<seed>"``. Only the bit generator's raw
64-bit outputs are used (``random_raw``), never numpy's distribution methods: PCG64's output
function is fixed by its definition (O'Neill 2014), while ``Generator.integers`` or ``choice``
may change their streams between numpy versions (NEP 19). Every draw below is integer
arithmetic on those words, so a problem printed on a sheet today is the problem its permalink
shows in ten years. tests/sim/test_exercise_bank.py freezes a few (id, seed) → given pairs.

If a template's givens must ever change, its id keeps its old problems only if the change is
made under a new ``GENERATOR_VERSION`` (which every sheet and permalink carries as ``v``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

GENERATOR_VERSION = 1
"""Bumped only if a template's draws must change; old versions stay reproducible by number."""

MAX_SEED = 2**31 - 1
"""Seeds are 0 … 2³¹ − 1, as every scene's ``seed``."""

_MASK64 = (1 << 64) - 1


def _state(template_id: str, seed: int, version: int) -> tuple[int, int]:
    digest = hashlib.sha256(f"{version}:{template_id}:{seed}".encode()).digest()
    state = int.from_bytes(digest[:16], "little")
    inc = int.from_bytes(digest[16:], "little") | 1          # PCG64's increment is odd
    return state, inc


class Draw:
    """Random choices for one problem: integers, choices from a list, nice round numbers."""

    def __init__(self, template_id: str, seed: int, version: int = GENERATOR_VERSION):
        self.bits = np.random.PCG64()
        state, inc = _state(template_id, seed, version)
        self.bits.state = {"bit_generator": "PCG64", "state": {"state": state, "inc": inc},
                           "has_uint32": 0, "uinteger": 0}

    def word(self) -> int:
        """The next raw 64-bit output."""
        return int(self.bits.random_raw()) & _MASK64

    def integer(self, low: int, high: int) -> int:
        """An integer from ``low`` to ``high`` inclusive (modulo bias below 2⁻⁴⁰ for the ranges
        used here)."""
        if high < low:
            raise ValueError(f"empty range {low}…{high}")
        return low + self.word() % (high - low + 1)

    def choice(self, options: Sequence[Any]) -> Any:
        return options[self.integer(0, len(options) - 1)]

    def unit(self) -> float:
        """A float in [0, 1) from the top 53 bits of a word."""
        return (self.word() >> 11) * 2.0 ** -53

    def uniform(self, low: float, high: float) -> float:
        return low + (high - low) * self.unit()

    def nice(self, low: float, high: float, digits: int = 2) -> float:
        """A number log-uniform in [low, high], rounded to ``digits`` significant digits (the
        kind of number a problem states: 3.2e-3, 45, 7.5e9)."""
        value = math.exp(self.uniform(math.log(low), math.log(high)))
        return float(f"{value:.{digits - 1}e}")

    def power_of_two(self, low: int, high: int) -> int:
        """2^k for an exponent k with low ≤ 2^k ≤ high."""
        return 2 ** self.integer(int(math.log2(low)), int(math.log2(high)))

    def sample(self, options: Sequence[Any], count: int) -> list[Any]:
        """``count`` distinct options, in the order drawn."""
        pool = list(options)
        return [pool.pop(self.integer(0, len(pool) - 1)) for _ in range(count)]
