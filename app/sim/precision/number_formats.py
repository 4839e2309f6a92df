"""The floating-point formats of training: FP32, TF32, FP16, BF16 and the two FP8s, with exact
rounding by ml_dtypes and numpy (round to nearest, ties to even).

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
1.75 × 2^8 = 448; E5M2 follows IEEE conventions). FP32, FP16, BF16 and the FP8s round with
numpy/ml_dtypes casts. TF32 has no dtype anywhere (it exists only inside tensor cores), but it
is FP32's exponent with FP16's 10-bit mantissa, so it rounds as FP16 does after an exact
power-of-two shift that lines its exponent range up with FP16's (:func:`round_tf32`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


def round_tf32(x: np.ndarray) -> np.ndarray:
    """Round FP32 values to TF32 (1 + 8 + 10 bits): FP16's rounding after shifting by 2^s.

    A normal x = 1.f × 2^E is shifted by 2^-E into [1, 2), where FP16 keeps the same 10
    fraction bits; a value below TF32's smallest normal 2^-126 is shifted by 2^112 so that it
    lands among FP16's subnormals (FP16's smallest normal 2^-14 = 2^-126 · 2^112), whose spacing
    2^-24 is TF32's 2^-136. Shifts by powers of two are exact, so the only rounding is FP16's.
    Returns float64 values (±inf past TF32's largest value)."""
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    _, e = np.frexp(x)                       # x = m · 2^e, |m| ∈ [0.5, 1)
    shift = np.where(e - 1 >= -126, e - 1, -112)
    with np.errstate(over="ignore"):
        y = np.ldexp(x, -shift).astype(np.float16).astype(np.float64)
        out = np.ldexp(y, shift)
    # past 2^128 the value is beyond FP32 and TF32 alike
    return np.where(np.abs(out) >= 2.0 ** 128, np.copysign(np.inf, out), out)


def round_to(values, fmt: Format) -> np.ndarray:
    """``values`` rounded to ``fmt`` (round to nearest, ties to even), as float64. Values past
    the largest finite value become ±inf (E4M3, which has no infinity, gives NaN); callers
    report those as overflow and never show them."""
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if fmt.key == "tf32":
            return round_tf32(x)
        return x.astype(fmt.dtype).astype(np.float64)


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
                "relative_error": self.relative_error}


def bit_pattern(rounded: float, fmt: Format) -> str:
    """The stored bits of an (already representable, finite) value, sign first."""
    if fmt.key == "tf32":  # TF32 values are FP32 values whose 13 low fraction bits are 0
        word = int(np.array([rounded], dtype=np.float32).view(np.uint32)[0]) >> 13
    else:
        unsigned = {1: np.uint8, 2: np.uint16, 4: np.uint32}[fmt.bits // 8]
        word = int(np.array([rounded], dtype=fmt.dtype).view(unsigned)[0])
    return format(word, f"0{fmt.bits}b")


def encode(value: float, fmt: Format) -> Encoded:
    rounded = float(round_to([value], fmt)[0])
    if not math.isfinite(rounded):
        return Encoded(fmt.key, value, None, "overflow", "", "", "", 0, None, None)
    bits = bit_pattern(rounded, fmt)
    sign, exponent = bits[0], bits[1:1 + fmt.exponent_bits]
    mantissa = bits[1 + fmt.exponent_bits:]
    field = int(exponent, 2)
    kind = "zero" if rounded == 0 else "subnormal" if field == 0 else "normal"
    error = rounded - value
    relative = abs(error) / abs(value) if value else 0.0
    return Encoded(fmt.key, value, rounded, kind, sign, exponent, mantissa, field, error,
                   relative)


def overflows(value: float, fmt: Format) -> bool:
    return not math.isfinite(float(round_to([value], fmt)[0]))


def fractions(values: np.ndarray, fmt: Format) -> dict[str, float]:
    """Shares of non-zero ``values`` that round to 0 (underflow), to a subnormal, or past the
    largest finite value (overflow) in ``fmt``."""
    values = np.asarray(values, dtype=np.float64)
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
