"""Measurements in Chromium: slider → repaint (a drag back and forth, then jumps to states the
page has not shown: clicks along the key slider's track and on the chips), and what a first page
load transfers.

Each page is opened as a first visit (a fresh browser context: empty HTTP cache) and left alone
for as long as a person reads it before touching a control, up to READING_S: the page fetches
the states one change away meanwhile (static/js/controls.js, stage.js), and the bench records how
many it had when the moves began and how many jumps still went to the server."""

from __future__ import annotations

import random
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]

# When htmx has swapped new content into ``el`` and the browser has painted it: the next
# animation frame renders it, and a task queued from that frame runs once the frame is painted.
# Every measuring script below starts with it (`with_painted`).
PAINTED = """const paintedAfter = el => new Promise(resolve => el.addEventListener("htmx:afterSettle",
    () => requestAnimationFrame(() => setTimeout(() => resolve(performance.now()), 0)),
    {once: true}));"""


def with_painted(script: str) -> str:
    """``script`` (an async arrow function's source) with :data:`PAINTED` at its top."""
    head, body = script.split("=> {", 1)
    return f"{head}=> {{\n  {PAINTED}{body}"


# One move: set the slider, fire `input` as a drag does, and stop the clock when the new stage
# is painted.
MEASURE_MOVES = with_painted("""
async ({selector, values}) => {
  const times = [];
  for (const v of values) {
    const slider = document.querySelector(selector);
    const painted = paintedAfter(document.body);
    const t0 = performance.now();
    slider.value = String(v);
    slider.dispatchEvent(new Event("input", {bubbles: true}));
    times.push(await painted - t0);
    await new Promise(r => setTimeout(r, 40));
  }
  return times;
}
""")


# The floor: the same htmx round trip and repaint for a fragment of a few elements (the site's
# favicon, a static file swapped into a small box), so the figures can be read against what this
# machine's browser needs for any swap at all.
MEASURE_FLOOR = with_painted("""
async ({moves}) => {
  const box = document.createElement("div");
  box.id = "bench-floor";
  document.querySelector("main").prepend(box);
  const times = [];
  for (let i = 0; i < moves; i++) {
    const painted = paintedAfter(box);
    const t0 = performance.now();
    htmx.ajax("GET", "/static/favicon.svg?n=" + (i % 9), {target: "#bench-floor", swap: "innerHTML"});
    times.push(await painted - t0);
    await new Promise(r => setTimeout(r, 40));
  }
  box.remove();
  return times;
}
""")


# One click on each of ``selectors`` (a chip: a radio's label), timed as a move.
MEASURE_CLICKS = with_painted("""
async ({selectors}) => {
  const times = [];
  for (const sel of selectors) {
    const radio = document.querySelector(sel);
    if (!radio || radio.disabled || radio.checked) continue;
    const painted = paintedAfter(document.body);
    const t0 = performance.now();
    radio.click();
    times.push(await painted - t0);
    await new Promise(r => setTimeout(r, 40));
  }
  return times;
}
""")

READING_S = 12.0
"""How long the bench leaves a freshly opened page alone before it moves a slider, at most: a
person reads the title, the lede and the first caption first. It moves sooner once the page has
fetched every state one change away (ShardscopeStage.settled())."""

SETTLED = "() => !!(window.ShardscopeStage && ShardscopeStage.settled() && performance.now() > 800)"


LOOK_S = 1.5
"""How long a person looks at a new figure before clicking the next chip, at most (the bench
moves on sooner once the page has fetched the states one change away)."""


def read_page(page, most_s: float = READING_S) -> float:
    """Wait as a reading person does (see READING_S); the seconds waited."""
    import time
    t0 = time.monotonic()
    while time.monotonic() - t0 < most_s and not page.evaluate(SETTLED):
        time.sleep(0.1)
    return time.monotonic() - t0


def chip_selectors(page, limit: int = 6) -> list[str]:
    """Up to ``limit`` chips (radios) of the form that are not chosen, one per option, from the
    first chip rows: a click on each lands on a state not shown."""
    return page.evaluate("""(limit) => {
      const out = [];
      document.querySelectorAll('form.controls fieldset.radios').forEach(set => {
        set.querySelectorAll('input[type="radio"]').forEach(r => {
          if (!r.checked && !r.disabled && out.length < limit)
            out.push(`input[type="radio"][name="${r.name}"][value="${r.value}"]`);
        });
      });
      return out;
    }""", limit)


def scene_draggable(scene) -> bool:
    """Whether the scene's key control is a slider (the planner's is a number field: its
    searches are timed by bench/planner.py, its chips here)."""
    from app.params import control_spec
    if not scene.key_slider:
        return False
    spec = control_spec(scene.params, scene.key_slider)
    return spec is not None and spec.kind in ("slider", "log2", "values")


