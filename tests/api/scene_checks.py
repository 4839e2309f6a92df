"""Checks every scene's endpoints share: the page with and without HX-Request, the embed, the
SVG of a frame, and a 422 that names the parameter on /api, /svg and the page."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

NON_FINITE = re.compile(r'\b(x|y|x1|x2|y1|y2|cx|cy|r|width|height|d|points|font-size)="[^"]*'
                        r'(nan|inf)|>\s*-?(nan|inf|NaN|Infinity)\s*<', re.IGNORECASE)


def check_page_fragment_embed(client, slug: str, query: str) -> None:
    page = client.get(f"/{slug}?{query}")
    assert page.status_code == 200
    assert page.text.startswith("<!doctype html>")
    assert 'id="stage"' in page.text and 'id="controls"' in page.text
    assert "HX-Request" in page.headers["vary"]
    fragment = client.get(f"/{slug}?{query}", headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    assert fragment.text.lstrip().startswith('<section id="stage"')
    assert "<html" not in fragment.text and 'id="controls"' not in fragment.text
    assert 'class="deck"' in fragment.text
    restore = client.get(f"/{slug}?{query}", headers={"HX-Request": "true",
                                                       "HX-History-Restore-Request": "true"})
    assert restore.text.startswith("<!doctype html>")
    embed = client.get(f"/embed/{slug}?{query}")
    assert embed.status_code == 200
    assert 'class="site-header"' not in embed.text and 'class="deck"' in embed.text
    assert "frame-ancestors *" in embed.headers["content-security-policy"]


def check_svg(client, slug: str, query: str, frame: int) -> ET.Element:
    response = client.get(f"/svg/{slug}?{query}&frame={frame}")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("image/svg+xml")
    assert f"frame{frame}.svg" in response.headers["content-disposition"]
    root = ET.fromstring(response.content)  # well-formed, standalone
    assert root.tag.endswith("svg") and root.get("width") and root.get("height")
    assert "var(--" not in response.text  # fixed colours, not the page's theme variables
    assert not NON_FINITE.search(response.text), NON_FINITE.search(response.text)
    bad = client.get(f"/svg/{slug}?{query}&frame=100000")
    assert bad.status_code == 422 and bad.json()["detail"][0]["param"] == "frame"
    return root


def check_bad_input(client, slug: str, query: str, param: str) -> dict:
    """``query`` is refused with a message naming ``param``, on /api, /svg and the page."""
    api = client.get(f"/api/{slug}?{query}")
    assert api.status_code == 422, api.text
    body = api.json()
    assert param in {d["param"] for d in body["detail"]}, body
    message = next(d["message"] for d in body["detail"] if d["param"] == param)
    assert param in message or param.replace("_", " ") in message
    assert client.get(f"/svg/{slug}?{query}").status_code == 422
    page = client.get(f"/{slug}?{query}")
    assert page.status_code == 422
    assert f'data-problem-param="{param}"' in page.text
    assert 'id="controls"' in page.text  # the controls still show, to fix the value
    return body
