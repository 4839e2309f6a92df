"""Screenshots of the lecturer's tools (issue 27) for docs/lecturer-tools.md, into docs/screens/:

    lecturer-presenter-both.png   the presenting window and the presenter view side by side
    lecturer-presenter.png        the presenter view at 1920×1080
    lecturer-pen.png              presentation mode with the pen's ink and the pointer
    lecturer-contrast.png         a page in the high-contrast theme (1280×720)
    lecturer-export-menu.png      the Export menu with a step range and a size
    lecturer-pdf-page.png         a 16:9 PDF page (the Beamer export), drawn

Run against a live server:  PYTHONPATH=. .venv/bin/python docs/lecturer_screens.py http://127.0.0.1:8000
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

from docs.screens import small_png

OUT = Path(__file__).resolve().parent / "screens"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


def opened(browser, base: str, path: str):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(base + path)
    page.wait_for_load_state("load")
    return page


def save(name: str, png: bytes, width: int) -> None:
    (OUT / f"lecturer-{name}.png").write_bytes(small_png(png, width))
    print(name)


def both(browser, base: str) -> None:
    """The audience's window (1280×720, presenting) and the presenter view (1280×800) a lecturer
    would have on the projector and on the laptop, stepped from the presenter view."""
    from PIL import Image
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    audience = context.new_page()
    audience.goto(base + "/pipeline?present=1")
    audience.wait_for_load_state("load")
    with context.expect_page() as opened:
        audience.keyboard.press("n")
    view = opened.value
    view.set_viewport_size({"width": 1280, "height": 800})
    view.wait_for_load_state("load")
    view.wait_for_function("window.ShardscopePresenter && window.ShardscopePresenter.current()")
    for _ in range(9):
        view.keyboard.press("PageDown")
    view.wait_for_timeout(800)
    left = Image.open(io.BytesIO(audience.screenshot()))
    right = Image.open(io.BytesIO(view.screenshot()))
    save("presenter", view.screenshot(), 1280)
    gap = 24
    canvas = Image.new("RGB", (left.width + gap + right.width, max(left.height, right.height)),
                       "#d9dce1")
    canvas.paste(left, (0, (canvas.height - left.height) // 2))
    canvas.paste(right, (left.width + gap, 0))
    out = io.BytesIO()
    canvas.save(out, "PNG")
    save("presenter-both", out.getvalue(), 1600)
    context.close()


def pen(browser, base: str) -> None:
    page = opened(browser, base, "/collective?present=1&frame=3")
    page.keyboard.press("d")
    box = page.locator("#stage svg.deck").bounding_box()
    x, y = box["x"] + box["width"] * 0.62, box["y"] + box["height"] * 0.2
    page.mouse.move(x, y)
    page.mouse.down()
    for i in range(1, 40):   # a circle round a cell
        import math
        a = 2 * math.pi * i / 38
        page.mouse.move(x + 60 * math.cos(a) - 60, y + 26 * math.sin(a))
    page.mouse.up()
    page.keyboard.press("l")
    page.mouse.move(box["x"] + box["width"] * 0.28, box["y"] + box["height"] * 0.42)
    page.wait_for_timeout(200)
    save("pen", page.screenshot(), 1280)
    page.close()


def contrast(browser, base: str) -> None:
    page = opened(browser, base, "/tensor-parallel?theme=contrast&frame=3")
    save("contrast", page.screenshot(), 1280)
    page.close()


def export_menu(browser, base: str) -> None:
    page = opened(browser, base, "/moe")
    page.click(".export-menu > summary")
    page.fill("[data-export-first]", "3")
    page.fill("[data-export-last]", "6")
    page.select_option("[data-export-width]", "1920")
    box = page.locator(".export-list").bounding_box()
    clip = {"x": max(0, box["x"] - 360), "y": max(0, box["y"] - 60),
            "width": min(1280, box["width"] + 380), "height": box["height"] + 80}
    save("export-menu", page.screenshot(clip=clip), 900)
    page.close()


def pdf_page(base: str) -> None:
    from app.export import raster
    from app.export.frames import slide_svgs
    from app.main import SCENES
    from app.params import parse
    from app.scene import trace_of
    scene = next(s for s in SCENES if s.slug == "moe")
    params = parse(scene.params, {})
    svg = next(slide_svgs(scene, params, trace_of(scene, params), range(3, 4)))
    save("pdf-page", raster.png(svg, 1280), 1100)


def main(base: str) -> None:
    OUT.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        both(browser, base)
        pen(browser, base)
        contrast(browser, base)
        export_menu(browser, base)
        browser.close()
    pdf_page(base)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000")
