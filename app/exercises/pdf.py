"""A problem sheet or its answer key as a PDF, with fpdf2.

fpdf2 is pure Python (on Pillow and fontTools), lays out wrapped text itself and embeds a
TrueType subset, so the sheet sets its text in DejaVu Sans — the font the exports already
install (Makefile ``export-deps``) — and Ψ, ×, −, ⌈ ⌉, ≤, superscripts and subscripts print.
CairoSVG would need every line placed by hand; reportlab does the same job with more weight.
The creation date is fixed, so the same chapter, seed and n give the same bytes forever.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from fpdf import FPDF

from app.exercises.sheet import Sheet

FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
FIXED_DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)
INK, MUTED, ACCENT = (26, 26, 26), (85, 92, 102), (0, 114, 178)


class _Page(FPDF):
    def __init__(self, title: str, footer: str):
        super().__init__(format="A4", unit="mm")
        self.sheet_title, self.sheet_footer = title, footer
        self.set_margins(18, 16, 18)
        self.set_auto_page_break(True, 18)
        self.set_creation_date(FIXED_DATE)
        self.set_title(title)
        self.set_author("Shardscope")
        regular, bold = FONT_DIR / "DejaVuSans.ttf", FONT_DIR / "DejaVuSans-Bold.ttf"
        mono = FONT_DIR / "DejaVuSansMono.ttf"
        self.add_font("Sans", "", str(regular))
        self.add_font("Sans", "B", str(bold if bold.exists() else regular))
        self.add_font("Mono", "", str(mono if mono.exists() else regular))

    def header(self):
        self.set_font("Sans", "B", 9)
        self.set_text_color(*MUTED)
        self.cell(0, 5, self.sheet_title, new_x="LMARGIN", new_y="NEXT")
        self.ln(2)

    def footer(self):
        self.set_y(-12)
        self.set_font("Sans", "", 8)
        self.set_text_color(*MUTED)
        self.cell(0, 5, f"{self.sheet_footer} · page {self.page_no()}/{{nb}}", align="C")


def _text(pdf: FPDF, text: str, size: float = 10.5, style: str = "", colour=INK,
          height: float = 5.2, font: str = "Sans") -> None:
    pdf.set_font(font, style, size)
    pdf.set_text_color(*colour)
    pdf.multi_cell(0, height, text, new_x="LMARGIN", new_y="NEXT")


def render(sheet: Sheet, key: bool, base_url: str = "") -> bytes:
    what = "answer key" if key else "problem sheet"
    title = f"Shardscope · Chapter {sheet.chapter}: {sheet.title} · {what} (seed {sheet.seed})"
    pdf = _Page(title, f"seed {sheet.seed} · {len(sheet.problems)} problems · generator "
                       f"v{sheet.version}")
    pdf.alias_nb_pages()
    pdf.add_page()
    _text(pdf, f"Chapter {sheet.chapter}: {sheet.title}", 17, "B", height=8)
    _text(pdf, ("Answer key — the worked solution of every problem, step by step."
                if key else "Work each problem by hand, then check your answer online at the "
                            "address under it (numbers within 1 %, integers exactly)."),
          10, colour=MUTED)
    pdf.ln(3)
    for p in sheet.problems:
        if pdf.get_y() > pdf.h - 70:
            pdf.add_page()
        _text(pdf, f"{p.number}. {p.template.title}", 12, "B", height=6.5)
        _text(pdf, p.body["prompt"])
        _text(pdf, f"Answer: {p.unit_text}", 9, colour=MUTED, height=4.6)
        if key:
            answer, steps = p.answer()
            pdf.ln(1)
            for k, s in enumerate(steps, start=1):
                _text(pdf, f"{k}. {s['line']}", 9.5, height=4.8)
            _text(pdf, f"Answer: {answer}", 11, "B", ACCENT, height=6)
            _text(pdf, f"Source: {p.template.source}", 8.5, colour=MUTED, height=4.4)
        else:
            pdf.ln(2)
            pdf.set_draw_color(200, 204, 210)
            top = pdf.get_y()
            pdf.rect(pdf.l_margin, top, pdf.w - pdf.l_margin - pdf.r_margin, 26)
            pdf.set_y(top + 27)
        _text(pdf, f"Check: {base_url}{p.permalink}", 8.5, colour=ACCENT, height=4.4,
              font="Mono")
        pdf.ln(4)
    return bytes(pdf.output())
