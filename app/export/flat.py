"""A standalone SVG with its style sheet applied to its elements, for slide tools.

The decks style their elements from a ``<style>`` sheet (``.deck .ink { fill: … }``, the
current layer's arrows shown by ``.frame.current .only-current``). Browsers, resvg and CairoSVG
read it; the SVG renderers of PowerPoint and Keynote read little CSS. :func:`flatten` computes
each element's declarations with cssselect2 and tinycss2 (the selector engine and CSS parser
CairoSVG itself uses), writes them as presentation attributes (``fill="#1a1a1a"``), drops what
the sheet hides (``display: none``) and the sheet itself. Halos drawn under text with
``paint-order: stroke`` are dropped too: a renderer that ignores the paint order draws the
halo over the letters. The picture is otherwise the same (tests/api/test_export.py draws both
with resvg and compares them).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import cssselect2
import tinycss2

SVG = "http://www.w3.org/2000/svg"
ET.register_namespace("", SVG)
ET.register_namespace("xlink", "http://www.w3.org/1999/xlink")

PROPERTIES = frozenset((
    "fill", "fill-opacity", "fill-rule", "stroke", "stroke-width", "stroke-dasharray",
    "stroke-dashoffset", "stroke-linecap", "stroke-linejoin", "stroke-opacity", "opacity",
    "font-size", "font-weight", "font-family", "font-style", "text-anchor", "dominant-baseline",
    "display", "visibility", "paint-order", "letter-spacing",
))
"""The CSS properties the decks use that SVG also has as presentation attributes."""


def _rules(root: ET.Element) -> cssselect2.Matcher:
    matcher = cssselect2.Matcher()
    for style in root.iter(f"{{{SVG}}}style"):
        for rule in tinycss2.parse_stylesheet(style.text or "", skip_comments=True,
                                               skip_whitespace=True):
            if rule.type != "qualified-rule":
                continue
            declarations = [(d.lower_name, tinycss2.serialize(d.value).strip())
                            for d in tinycss2.parse_blocks_contents(rule.content)
                            if d.type == "declaration"]
            try:
                selectors = cssselect2.compile_selector_list(rule.prelude)
            except cssselect2.SelectorError:
                continue
            for selector in selectors:
                matcher.add_selector(selector, declarations)
    return matcher


def flatten(svg: str) -> str:
    """``svg`` (a standalone file) with its style sheet written onto its elements."""
    body = svg[svg.index("<svg"):]
    root = ET.fromstring(body)
    matcher = _rules(root)
    drop: list[tuple[ET.Element, ET.Element]] = []
    wrapper = cssselect2.ElementWrapper.from_xml_root(root)
    for element in wrapper.iter_subtree():
        node = element.etree_element
        matches = matcher.match(element)
        if not matches:
            continue
        values: dict[str, str] = {}
        for _, _, _, declarations in sorted(matches, key=lambda m: (m[0], m[1])):
            for name, value in declarations:
                values[name] = value.replace("!important", "").strip()
        for name, value in _inline(node.get("style", "")).items():
            values[name] = value
        if values.get("display") == "none":
            parent = element.parent.etree_element if element.parent is not None else None
            if parent is not None:
                drop.append((parent, node))
            continue
        if node.tag in (f"{{{SVG}}}text", f"{{{SVG}}}tspan") and \
                values.get("paint-order", "").startswith("stroke"):
            for name in ("stroke", "stroke-width", "stroke-linejoin", "paint-order"):
                values.pop(name, None)
                node.attrib.pop(name, None)
        for name, value in values.items():
            if name in PROPERTIES and "var(" not in value:
                node.set(name, value)
        node.attrib.pop("style", None)
    for parent, node in drop:
        parent.remove(node)
    for style in list(root.iter(f"{{{SVG}}}style")):
        for parent in root.iter():
            if style in list(parent):
                parent.remove(style)
                break
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def _inline(style: str) -> dict[str, str]:
    out = {}
    for part in style.split(";"):
        if ":" in part:
            name, value = part.split(":", 1)
            out[name.strip().lower()] = value.strip()
    return out
