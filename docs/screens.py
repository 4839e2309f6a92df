"""Screenshots of every scene in the classroom views (issue 13), into docs/screens/:

    <slug>-1920x1080.png   <slug>-1280x720.png   <slug>-present.png (1280×720, ?present=1)
    <slug>-embed.png (/embed at 960×540)          <slug>-phone.png (390×844, touch)

Each is taken once static/js/box.js has laid the deck out for its frame (until then the deck
is kept unseen, tests/browser/helpers.py's BOX_SETTLED) — on a phone with the deck, its
caption and the player scrolled into view, under the parameters — and scaled down and reduced
to 256 colours with Pillow so it stays under 150 KB.
Run against a live server:  PYTHONPATH=. .venv/bin/python docs/screens.py http://127.0.0.1:8000
(followed by scene slugs to take only those)
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

from app.main import SCENES
from tests.browser.helpers import BOX_SETTLED

OUT = Path(__file__).resolve().parent / "screens"
VIEWS = [  # name, viewport, page (slug → path), touch
    ("1920x1080", (1920, 1080), "/{slug}", False),
    ("1280x720", (1280, 720), "/{slug}", False),
    ("present", (1280, 720), "/{slug}?present=1", False),
    ("embed", (960, 540), "/embed/{slug}", False),
    ("phone", (390, 844), "/{slug}", True),
]
LIMIT = 150_000


def small_png(png: bytes, width: int) -> bytes:
    try:
        from PIL import Image
    except ImportError:  # without Pillow the screenshot is kept as it is (it may be larger)
        return png
    image = Image.open(io.BytesIO(png)).convert("RGB")
    for w in (width, int(width * 0.8), int(width * 0.65)):
        scaled = image.resize((w, round(image.height * w / image.width)), Image.LANCZOS)
        out = io.BytesIO()
        scaled.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, "PNG", optimize=True)
        if out.tell() < LIMIT:
            break
    return out.getvalue()


def main(base: str, only: tuple[str, ...] = ()) -> None:
    OUT.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                     args=["--no-sandbox", "--disable-gpu"])
        for name, (w, h), path, touch in VIEWS:
            context = browser.new_context(viewport={"width": w, "height": h}, has_touch=touch,
                                          is_mobile=touch)
            page = context.new_page()
            for scene in (s for s in SCENES if not only or s.slug in only):
                page.goto(base + path.format(slug=scene.slug))
                page.wait_for_load_state("load")
                page.wait_for_function(BOX_SETTLED)
                if touch:   # the parameters come first on a phone: the deck below them
                    page.evaluate("document.querySelector('[data-player]')"
                                  ".scrollIntoView({block: 'start'})")
                page.wait_for_timeout(200)
                png = page.screenshot()
                target = OUT / f"{scene.slug}-{name}.png"
                target.write_bytes(small_png(png, min(w, 1280) if not touch else w))
                print(target.relative_to(OUT.parent.parent), target.stat().st_size)
            context.close()
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000", tuple(sys.argv[2:]))
