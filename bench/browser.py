"""Measurements in Chromium: slider → repaint (a drag back and forth, then jumps to states the
page has not shown), and what a first page load transfers."""

from __future__ import annotations

import random
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]

# One move: set the slider, fire `input` as a drag does, and stop the clock when htmx has
# swapped the new stage in and the browser has painted it: the next animation frame renders it,
# and a task queued from that frame runs once the frame is painted.
MEASURE_MOVES = """
async ({selector, values}) => {
  const times = [];
  for (const v of values) {
    const slider = document.querySelector(selector);
    const painted = new Promise(resolve => document.body.addEventListener("htmx:afterSettle",
      () => requestAnimationFrame(() => setTimeout(() => resolve(performance.now()), 0)),
      {once: true}));
    const t0 = performance.now();
    slider.value = String(v);
    slider.dispatchEvent(new Event("input", {bubbles: true}));
    times.push(await painted - t0);
    await new Promise(r => setTimeout(r, 40));
  }
  return times;
}
"""


# The floor: the same htmx round trip and repaint for a fragment of a few elements (the site's
# favicon, a static file swapped into a small box), so the figures can be read against what this
# machine's browser needs for any swap at all.
MEASURE_FLOOR = """
async ({moves}) => {
  const box = document.createElement("div");
  box.id = "bench-floor";
  document.querySelector("main").prepend(box);
  const times = [];
  for (let i = 0; i < moves; i++) {
    const painted = new Promise(resolve => box.addEventListener("htmx:afterSettle",
      () => requestAnimationFrame(() => setTimeout(() => resolve(performance.now()), 0)),
      {once: true}));
    const t0 = performance.now();
    htmx.ajax("GET", "/static/favicon.svg?n=" + (i % 9), {target: "#bench-floor", swap: "innerHTML"});
    times.push(await painted - t0);
    await new Promise(r => setTimeout(r, 40));
  }
  box.remove();
  return times;
}
"""


def control_selector(name: str) -> str:
    """The control a person moves for parameter ``name``: its range input, the range input that
    drives its hidden input (a list or log₂ slider), or its select."""
    return (f'input[type="range"][name="{name}"], input[type="range"][data-target="{name}"], '
            f'input[type="range"][data-log2-for="{name}"], select[name="{name}"]')


def launch(playwright):
    if Path(CHROMIUM).exists():
        return playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    return playwright.chromium.launch(args=ARGS)


def slider_values(low: int, high: int, moves: int) -> list[int]:
    """A drag back and forth across up to 9 neighbouring values, ``moves`` moves long."""
    span = list(range(low, min(high, low + 8) + 1))
    sweep = span + span[-2:0:-1]
    return [sweep[i % len(sweep)] for i in range(1, moves + 1)]


def jump_values(low: int, high: int, seen: list, jumps: int, seed: str) -> list[int]:
    """Up to ``jumps`` slider values the drag did not visit, in a shuffled order (a person
    clicking along the track): states this page has not shown, and that the guesses of a drag
    (its last move repeated) rarely reach."""
    values = [v for v in range(low, high + 1) if v not in set(seen)]
    random.Random(seed).shuffle(values)
    return values[:jumps]


def measure(base: str, scenes, moves: int = 60, jumps: int = 12) -> dict:
    from bench.http_load import percentile
    results = {}
    with sync_playwright() as playwright:
        browser = launch(playwright)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(f"{base}/{scenes[0].slug}", wait_until="networkidle")
        floor = page.evaluate(MEASURE_FLOOR, {"moves": moves})
        results["_floor"] = {"moves": len(floor), "repaint_p50_ms": percentile(floor, 50),
                             "repaint_p95_ms": percentile(floor, 95)}
        page.close()
        for scene in scenes:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            sizes, foreign = [], []

            def finished(request):
                sizes.append(request.sizes())

            page.on("requestfinished", finished)
            page.on("request", lambda r: foreign.append(r.url)
                    if not r.url.startswith((base, "data:", "about:")) else None)
            page.goto(f"{base}/{scene.slug}", wait_until="networkidle")
            # the first load's sizes only: asking the browser for each request's sizes is a
            # round trip that would otherwise load the machine during the slider moves
            page.remove_listener("requestfinished", finished)
            transferred = sum(s["responseBodySize"] + s["responseHeadersSize"] for s in sizes)
            requests = len(sizes)
            selector = control_selector(scene.key_slider)
            control = page.locator(selector).first
            is_select = control.evaluate("el => el.tagName") == "SELECT"
            if is_select:
                options = control.evaluate("el => [...el.options].map(o => o.value)")
                values = [options[i % len(options)] for i in range(1, moves + 1)]
            else:
                low = int(float(control.get_attribute("min")))
                high = int(float(control.get_attribute("max")))
                start = int(float(control.input_value()))
                values = slider_values(max(low, start), high, moves)
            times = page.evaluate(MEASURE_MOVES, {"selector": selector, "values": values})
            jumped = []
            if not is_select:
                targets = jump_values(low, high, values + [start], jumps, scene.slug)
                if len(targets) >= jumps // 2:
                    jumped = page.evaluate(MEASURE_MOVES, {"selector": selector,
                                                           "values": targets})
            results[scene.slug] = {
                "first_load_bytes": transferred, "first_load_requests": requests,
                "foreign_requests": len(foreign), "slider": scene.key_slider,
                "moves": len(times), "repaint_p50_ms": percentile(times, 50),
                "repaint_p95_ms": percentile(times, 95), "jump_ms": jumped}
            page.close()
        browser.close()
    return results