def control_selector(name: str) -> str:
    """The control a person moves for parameter ``name``: its range input, the range input that
    drives its hidden input (a list or log₂ slider), or its select."""
    return (f'input[type="range"][name="{name}"], input[type="range"][data-target="{name}"], '
            f'input[type="range"][data-log2-for="{name}"], select[name="{name}"]')


def launch(playwright):
    if Path(CHROMIUM).exists():
        return playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    return playwright.chromium.launch(args=ARGS)


def slider_values(low: float, high: float, moves: int, step: float = 1) -> list:
    """A drag back and forth across up to 9 neighbouring positions of the slider, ``step``
    apart (a drag's input events land on positions next to one another: on /precision's
    0.1-step slider a move of 1.0 would be ten positions), ``moves`` moves long."""
    count = min(8, int((high - low) / step + 1e-9))
    span = [_position(low + i * step) for i in range(count + 1)]
    sweep = span + span[-2:0:-1]
    return [sweep[i % len(sweep)] for i in range(1, moves + 1)]


def _position(value: float):
    """A slider position as the slider writes it: an int where it is whole, else rounded off
    the float error of ``low + i · step``."""
    value = round(value, 9)
    return int(value) if value == int(value) else value


def slider_step(control) -> float:
    """The ``step`` of a range input (1 where it has none)."""
    try:
        return float(control.get_attribute("step") or 1)
    except ValueError:   # "any"
        return 1.0


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
            context = browser.new_context(viewport={"width": 1600, "height": 1000})
            page = context.new_page()
            sizes, foreign, asked = [], [], []

            ahead = []

            def finished(request):
                # the page and its assets; the states it then fetches at rest are counted apart
                if "x-fetch-ahead" in request.headers:
                    ahead.append(request.sizes()["responseBodySize"])
                else:
                    sizes.append(request.sizes())

            page.on("requestfinished", finished)
            page.on("request", lambda r: foreign.append(r.url)
                    if not r.url.startswith((base, "data:", "about:")) else None)
            page.goto(f"{base}/{scene.slug}", wait_until="load")
            read_s = read_page(page)
            # asking the browser for each request's sizes is a round trip that would otherwise
            # load the machine during the slider moves
            page.remove_listener("requestfinished", finished)
            transferred = sum(s["responseBodySize"] + s["responseHeadersSize"] for s in sizes)
            requests = len(sizes)
            fetched_at_rest = page.evaluate("() => ShardscopeStage.keptCount()")
            times, jumped, values, start = [], [], [], None
            draggable = scene_draggable(scene)
            if draggable:
                selector = control_selector(scene.key_slider)
                control = page.locator(selector).first
                low = int(float(control.get_attribute("min")))
                high = int(float(control.get_attribute("max")))
                start = _position(float(control.input_value()))
                values = slider_values(max(low, start), high, moves, slider_step(control))
                times = page.evaluate(MEASURE_MOVES, {"selector": selector, "values": values})
            # the person's own requests (htmx's XMLHttpRequest) during the jumps: those answered
            # by the server on the spot rather than from what the page fetched ahead
            page.on("request", lambda r: asked.append(r.url) if r.resource_type == "xhr" else None)
            track = 0
            if draggable:
                targets = jump_values(low, high, values + [start], jumps, scene.slug)
                if len(targets) >= jumps // 2:
                    jumped = page.evaluate(MEASURE_MOVES, {"selector": selector,
                                                           "values": targets})
                    track = len(jumped)
            # a person looks at where the track took them before clicking a chip, and at each
            # chip's figure before the next
            for chip in chip_selectors(page):
                read_page(page, LOOK_S)
                jumped += page.evaluate(MEASURE_CLICKS, {"selectors": [chip]})
            results[scene.slug] = {
                "first_load_bytes": transferred, "first_load_requests": requests,
                "foreign_requests": len(foreign), "slider": scene.key_slider,
                "moves": len(times),
                "repaint_p50_ms": percentile(times, 50) if times else None,
                "repaint_p95_ms": percentile(times, 95) if times else None, "jump_ms": jumped,
                "track_jumps": track, "chip_jumps": len(jumped) - track,
                "jump_p50_ms": percentile(jumped, 50) if jumped else None,
                "jump_p95_ms": percentile(jumped, 95) if jumped else None,
                "jumps_from_server": len(asked), "read_s": read_s,
                "fetched_at_rest": fetched_at_rest, "fetched_at_rest_bytes": sum(ahead)}
            context.close()
        browser.close()
    return results
