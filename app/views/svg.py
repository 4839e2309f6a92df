"""A minimal SVG writer for decks with thousands of elements.

Decks are generated here rather than in Jinja: a template escapes every attribute of every
cell, which made a 12-rank deck take over 100 ms to render; formatting numbers straight into
strings takes a few. Only text content and free-form attributes are escaped.
"""

from __future__ import annotations

from html import escape


def attrs(**values) -> str:
    """``x=1, fill="#fff", stroke_width=2`` → ``x="1" fill="#fff" stroke-width="2"``; None and
    "" are left out; a trailing underscore is dropped (``class_``)."""
    parts = []
    for key, value in values.items():
        if value is None or value == "":
            continue
        name = key.rstrip("_").replace("_", "-")
        if isinstance(value, float):
            value = f"{value:.1f}".rstrip("0").rstrip(".")
        parts.append(f'{name}="{value}"')
    return " ".join(parts)


def el(tag: str, text: str = "", /, **values) -> str:
    """One element; ``text`` is escaped."""
    head = f"<{tag} {attrs(**values)}".rstrip()
    return f"{head}>{escape(text, quote=False)}</{tag}>" if text else f"{head}/>"


def title(text: str) -> str:
    return f"<title>{escape(text, quote=False)}</title>" if text else ""


def text(x: float, y: float, content: str, **values) -> str:
    return el("text", content, x=round(x, 1), y=round(y, 1), **values)
