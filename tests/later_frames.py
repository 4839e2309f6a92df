"""The later frames of a page's deck as static/js/player.js makes them (app/draw/deck.py,
later_frames): for tests that read every frame's markup."""

from __future__ import annotations

import html
import re

from app.draw.deck import PIECE_CLOSE, PIECE_OPEN, PIECE_SEP

LAYER = re.compile(r"(<g [^>]*?) data-markup='([^']*)'></g>")
TOKEN = re.compile(f"{PIECE_OPEN}(\\d+){PIECE_CLOSE}")


def expand(template: str) -> list[str]:
    """Each later layer as player.js makes it (its start tag, its elements, its close): the
    attribute's text unescaped as a browser reads it, each piece's number replaced by the
    piece."""
    listed = re.search(r"<svg [^>]*?data-pieces='([^']*)'", template)
    pieces = html.unescape(listed.group(1)).split(PIECE_SEP) if listed else []
    out = []
    for start, text in LAYER.findall(template):
        body = TOKEN.sub(lambda m: pieces[int(m.group(1))], html.unescape(text))
        out.append(f"{start}>{body}</g>")
    return out


def every_frame(markup: str) -> str:
    """A page's deck with its later frames made and in place of their template."""
    if '<template class="deck-later">' not in markup:
        return markup
    deck, later = markup.split('<template class="deck-later">', 1)
    end = later.index("</template>") + len("</template>")
    return deck + "".join(expand(later[:end])) + later[end:]
