"""Recording the visit the lecture hall replays (bench/hall.py): Chromium visits /pipeline as a
person does — the page, 20 s of reading (what it fetches at rest), a look at the micro-batches
track, a click there and a drag back and forth around it, a look at a chip and a click — and
every request it made goes into bench/hall_visit.json: when (ms after the visit began), what
(the page, an asset, a state fetched ahead with its tier, a move of the person's own) and its
URL. ``python -m bench.hall --record`` makes a new one on a server of its own."""

from __future__ import annotations

import json
import time
from pathlib import Path

from bench.hall import SCENE, VISIT


def record(base: str, out: Path = VISIT) -> dict:
    """Visit /pipeline in Chromium as a person does and write every request it made."""
    from playwright.sync_api import sync_playwright

    from bench.browser import launch
    events: list[dict] = []
    with sync_playwright() as playwright:
        browser = launch(playwright)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        t0 = [0.0]

        def sent(request):
            if not request.url.startswith(base):
                return
            headers = request.headers
            kind = ("page" if request.resource_type == "document" else
                    "asset" if "/static/" in request.url else
                    "ahead" if headers.get("x-fetch-ahead") else
                    "move" if headers.get("hx-request") else "other")
            events.append({"t_ms": round((time.monotonic() - t0[0]) * 1000), "kind": kind,
                           "tier": headers.get("x-fetch-ahead", ""),
                           "url": request.url[len(base):]})
        page.on("request", sent)
        t0[0] = time.monotonic()
        page.goto(f"{base}/{SCENE}", wait_until="load")
        page.wait_for_timeout(20_000)  # reading: what the page fetches at rest
        slider = page.locator('input[data-target="microbatches"]')
        box = slider.bounding_box()
        y = box["y"] + box["height"] / 2
        page.mouse.move(box["x"] + box["width"] * 0.3, y, steps=8)  # a look at the track …
        page.wait_for_timeout(400)
        page.mouse.down()  # … a click there, then a drag back and forth around it
        for k in range(24):
            x = box["x"] + box["width"] * (0.3 + 0.16 * ((k % 12) / 11 - 0.5))
            page.mouse.move(x, y, steps=2)
            page.wait_for_timeout(60)
        page.mouse.up()
        page.wait_for_timeout(4000)
        chip = page.locator('input[name="schedule"][value="gpipe"]')
        box = chip.evaluate("r => { const b = (r.closest('label') || r).getBoundingClientRect();"
                            " return {x: b.x + b.width / 2, y: b.y + b.height / 2}; }")
        page.mouse.move(box["x"], box["y"], steps=6)  # a look at a chip, then the click
        page.wait_for_timeout(300)
        page.mouse.click(box["x"], box["y"])
        page.wait_for_timeout(6000)
        browser.close()
    visit = {"scene": SCENE, "recorded": time.strftime("%Y-%m-%d"), "events": events}
    out.write_text(json.dumps(visit, indent=1) + "\n")
    return visit
