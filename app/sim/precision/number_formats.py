"""The floating-point formats of training: FP32, TF32, FP16, BF16 and the two FP8s, with exact
rounding (round to nearest, ties to even, once, from the float64's exact binary value).

    format     sign exp mant  bias  largest finite   smallest normal  smallest subnormal  ε = 2^-mant
    FP32        1    8   23   127   3.40e38          1.18e-38         1.40e-45            1.19e-7
    TF32        1    8   10   127   3.40e38          1.18e-38         1.10e-41            9.77e-4
    FP16        1    5   10    15   65504            6.10e-5          5.96e-8             9.77e-4
    BF16        1    8    7   127   3.39e38          1.18e-38         9.18e-41            7.81e-3
    FP8 E4M3    1    4    3     7   448              2^-6             2^-9                0.125
    FP8 E5M2    1    5    2    15   57344            2^-14            2^-16               0.25

Sources: IEEE 754-2008 (binary32, binary16); NVIDIA's A100 whitepaper (TF32: FP32's range,
FP16's precision); Micikevicius et al. 2022, "FP8 Formats for Deep Learning", Table 1 (E4M3 has
no infinities and one NaN pattern, which buys it the exponent 1111: its largest value is
1.75 × 2^8 = 448; E5M2 follows IEEE conventions).

**Rounding once** (:func:`round_exact`): a float64 is an integer significand M times 2^e, so
rounding it to a format with m fraction bits is integer arithmetic: the quantum is 2^(max(E,
Emin) − m), where E = ⌊log2|x|⌋ and Emin the format's smallest normal exponent; M is shifted
right onto it and rounded to nearest, ties to even, from the bits shifted out; a result past the
largest finite value is overflow (±inf; NaN for E4M3, which has no infinity). Every value the
scene names rounds this way, TF32 included (it exists only inside tensor cores: FP32's exponent,
FP16's 10-bit fraction).

**torch rounds twice** (:func:`round_via_fp32`): torch (c10's ``Half``, ``BFloat16`` and
``Float8_*`` are built from a ``float``) and ml_dtypes cast a float64 to FP32 first, then to the
16- or 8-bit format, and the GPU measurement of TF32 multiplies FP32 inputs. The first rounding
can move a value onto a midpoint (1.00390625001 → 1.00390625 in FP32, which BF16's ties-to-even
takes down to 1.0 where the nearest BF16 is 1.0078125) or past one. That is what the real run
compares torch with; the page shows it beside the exact value where they differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class Format:
    key: str
    label: str
    exponent_bits: int
    mantissa_bits: int
    dtype: type | None           # numpy / ml_dtypes dtype; None for TF32
    has_inf: bool = True
    note: str = ""

    @property
    def bits(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bias(self) -> int:
        return 2 ** (self.exponent_bits - 1) - 1

    @property
    def max(self) -> float:
        if self.dtype is not None:
            return float(ml_dtypes.finfo(self.dtype).max)
        return ieee_max(self.exponent_bits, self.mantissa_bits)

    @property
    def min_normal(self) -> float:
        return 2.0 ** (1 - self.bias)

    @property
    def min_subnormal(self) -> float:
        return 2.0 ** (1 - self.bias - self.mantissa_bits)

    @property
    def eps(self) -> float:
        """Spacing of the numbers in [1, 2): the relative precision of a normal value is ε/2."""
        return 2.0 ** -self.mantissa_bits

    @property
    def decimal_digits(self) -> float:
        """log10(2^(mantissa + 1)): how many decimal digits a normal value carries."""
        return (self.mantissa_bits + 1) * math.log10(2)

    @property
    def storage_bytes(self) -> int:
        """Bytes in memory (TF32 is stored as FP32; its 19 bits exist only inside the GPU)."""
        return 4 if self.key == "tf32" else self.bits // 8


def ieee_max(exponent_bits: int, mantissa_bits: int) -> float:
    """Largest finite value of an IEEE-style format: (2 − 2^-m) · 2^bias."""
    bias = 2 ** (exponent_bits - 1) - 1
    return (2 - 2.0 ** -mantissa_bits) * 2.0 ** bias


FORMATS: dict[str, Format] = {f.key: f for f in (
    Format("fp32", "FP32", 8, 23, np.float32, note="IEEE single precision: the master weights "
                                                   "and optimizer states"),
    Format("tf32", "TF32", 8, 10, None, note="what Ampere+ tensor cores multiply FP32 inputs "
                                             "in; stored as FP32"),
    Format("fp16", "FP16", 5, 10, np.float16, note="IEEE half: needs loss scaling"),
    Format("bf16", "BF16", 8, 7, ml_dtypes.bfloat16, note="FP32's range in 16 bits: no loss "
                                                          "scaling"),
    Format("fp8_e4m3", "FP8 E4M3", 4, 3, ml_dtypes.float8_e4m3fn, has_inf=False,
           note="more precision: weights and activations"),
    Format("fp8_e5m2", "FP8 E5M2", 5, 2, ml_dtypes.float8_e5m2, note="more range: gradients"),
)}
KEYS = tuple(FORMATS)


def _limits(fmt: Format) -> tuple[int, int]:
    """(smallest normal exponent, fraction bits)."""
    return 1 - fmt.bias, fmt.mantissa_bits


def round_exact(values, fmt: Format) -> np.ndarray:
    """``values`` (float64) rounded once to ``fmt``: round to nearest, ties to even, on the
    exact binary value of each float64 (integer arithmetic on its bits). Returns float64, ±inf
    past the largest finite value (NaN for E4M3, which has no infinity); NaN and ±inf pass
    through (E4M3 turns inf into NaN)."""
    x = np.asarray(values, dtype=np.float64)
    bits = x.reshape(-1).view(np.uint64)
    field = ((bits >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    fraction = bits & np.uint64((1 << 52) - 1)
    normal = field > 0
    significand = np.where(normal, fraction | np.uint64(1 << 52), fraction)  # M
    low = np.where(normal, field, 1) - 1075                                  # x = M · 2^low
    top = np.where(normal, field - 1023, -1023)       # ⌊log2 x⌋ for normals (subnormals: below)
    emin, m = _limits(fmt)
    quantum = np.maximum(top, emin) - m              # exponent of the format's spacing there
    shift = np.clip(quantum - low, 0, 60).astype(np.uint64)
    kept = significand >> shift
    rest = significand - (kept << shift)
    half = np.where(shift > 0, np.uint64(1) << (shift - np.uint64(1)), np.uint64(0))
    up = (shift > 0) & ((rest > half) | ((rest == half) & ((kept & np.uint64(1)) == 1)))
    kept = kept + up.astype(np.uint64)
    exponent = np.where(quantum - low > 0, quantum, low)
    with np.errstate(over="ignore", invalid="ignore"):
        magnitude = np.ldexp(kept.astype(np.float64), exponent.astype(np.int64))
        past = magnitude > fmt.max
        magnitude = np.where(past, np.inf if fmt.has_inf else np.nan, magnitude)
        out = np.copysign(magnitude, x.reshape(-1))
        special = ~np.isfinite(x.reshape(-1))
        out = np.where(special, x.reshape(-1) if fmt.has_inf else np.nan, out)
    return out.reshape(x.shape)


def round_to(values, fmt: Format) -> np.ndarray:
    """``values`` rounded to ``fmt`` (round to nearest, ties to even, once), as float64. Values
    past the largest finite value become ±inf (E4M3, which has no infinity, gives NaN); callers
    report those as overflow and never show them."""
    return round_exact(values, fmt)


@lru_cache(maxsize=None)
def overflow_threshold(fmt: Format) -> float:
    """The smallest float64 that rounds past ``fmt``'s largest finite value: rounding is
    monotonic, so ``x`` overflows exactly when ``|x|`` ≥ this (a comparison in place of a
    rounding, for a test made once a step). Found from :func:`round_exact` itself: the
    midpoint between the largest value and the next power of the spacing there, or the float
    after it where ties go to the even largest value (E4M3)."""
    top = fmt.max
    spacing = 2.0 ** (math.frexp(top)[1] - 1 - fmt.mantissa_bits)
    midpoint = top + spacing / 2                     # exact in float64
    for x in (midpoint, math.nextafter(midpoint, math.inf)):
        if not np.isfinite(round_exact([x], fmt)[0]):
            below = math.nextafter(x, 0.0)
            assert np.isfinite(round_exact([below], fmt)[0]), (fmt.key, x)
            return x
    raise AssertionError(f"no overflow threshold found for {fmt.key}")


def round_via_fp32(values, fmt: Format) -> np.ndarray:
    """What torch's casts give for float64 ``values``: rounded to FP32 first, then (exactly,
    from that FP32 value) to ``fmt`` — twice (see the module docstring)."""
    with np.errstate(over="ignore"):
        first = np.asarray(values, dtype=np.float64).astype(np.float32).astype(np.float64)
    return round_exact(first, fmt)


def round_tf32(x) -> np.ndarray:
    """FP32 values rounded to TF32 (1 + 8 + 10 bits), as float64 (±inf past its largest)."""
    return round_exact(np.asarray(x, dtype=np.float32).astype(np.float64), FORMATS["tf32"])


@dataclass(frozen=True)
class Encoded:
    """One value in one format: the value it rounds to and its bits."""

    key: str
    value: float
    rounded: float | None        # None when it overflows
    kind: str                    # "normal" | "subnormal" | "zero" | "overflow"
    sign: str
    exponent: str
    mantissa: str
    exponent_value: int          # the stored exponent field
    error: float | None          # rounded − value
    relative_error: float | None
    # torch's cast (through FP32: rounded twice); equal to rounded / kind for almost every value
    via_fp32_rounded: float | None = None
    via_fp32_kind: str = ""

    @property
    def differs_via_fp32(self) -> bool:
        """Whether torch's double rounding (through FP32) gives another value or kind."""
        return (self.via_fp32_rounded != self.rounded or self.via_fp32_kind != self.kind)

    @property
    def underflow(self) -> bool:
        return self.kind == "zero" and self.value != 0

    def to_dict(self) -> dict:
        return {"format": self.key, "value": self.value, "rounded": self.rounded,
                "kind": self.kind, "underflow": self.underflow,
                "bits": f"{self.sign} {self.exponent} {self.mantissa}".strip(),
                "fields": {"sign": self.sign, "exponent": self.exponent,
                           "mantissa": self.mantissa},
                "exponent_field": self.exponent_value, "error": self.error,
                "relative_error": self.relative_error,
                "via_fp32": {"rounded": self.via_fp32_rounded, "kind": self.via_fp32_kind,
                             "differs": self.differs_via_fp32}}


