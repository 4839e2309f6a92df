"""One 16:9 slide a frame (python-pptx): the figure as a picture as large as the slide allows,
the frame's caption in the speaker notes and, with ``caption=1``, in a text box under the
picture. PowerPoint, Keynote, Google Slides and LibreOffice open it."""

from __future__ import annotations

import io

from pptx import Presentation
from pptx.util import Emu, Inches, Pt

SLIDE_W, SLIDE_H = Inches(13.333), Inches(7.5)
MARGIN = Inches(0.2)
CAPTION_H = Inches(1.1)


def pptx(pictures: list[tuple[bytes, tuple[int, int]]], captions: list[str], title: str,
         on_slide: bool) -> bytes:
    """``pictures``: each frame's PNG and its pixel size; ``captions``: each frame's text."""
    deck = Presentation()
    deck.slide_width, deck.slide_height = SLIDE_W, SLIDE_H
    deck.core_properties.title = title
    blank = deck.slide_layouts[6]
    for (png, (w, h)), caption in zip(pictures, captions):
        slide = deck.slides.add_slide(blank)
        box_w = SLIDE_W - 2 * MARGIN
        box_h = SLIDE_H - 2 * MARGIN - (CAPTION_H if on_slide else 0)
        scale = min(box_w / w, box_h / h)
        pw, ph = int(w * scale), int(h * scale)
        left, top = (SLIDE_W - pw) // 2, MARGIN + (box_h - ph) // 2
        slide.shapes.add_picture(io.BytesIO(png), Emu(left), Emu(top), Emu(pw), Emu(ph))
        if on_slide and caption:
            box = slide.shapes.add_textbox(MARGIN, SLIDE_H - MARGIN - CAPTION_H, box_w, CAPTION_H)
            frame = box.text_frame
            frame.word_wrap = True
            frame.text = caption
            for paragraph in frame.paragraphs:
                for run in paragraph.runs:
                    run.font.size = Pt(16)
                    run.font.name = "DejaVu Sans"
        slide.notes_slide.notes_text_frame.text = caption
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()
