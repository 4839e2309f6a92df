"""app/draw/text.py's widths against the fonts themselves: every deck decides whether a label
fits from them, so they must be DejaVu Sans's (measured here with Pillow from the TTF files the
Makefile installs), never narrower."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.draw.text import em_width, fits, text_width, wrap

FONTS = Path("/usr/share/fonts/truetype/dejavu")
pytestmark = pytest.mark.skipif(not (FONTS / "DejaVuSans.ttf").exists(),
                                reason="DejaVu Sans is not installed (make export-deps)")

SAMPLES = ["rank 63", "Step 12 of 126 · reduce-scatter", "16-bit parameters", "fits: 10.9 GiB free",
           "t = 12.5 · steady state", "1F1B · 4 ranks · 8 micro-batches", "W backward (weights)",
           "Llama-3 405B · b 8 · dp 1 · tp 1 · pp 1 · ZeRO-0", "→r7", "Ψ = 8.03 B", "0–3, 5",
           "all_to_all · ring · 16 ranks · 16 elements", "~!@#$%^&*()_+{}|:<>?"]


def pillow_width(text: str, bold: bool) -> float:
    from PIL import ImageFont
    font = ImageFont.truetype(str(FONTS / ("DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf")),
                              1000)
    return font.getlength(text) / 1000


@pytest.mark.parametrize("bold", [False, True])
@pytest.mark.parametrize("text", SAMPLES)
def test_widths_are_the_fonts(text, bold):
    # the fonts' advance widths per character, to a thousandth of an em: no kerning, so never
    # narrower than the set text (but for the thousandths)
    assert em_width(text, bold) == pytest.approx(pillow_width(text, bold), rel=0.02, abs=0.02)
    assert em_width(text, bold) >= pillow_width(text, bold) * 0.997


def test_an_unknown_character_counts_as_a_whole_em():
    assert em_width("漢") == 1.0 and text_width("漢字", 20) == 40


@pytest.mark.parametrize("size,width", [(14, 200), (20, 300), (16, 90)])
def test_wrapped_lines_fit(size, width):
    text = "Every byte a GPU holds during training, line by line: parameters, gradients"
    lines = wrap(text, size, width)
    assert " ".join(lines) == text
    assert all(fits(line, size, width) or " " not in line for line in lines)
    # and no line could take the next line's first word
    for a, b in zip(lines, lines[1:]):
        assert not fits(f"{a} {b.split()[0]}", size, width)
