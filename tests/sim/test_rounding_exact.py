"""Rounding a typed float64 to each format, once, against exact rational arithmetic
(fractions.Fraction: IEEE 754-2008 §4.3.1 round to nearest, ties to even, on the value's exact
binary expansion; overflow when the rounded value, exponent unbounded, exceeds the largest
finite value), and torch's own casts against the double rounding through FP32 the page shows
beside it (issue 12 item 12: ml_dtypes and torch round a float64 through float32)."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from app.sim.precision.number_formats import (FORMATS, KEYS, encode, round_to,
                                              round_via_fp32)
from app.sim.precision.params import PrecisionParams


def nearest(x: float, key: str) -> Fraction | None:
    """The value of ``key`` nearest to the float64 ``x`` (ties to even); None when it
    overflows."""
    fmt = FORMATS[key]
    q = abs(Fraction(x))
    if q == 0:
        return Fraction(0)
    e = math.frexp(abs(x))[1] - 1                      # ⌊log2 q⌋, exact for a float
    assert Fraction(2) ** e <= q < Fraction(2) ** (e + 1)
    step = Fraction(2) ** (max(e, 1 - fmt.bias) - fmt.mantissa_bits)
    n, rest = divmod(q, step)
    if rest * 2 > step or (rest * 2 == step and n % 2 == 1):
        n += 1
    out = n * step
    if out > Fraction(fmt.max):
        return None
    return out if x > 0 else -out


def kind_of(r: Fraction | None, key: str) -> str:
    if r is None:
        return "overflow"
    if r == 0:
        return "zero"
    return "subnormal" if abs(r) < Fraction(FORMATS[key].min_normal) else "normal"


def representable(key: str, rng) -> np.ndarray:
    """Positive finite values of ``key``: all of them for 8- and 16-bit formats (16-bit:
    both ends, the subnormal/normal edge and 800 more), a sample for FP32 and TF32."""
    fmt = FORMATS[key]
    if key in ("fp32", "tf32"):
        shift = 13 if key == "tf32" else 0
        words = np.concatenate([np.arange(1, 100), np.arange(0x7F7FFFFF - 100, 0x7F800000) >> shift
                                << shift, (np.arange(0x007FFF80, 0x00800080) >> shift) << shift,
                                rng.integers(1, 0x7F800000, 600) >> shift << shift])
        return np.unique(words.astype(np.uint32).view(np.float32).astype(np.float64)[
            (words > 0)])
    width = {1: np.uint8, 2: np.uint16}[fmt.bits // 8]
    words = np.arange(1, 2 ** (fmt.bits - 1), dtype=np.int64)
    if fmt.bits == 16:
        edge = 1 << fmt.mantissa_bits          # the smallest normal's word
        words = np.concatenate([words[:100], words[-400:], words[edge - 100:edge + 100],
                                rng.choice(words, 800)])
    with np.errstate(invalid="ignore"):
        values = words.astype(width).view(fmt.dtype).astype(np.float64)
    return np.unique(values[np.isfinite(values)])


def probes(key: str) -> np.ndarray:
    """Every representable value, each midpoint between neighbours (and past the largest
    value, and below the smallest subnormal), each of those ± 1 float64 ulp, ± 1e-10
    relative, and negated."""
    rng = np.random.default_rng(12)
    fmt = FORMATS[key]
    v = representable(key, rng)
    v = np.concatenate([[0.0], v])
    nxt = np.concatenate([v[1:], [fmt.max + 2.0 ** (math.frexp(fmt.max)[1] - 1 - fmt.mantissa_bits)]])
    mids = (v + nxt) / 2                       # exact: neighbours differ in few bits
    points = np.concatenate([v, mids, nxt[-1:], rng.uniform(0, fmt.max, 200),
                             2.0 ** rng.uniform(math.log2(fmt.min_subnormal) - 3,
                                                math.log2(fmt.max), 600)])
    around = [points, np.nextafter(points, np.inf), np.nextafter(points, 0),
              points * (1 + 1e-10), points * (1 - 1e-10)]
    out = np.concatenate(around)
    out = out[np.isfinite(out)]
    return np.concatenate([out, -out])


@pytest.mark.parametrize("key", KEYS)
def test_round_once_equals_exact_rational_rounding(key):
    values = probes(key)
    got = round_to(values, FORMATS[key])
    wrong = []
    for x, g in zip(values.tolist(), got.tolist()):
        want = nearest(x, key)
        if (want is None) != (not math.isfinite(g)) or (want is not None and Fraction(g) != want):
            wrong.append((x, g, want))
    assert not wrong, f"{len(wrong)} of {len(values)} differ, e.g. {wrong[:3]}"


@pytest.mark.parametrize("key", KEYS)
def test_kind_labels_follow_the_exact_value(key):
    fmt = FORMATS[key]
    values = probes(key)[::7]
    for x in values.tolist():
        assert encode(x, fmt).kind == kind_of(nearest(x, key), key), x


@pytest.mark.parametrize("value,key,once,twice", [
    (1.00390625001, "bf16", 1.0078125, 1.0),
    (1.0625000001, "fp8_e4m3", 1.125, 1.0),
    (1 + 2 ** -11 + 2 ** -40, "fp16", 1 + 2 ** -10, 1.0),
    (3.396177516553954e38, "bf16", float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), None),
    (61439.9999961853, "fp8_e5m2", 57344.0, None),
])
def test_issue_values(value, key, once, twice):
    enc = encode(value, FORMATS[key])
    assert enc.rounded == once
    assert enc.via_fp32_rounded == twice and enc.differs_via_fp32


@pytest.mark.parametrize("value,key", [(3.396177516553954e38, "bf16"),
                                       (61439.9999961853, "fp8_e5m2")])
def test_values_whose_nearest_is_finite_are_accepted(value, key):
    PrecisionParams(value=value, format=key)


TORCH = {"fp16": "float16", "bf16": "bfloat16", "fp8_e5m2": "float8_e5m2",
         "fp8_e4m3": "float8_e4m3fn"}


@pytest.mark.parametrize("key", sorted(TORCH))
def test_torch_casts_round_through_fp32(key):
    """torch's float64 → 16/8-bit cast equals round_via_fp32 (torch's E4M3 cast saturates at
    ±448 where the simulation says overflow: those are left out)."""
    torch = pytest.importorskip("torch")
    values = probes(key)
    fmt = FORMATS[key]
    got = torch.from_numpy(values).to(getattr(torch, TORCH[key])).double().numpy()
    want = round_via_fp32(values, fmt)
    keep = np.isfinite(want)
    assert np.array_equal(got[keep], want[keep])
    assert not np.all(want == round_to(values, fmt))   # the probes do meet double rounding
