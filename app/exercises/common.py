"""What the chapters' templates share: realistic sizes to draw from, and how a prompt writes a
count ("7.5 billion"), a size in bytes or a list."""

from __future__ import annotations

from app.exercises.draw import Draw
from app.exercises.units import num

PUBLISHED_PARAMS = (1_300_000_000, 2_700_000_000, 6_700_000_000, 7_500_000_000,
                    8_000_000_000, 13_000_000_000, 30_000_000_000, 34_000_000_000,
                    65_000_000_000, 70_000_000_000, 128_000_000_000, 175_000_000_000,
                    405_000_000_000, 1_000_000_000_000)
"""Sizes of published models (GPT-3's, Llama's, ZeRO Table 1's 7.5B, 128B and 1T)."""

GPU_MEMORY_GB = (40, 80, 94, 141, 192)
"""A100 40 / 80 GB, H100 NVL 94 GB, H200 141 GB, MI300X 192 GB."""
PEAK_TFLOPS = (312, 989, 1979)
"""Dense 16-bit peaks: A100, H100 SXM (BF16), B200 (BF16)."""
DP_SIZES = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def params(d: Draw) -> int:
    """A parameter count: half the time a published size, else a round number 0.5B – 500B."""
    if d.integer(0, 1):
        return d.choice(PUBLISHED_PARAMS)
    return int(d.nice(5e8, 5e11, 2))


def count_text(n: float) -> str:
    """7_500_000_000 → "7.5 billion" (and the number in full for the careful reader)."""
    for word, f in (("trillion", 1e12), ("billion", 1e9), ("million", 1e6)):
        if abs(n) >= f:
            return f"{n / f:.4g} {word}"
    return f"{n:,.0f}"


def psi_text(n: int) -> str:
    return f"Ψ = {count_text(n)} ({num(n)})"


def gb(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:.4g} GB"


def ordinal_list(values) -> str:
    return ", ".join(str(v) for v in values)


def plural(n: int, word: str) -> str:
    """"1 sequence", "4 sequences"."""
    return f"{n} {word}" + ("" if n == 1 else "s")
