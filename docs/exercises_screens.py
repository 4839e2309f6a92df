"""Screenshots of the exercises for docs/exercises.md, into docs/exercises/:

    problem.png (a problem, 1280×720)   hint.png (a wrong answer's hint)   solution.png (1920×1080)
    phone.png (390×844)   index.png   sheet.png (the first page of a sheet PDF, with pdftoppm)
    predict.png (a scene in predict mode: the step's result hidden until the room has guessed)

Run against a live server:  PYTHONPATH=. .venv/bin/python docs/exercises_screens.py http://127.0.0.1:8000
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screens import small_png  # noqa: E402  (docs/screens.py: scaled, 256 colours)

OUT = Path(__file__).resolve().parent / "exercises"
PROBLEM = "/exercises/zero-model-states?seed=7"


def shoot(browser, base: str, name: str, path: str, size: tuple[int, int], act=None,
          touch: bool = False, width: int = 1280) -> None:
    context = browser.new_context(viewport={"width": size[0], "height": size[1]},
                                  has_touch=touch, is_mobile=touch)
    page = context.new_page()
    page.goto(base + path)
    page.wait_for_load_state("load")
    if act:
        act(page)
    (OUT / f"{name}.png").write_bytes(small_png(page.screenshot(), min(width, size[0])))
    context.close()


def answer(text: str, button: str = "Check"):
    def act(page):
        if text:
            page.locator("input[name=answer]").first.fill(text)
        page.get_by_role("button", name=button).first.click()
        page.locator(".verdict-box").first.wait_for()
    return act


def predict(page):
    page.keyboard.press("g")              # predict mode on: the step's result is hidden
    page.keyboard.press("ArrowRight")
    page.wait_for_timeout(300)


def main(base: str) -> None:
    OUT.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                     args=["--no-sandbox", "--disable-gpu"])
        shoot(browser, base, "problem", PROBLEM, (1280, 720))
        shoot(browser, base, "hint", PROBLEM, (1280, 720), answer("30 GB"))
        shoot(browser, base, "solution", PROBLEM, (1920, 1080), answer("", "Show solution"),
              width=1600)
        shoot(browser, base, "phone", PROBLEM, (390, 844), answer("41.25 GB"), touch=True,
              width=390)
        shoot(browser, base, "index", "/exercises", (1280, 720))
        shoot(browser, base, "chapter", "/exercises/7?seed=3", (1280, 720))
        shoot(browser, base, "predict", "/pipeline?present=1", (1280, 720), predict)
        browser.close()
    if shutil.which("pdftoppm"):
        with tempfile.TemporaryDirectory() as tmp:
            pdf = Path(tmp) / "sheet.pdf"
            pdf.write_bytes(urllib.request.urlopen(f"{base}/exercises/5/sheet.pdf?seed=7&n=8")
                            .read())
            subprocess.run(["pdftoppm", "-r", "80", "-png", "-f", "1", "-l", "1", str(pdf),
                            str(Path(tmp) / "page")], check=True)
            page = next(Path(tmp).glob("page*.png"))
            (OUT / "sheet.png").write_bytes(small_png(page.read_bytes(), 660))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000")
