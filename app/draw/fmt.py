"""Numbers and sizes as text, for every scene: captions, hover texts, labels and coordinates.

One module (DESIGN principle 13: one definition): the simulations write captions with these,
the deck writers coordinates, the templates sizes (the ``bytes`` and ``time_us`` filters). It
imports nothing of the app, so any layer may use it.
"""

from __future__ import annotations


def human_bytes(n: float) -> str:
    """1024 → "1 KiB", 3·2²⁰ → "3 MiB" (binary units, as message sizes usually are)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if abs(n) < 1024 or unit == "EiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    raise AssertionError

def exact_bytes(n: float) -> str:
    """"1.69 MiB (1,771,520 B)": readable, and to the byte beside a measurement."""
    return f"{human_bytes(n)} ({int(n):,} B)"

def human_time_us(t: float) -> str:
    """Microseconds in the unit that reads best: 12.3 µs, 4.56 ms, 1.23 s."""
    if t < 1000:
        return f"{t:.3g} µs"
    if t < 1e6:
        return f"{t / 1e3:.3g} ms"
    return f"{t / 1e6:.3g} s"

def coord(x: float) -> str:
    """A coordinate in as few characters as it needs (one decimal at most)."""
    text = f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text

def coord2(x: float) -> str:
    """Two decimals at most, for what text is placed by: glyphs snap to whole pixels, and a
    baseline rounded across a pixel's boundary would move them by one."""
    return f"{x:.2f}".rstrip("0").rstrip(".")

def sig4(x: float) -> str:
    """A time or size for captions: 3, 4.5, 0.3333."""
    return f"{x:.4g}"

def fixed(value: float, decimals: int) -> str:
    """``value`` with ``decimals`` decimals and a true minus sign; what rounds to zero is "0.0",
    never "−0.0"."""
    text = f"{value:.{decimals}f}"
    if text.startswith("-") and float(text) == 0:
        text = text[1:]
    return text.replace("-", "−")


def caption_number(value: float) -> str:
    """A number as a caption shows it: integers plainly, others with up to 3 significant
    digits; a true minus sign."""
    value = float(value)
    text = str(int(round(value))) if abs(value - round(value)) < 1e-9 else f"{value:.3g}"
    return text.replace("-", "−")
