"""Numbers as people read them: sizes in bytes, times in µs, counts and values in captions.

One module (DESIGN principle 13: one definition) below every layer: the simulations phrase their
captions with it, the decks their labels and hover texts, the templates their sizes (the
``bytes`` and ``time_us`` filters). It imports nothing of the app, so any layer may use it
(docs/structure.md). How a number is placed in a drawing (its coordinates) is app/draw's
(:mod:`app.draw.fmt`).
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
