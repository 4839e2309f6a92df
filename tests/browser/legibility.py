"""Measure a deck's type as a projector shows it: the deck scaled to 960 px wide, every visible
``<text>``'s font size times the SVG's scale on screen (getScreenCTM), frame by frame.

Shared by tests/browser/test_deck_legibility.py and bench/legibility.py (which prints a table
for every scene and state)."""

from __future__ import annotations

WIDTH = 960
"""The width a deck is shown at when measured (DESIGN principle 14)."""

MEASURE = """(frames) => {
  const root = document.querySelector('[data-player]');
  const svg = root.querySelector('svg.deck');
  svg.style.width = '%dpx'; svg.style.height = 'auto'; svg.style.maxWidth = 'none';
  const player = root.__player;
  const out = [];
  const n = player ? player.frames : 1;
  const ks = frames === null ? [...Array(n).keys()] : frames.filter(k => k < n);
  for (const k of ks) {
    if (player) player.show(k, false);
    const sizes = [];
    const small = [];
    for (const t of svg.querySelectorAll('text')) {
      if (!t.textContent.trim()) continue;
      const box = t.getBoundingClientRect();
      if (box.width === 0 && box.height === 0) continue;   // not shown in this frame
      const style = getComputedStyle(t);
      if (style.visibility === 'hidden' || style.display === 'none') continue;
      let hidden = false;
      for (let e = t; e && e !== svg; e = e.parentElement) {
        if (e.getAttribute('display') === 'none' || getComputedStyle(e).opacity === '0') { hidden = true; break; }
      }
      if (hidden) continue;
      const m = t.getScreenCTM();
      const scale = Math.sqrt(Math.abs(m.a * m.d - m.b * m.c));
      const px = parseFloat(style.fontSize) * scale;
      sizes.push(px);
      if (px < 10 && small.length < 8) small.push([Math.round(px * 10) / 10, t.textContent.slice(0, 30)]);
    }
    out.push({frame: k, sizes: sizes, small: small});
  }
  return out;
}""" % WIDTH


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def measure(page, base: str, path: str, frames: list[int] | None = (0, 1, 2, -1)):
    """[{frame, sizes, small}] for ``path`` (a scene's page and query); ``frames`` picks steps
    (-1: the last), None every step."""
    page.set_viewport_size({"width": 1280, "height": 900})
    response = page.goto(base + path)
    assert response is not None and response.status == 200, f"{path}: {response and response.status}"
    page.wait_for_selector("svg.deck")
    if frames is not None:
        n = page.evaluate("() => { const r = document.querySelector('[data-player]');"
                          " return r && r.__player ? r.__player.frames : 1; }")
        frames = sorted({k if k >= 0 else n + k for k in frames})
    return page.evaluate(MEASURE, None if frames is None else list(frames))


def summary(result) -> dict:
    sizes = [s for frame in result for s in frame["sizes"]]
    return {"texts": len(sizes), "median": percentile(sizes, 0.5), "p5": percentile(sizes, 0.05),
            "min": min(sizes) if sizes else float("nan"),
            "small": [s for frame in result for s in frame["small"]][:6]}
