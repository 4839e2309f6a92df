"""One HTML file that plays offline: the scene's embed page (deck, captions, player bar) with
every script and style sheet it loads inlined, the favicon as a data: URL, and a
Content-Security-Policy that forbids any request, so the file shows the same in a browser
without network, inside reveal.js or on a course site."""

from __future__ import annotations

import base64
import re
from functools import lru_cache
from pathlib import Path

from markupsafe import Markup

from app.templating import STATIC, render

OFFLINE_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
               "img-src data:; font-src data:; connect-src 'none'; form-action 'none'")

DROP_SCRIPTS = ("vendor/htmx.min.js", "js/controls.js", "js/stage.js", "js/share.js")
"""Scripts that only fetch new states from the server (an offline file has a single state) or
serve the site's toolbar, which an embed has not."""

# history.replaceState on a file: URL may throw (origin "null"): the player keeps the address
# bar on the current frame, which a saved file does without.
SAFE_HISTORY = ("<script>(function(){var r=history.replaceState.bind(history);"
                "history.replaceState=function(){try{return r.apply(null,arguments);}"
                "catch(e){}};})();</script>")

_SCRIPT = re.compile(r'<script src="/static/([^"?]+)(?:\?[^"]*)?"[^>]*>\s*</script>')
_STYLE = re.compile(r'<link rel="stylesheet" href="/static/([^"?]+)(?:\?[^"]*)?"[^>]*>')
_ICON = re.compile(r'<link rel="icon" href="/static/([^"?]+)(?:\?[^"]*)?"([^>]*)>')
_HREF = re.compile(r'href="/(?!/)')


@lru_cache(maxsize=32)
def _static(path: str) -> str:
    target = (Path(STATIC) / path).resolve()
    if Path(STATIC).resolve() not in target.parents:
        raise ValueError(path)
    return target.read_text(encoding="utf-8")


def embed_page(scene, params, trace, frame: int, extra: dict | None = None, box=None) -> str:
    """The embed page, rendered as ``/embed/<scene>`` renders it (its deck laid out for
    ``box`` where the scene's deck lays out for its box)."""
    ctx = {"scene": scene, "embed": True, **scene.form(), "params": params,
           "values": params.model_dump(), "trace": trace, "problems": [], "frame": frame,
           "verify_info": None, "box": box, **(extra or {}),
           **scene.page_context(params, trace, frame, box)}
    return render(scene.template, None, **ctx)


def offline(page: str, base_url: str = "") -> str:
    """``page`` with its assets inlined and nothing left to fetch. Links to the site (the
    "Open in Shardscope" link) point at ``base_url`` when given."""

    def script(m: re.Match) -> str:
        if m.group(1) in DROP_SCRIPTS:
            return ""
        return f"<script>{_inline_js(_static(m.group(1)))}</script>"

    def style(m: re.Match) -> str:
        return f"<style>{_static(m.group(1))}</style>"

    def icon(m: re.Match) -> str:
        data = base64.b64encode(_static(m.group(1)).encode()).decode()
        return f'<link rel="icon" href="data:image/svg+xml;base64,{data}"{m.group(2)}>'

    page = _SCRIPT.sub(script, page)
    page = _STYLE.sub(style, page)
    page = _ICON.sub(icon, page)
    page = page.replace('<meta charset="utf-8">',
                        f'<meta charset="utf-8">\n  <meta http-equiv="Content-Security-Policy" '
                        f'content="{OFFLINE_CSP}">\n  {SAFE_HISTORY}', 1)
    if base_url:
        page = _HREF.sub(f'href="{base_url.rstrip("/")}/', page)
    return page


def _inline_js(source: str) -> str:
    # a script inlined in HTML ends at the first "</script": none of ours holds one, but be sure
    return Markup(source.replace("</script", "<\\/script"))


def html(scene, params, trace, frame: int, base_url: str = "", extra: dict | None = None,
         box=None) -> str:
    return offline(embed_page(scene, params, trace, frame, extra, box), base_url)