def bit_pattern(rounded: float, fmt: Format) -> str:
    """The stored bits of an (already representable, finite) value, sign first."""
    if fmt.key == "tf32":  # TF32 values are FP32 values whose 13 low fraction bits are 0
        word = int(np.array([rounded], dtype=np.float32).view(np.uint32)[0]) >> 13
    else:
        unsigned = {1: np.uint8, 2: np.uint16, 4: np.uint32}[fmt.bits // 8]
        word = int(np.array([rounded], dtype=fmt.dtype).view(unsigned)[0])
    return format(word, f"0{fmt.bits}b")


def _encoded(value: float, fmt: Format, rounded: float, **extra) -> Encoded:
    if not math.isfinite(rounded):
        return Encoded(fmt.key, value, None, "overflow", "", "", "", 0, None, None, **extra)
    bits = bit_pattern(rounded, fmt)
    sign, exponent = bits[0], bits[1:1 + fmt.exponent_bits]
    mantissa = bits[1 + fmt.exponent_bits:]
    field = int(exponent, 2)
    kind = "zero" if rounded == 0 else "subnormal" if field == 0 else "normal"
    error = rounded - value
    relative = abs(error) / abs(value) if value else 0.0
    return Encoded(fmt.key, value, rounded, kind, sign, exponent, mantissa, field, error,
                   relative, **extra)


def encode_via_fp32(value: float, fmt: Format) -> Encoded:
    """``value`` as torch's cast encodes it: through FP32 (:func:`round_via_fp32`)."""
    twice = _encoded(value, fmt, float(round_via_fp32([value], fmt)[0]))
    return replace(twice, via_fp32_rounded=twice.rounded, via_fp32_kind=twice.kind)


def encode(value: float, fmt: Format) -> Encoded:
    """``value`` rounded once to ``fmt``, with torch's double rounding beside it."""
    twice = encode_via_fp32(value, fmt)
    return _encoded(value, fmt, float(round_to([value], fmt)[0]),
                    via_fp32_rounded=twice.rounded, via_fp32_kind=twice.kind)


def overflows(value: float, fmt: Format) -> bool:
    return not math.isfinite(float(round_to([value], fmt)[0]))


def fractions(values: np.ndarray, fmt: Format, rounded: np.ndarray | None = None
              ) -> dict[str, float]:
    """Shares of non-zero ``values`` that round to 0 (underflow), to a subnormal, or past the
    largest finite value (overflow) in ``fmt``; ``rounded``: ``round_to(values, fmt)`` where
    the caller has it already."""
    values = np.asarray(values, dtype=np.float64)
    if rounded is None:
        rounded = round_to(values, fmt)
    n = max(1, int(np.count_nonzero(values)))
    finite = np.isfinite(rounded)
    magnitude = np.abs(rounded)
    return {"underflow": float(np.sum((rounded == 0) & (values != 0)) / n),
            "subnormal": float(np.sum(finite & (magnitude > 0)
                                      & (magnitude < fmt.min_normal)) / n),
            "overflow": float(np.sum(~finite) / n)}


def fractions_per_row(rows: np.ndarray, fmt: Format) -> list[tuple[float, float]]:
    """:func:`fractions`' underflow and subnormal shares for every row of ``rows`` at once."""
    rows = np.asarray(rows, dtype=np.float64)
    nonzero = rows != 0
    n = np.maximum(1, np.count_nonzero(nonzero, axis=1))
    if fmt.dtype is np.float16:
        # read off FP16's own bits: |x| is zero when all 15 are 0, subnormal while the
        # exponent field is 0 (below 0x0400), inf or NaN from 0x7c00 up
        with np.errstate(over="ignore"):
            bits = rows.astype(np.float16).view(np.uint16) & 0x7FFF
        under = np.count_nonzero((bits == 0) & nonzero, axis=1) / n
        sub = np.count_nonzero((bits > 0) & (bits < 0x0400), axis=1) / n
    else:
        rounded = round_to(rows, fmt)
        magnitude = np.abs(rounded)
        under = np.count_nonzero((rounded == 0) & nonzero, axis=1) / n
        sub = np.count_nonzero(np.isfinite(rounded) & (magnitude > 0)
                               & (magnitude < fmt.min_normal), axis=1) / n
    return list(zip(under.tolist(), sub.tolist()))
