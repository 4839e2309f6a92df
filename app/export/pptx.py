"""One 16:9 slide a frame (python-pptx), editable where a slide tool allows:

- a real slide title (the Title Only layout's placeholder): the scene and "step k of N", the
  step's unit beneath it ("MoE layer stage 2 of 7: top-k choice") — PowerPoint's outline, its
  accessibility checker and Keynote's navigator read it;
- the figure as a picture that carries the step's SVG and a PNG of it: PowerPoint (2016 and
  later, 365) and Keynote show the SVG, as vector, and PowerPoint's "Convert to Shape" turns it
  into native shapes and text boxes to edit; tools that read no SVG (older PowerPoint, Google
  Slides) show the PNG. The SVG has its style sheet applied to its elements
  (:mod:`app.export.flat`): those renderers read little CSS;
- the caption in the speaker notes and, with ``caption=1``, in a text box under the figure.

The Office extension is the one PowerPoint itself writes: an ``a:blip`` whose ``a:extLst``
holds an ``asvg:svgBlip`` pointing at the SVG part (ECMA-376 allows such extensions; the
namespace is Microsoft's http://schemas.microsoft.com/office/drawing/2016/SVG/main).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from lxml import etree
from pptx import Presentation
from pptx.opc.constants import RELATIONSHIP_TYPE as RT
from pptx.opc.package import Part
from pptx.oxml.ns import qn
from pptx.util import Emu, Inches, Pt

SLIDE_W, SLIDE_H = Inches(13.333), Inches(7.5)
MARGIN = Inches(0.3)
TITLE_H = Inches(1.0)
CAPTION_H = Inches(1.1)
SVG_EXT = "{96DAC541-7B7A-43D3-8B79-37D633B846F1}"
SVG_NS = "http://schemas.microsoft.com/office/drawing/2016/SVG/main"
FONT = "DejaVu Sans"
TITLE_ONLY = 5
"""The default template's "Title Only" layout."""


@dataclass(frozen=True)
class Slide:
    title: str          # "Mixture of experts · step 3 of 8"
    unit: str           # what the step is, in its deck's words ("" where none)
    caption: str        # the speaker notes (and the text box with caption=1)
    png: bytes          # the figure, drawn
    size: tuple[int, int]   # the PNG's pixels
    svg: str            # the figure as a flattened SVG file


def _svg_part(slide, svg: str) -> str:
    """The SVG as an image part of ``slide``'s package; its relationship id."""
    package = slide.part.package
    partname = package.next_partname("/ppt/media/image%d.svg")
    part = Part(partname, "image/svg+xml", package, svg.encode("utf-8"))
    return slide.part.relate_to(part, RT.IMAGE)


def _with_svg(picture, rid: str) -> None:
    """Point ``picture``'s blip at the SVG too (the PNG stays its fallback)."""
    blip = picture._element.blipFill.find(qn("a:blip"))
    ext_list = blip.find(qn("a:extLst"))
    if ext_list is None:
        ext_list = etree.SubElement(blip, qn("a:extLst"))
    ext = etree.SubElement(ext_list, qn("a:ext"), uri=SVG_EXT)
    svg_blip = etree.SubElement(ext, f"{{{SVG_NS}}}svgBlip", nsmap={"asvg": SVG_NS})
    svg_blip.set(qn("r:embed"), rid)


def _title(slide, title: str, unit: str) -> None:
    shape = slide.shapes.title
    shape.left, shape.top = MARGIN, Inches(0.15)
    shape.width, shape.height = SLIDE_W - 2 * MARGIN, TITLE_H - Inches(0.1)
    frame = shape.text_frame
    frame.word_wrap = True
    frame.text = title
    first = frame.paragraphs[0]
    first.runs[0].font.size = Pt(26)
    first.runs[0].font.bold = True
    if unit:
        second = frame.add_paragraph()
        run = second.add_run()
        run.text = unit
        run.font.size = Pt(16)
    for paragraph in frame.paragraphs:
        for run in paragraph.runs:
            run.font.name = FONT


def pptx(slides: list[Slide], title: str, on_slide: bool) -> bytes:
    deck = Presentation()
    deck.slide_width, deck.slide_height = SLIDE_W, SLIDE_H
    deck.core_properties.title = title
    layout = deck.slide_layouts[TITLE_ONLY]
    for s in slides:
        slide = deck.slides.add_slide(layout)
        _title(slide, s.title, s.unit)
        top = MARGIN + TITLE_H
        box_w = SLIDE_W - 2 * MARGIN
        box_h = SLIDE_H - top - MARGIN - (CAPTION_H if on_slide else 0)
        w, h = s.size
        scale = min(box_w / w, box_h / h)
        pw, ph = int(w * scale), int(h * scale)
        left, pic_top = (SLIDE_W - pw) // 2, top + (box_h - ph) // 2
        picture = slide.shapes.add_picture(io.BytesIO(s.png), Emu(left), Emu(pic_top),
                                           Emu(pw), Emu(ph))
        picture.name = "Figure"
        picture._element.nvPicPr.cNvPr.set("descr", s.caption)   # the picture's alt text
        _with_svg(picture, _svg_part(slide, s.svg))
        if on_slide and s.caption:
            box = slide.shapes.add_textbox(MARGIN, SLIDE_H - MARGIN - CAPTION_H, box_w, CAPTION_H)
            frame = box.text_frame
            frame.word_wrap = True
            frame.text = s.caption
            for paragraph in frame.paragraphs:
                for run in paragraph.runs:
                    run.font.size = Pt(16)
                    run.font.name = FONT
        slide.notes_slide.notes_text_frame.text = s.caption
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()
