"""Where a jump's time goes (issue 19): a slider moved to a state the page has not shown and
the server has not rendered, split into the browser's work before the request, the server's
render (its Server-Timing header), the network (queueing and loopback transfer), htmx's
handling, the swap (HTML parse and DOM insertion) and layout + paint.

Fetching ahead is switched off on these pages (both of stage.js's queues are replaced by no-ops
before the page's scripts run), so every jump goes to the server as it would without it: this
is what fetching ahead saves, and what a jump it did not foresee still costs. The timestamps
come from the page itself: htmx's events, the Resource Timing entry of the request (with its
serverTiming) and the frame after the swap.
"""

from __future__ import annotations

from statistics import median

from bench.browser import control_selector, jump_values, launch, scene_draggable, with_painted

NO_FETCH_AHEAD = """
Object.defineProperty(window, "ShardscopeStage", {configurable: true,
  set(stage) { stage.fetchAhead = stage.fetchAtRest = () => {}; this.__stage = stage; },
  get() { return this.__stage; }});
"""

# One jump, split. The Resource Timing entry is read after the paint (it is queued by then).
MEASURE_SPLIT = with_painted("""
async ({selector, values}) => {
  const out = [];
  for (const v of values) {
    const slider = document.querySelector(selector);
    const marks = {};
    const on = (name, key) => document.body.addEventListener(name, e => {
      if (!marks[key]) marks[key] = performance.now();
      if (name === "htmx:beforeRequest") marks.url = e.detail.pathInfo.finalRequestPath;
    }, {once: true});
    on("htmx:beforeRequest", "request");
    on("htmx:beforeSwap", "response");
    on("htmx:afterSwap", "swapped");
    const painted = paintedAfter(document.body);
    const t0 = performance.now();
    slider.value = String(v);
    slider.dispatchEvent(new Event("input", {bubbles: true}));
    const end = await painted;
    const url = new URL(marks.url, location.href).href;
    const entry = performance.getEntriesByName(url).filter(e => e.startTime >= t0 - 1).pop();
    if (entry) {
      const server = entry.serverTiming.length ? entry.serverTiming[0].duration : 0;
      out.push({
        total: end - t0,
        before_request: marks.request - t0,
        server: server,
        network: Math.max(0, entry.responseStart - marks.request - server),
        download: entry.responseEnd - entry.responseStart,
        htmx: Math.max(0, marks.response - entry.responseEnd),
        swap: marks.swapped - marks.response,
        layout_paint: end - marks.swapped,
        bytes: entry.decodedBodySize,
      });
    }
    await new Promise(r => setTimeout(r, 60));
  }
  return out;
}
""")

PARTS = ("before_request", "server", "network", "download", "htmx", "swap", "layout_paint")


def measure(base: str, scenes, jumps: int = 8) -> dict:
    """The median of each part of ``jumps`` jumps on every scene's key slider."""
    from playwright.sync_api import sync_playwright
    results = {}
    with sync_playwright() as playwright:
        browser = launch(playwright)
        for scene in (s for s in scenes if scene_draggable(s)):
            context = browser.new_context(viewport={"width": 1600, "height": 1000})
            context.add_init_script(NO_FETCH_AHEAD)
            page = context.new_page()
            page.goto(f"{base}/{scene.slug}", wait_until="networkidle")
            selector = control_selector(scene.key_slider)
            control = page.locator(selector).first
            low = int(float(control.get_attribute("min")))
            high = int(float(control.get_attribute("max")))
            start = int(float(control.input_value()))
            targets = jump_values(low, high, [start], jumps, scene.slug + "/split")
            rows = page.evaluate(MEASURE_SPLIT, {"selector": selector, "values": targets})
            if rows:
                results[scene.slug] = {"jumps": len(rows),
                                       **{k: median(r[k] for r in rows)
                                          for k in ("total", "bytes", *PARTS)}}
            context.close()
        browser.close()
    return results


def rows(split: dict) -> list[str]:
    """The table of where a jump's time goes (medians, ms), for docs/performance.md."""
    if not split:
        return []
    out = ["| scene (key slider) | jump, total | before the request | server render | network "
           "| download | htmx | swap (parse + insert) | layout + paint | fragment |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for slug, m in sorted(split.items(), key=lambda kv: -kv[1]["total"]):
        out.append(f"| `/{slug}` | {m['total']:.0f} | " + " | ".join(
            f"{m[k]:.1f}" for k in PARTS) + f" | {m['bytes'] / 1000:.0f} KB |")
    return out
