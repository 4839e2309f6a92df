"""Deck type as the students and the lecturer see it (issue 27, DESIGN principle 14): each deck
measured as Chromium renders it in the box each view really gives it — the 960 × 540 embed with
its caption and player, the page at 1280 × 720 and 1920 × 1080, presentation mode at both, a
phone (390 × 844, touch).

Every visible label counts: each ``<text>`` or ``<tspan>`` leaf with text in the deck that is
not in a hidden frame, not ``display: none`` or ``visibility: hidden``, not under an ancestor of
opacity 0, not covered (below) and not clipped out of the deck's frame (a phone's frame scrolls a wider deck: what
lies outside it is not seen). Its size is its computed font size times the scale of the SVG on
screen (``getScreenCTM``). Two visible labels overlap when their boxes, trimmed of the font's
line gap, share more than a pixel each way. A label under an opaque shape painted after it is
not seen either (a deck whose step draws its changed cells over the old ones hides the old
numbers that way): it is neither counted nor checked for overlaps. The deck's frame keeps one size over the steps
(the caption box holds a fixed number of lines, the player bar one row), so stepping never
lays the deck out again.

Shared by tests/browser/test_deck_legibility.py (the targets, sampled) and bench/legibility.py
(every scene × view × step, as a table).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.browser.helpers import BOX_SETTLED

VIEWPORT_PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True,
                  "has_touch": True, "device_scale_factor": 3}


@dataclass(frozen=True)
class View:
    name: str
    context: dict
    """Playwright's new_context arguments"""
    url: str
    """``{slug}`` and ``{query}`` (with its leading ``?`` or empty) filled in"""
    targets: dict[str, float] = field(default_factory=dict)
    """issue 27's: ``p5``, ``median`` and ``min`` (every label) in px"""


def _viewport(w: int, h: int) -> dict:
    return {"viewport": {"width": w, "height": h}}


VIEWS = (
    View("embed", _viewport(960, 540), "/embed/{slug}{query}", {"p5": 12, "median": 14}),
    View("page-1280", _viewport(1280, 720), "/{slug}{query}", {"p5": 11}),
    View("page-1920", _viewport(1920, 1080), "/{slug}{query}", {"p5": 11}),
    View("present-1280", _viewport(1280, 720), "/{slug}{query}{sep}present=1", {"min": 14}),
    View("present-1920", _viewport(1920, 1080), "/{slug}{query}{sep}present=1", {"min": 18}),
    View("phone", VIEWPORT_PHONE, "/{slug}{query}", {"min": 9}),
)
"""Where a deck is shown, and what its labels must reach there (the page at 1920 × 1080 is held
to the 1280 × 720 page's target)."""

MEASURE = """(frames) => {
  const root = document.querySelector('[data-player]');
  const frameBox = root.querySelector('.deck-frame').getBoundingClientRect();
  const player = root.__player;
  const n = player ? player.frames : 1;
  const ks = frames === null ? [...Array(n).keys()] : frames.filter(k => k < n);
  const out = [];
  const hidden = (el, svg) => {
    for (let e = el; e && e !== svg.parentNode; e = e.parentElement) {
      const style = getComputedStyle(e);
      if (e.getAttribute('display') === 'none' || style.display === 'none' ||
          parseFloat(style.opacity) === 0) return true;
    }
    return getComputedStyle(el).visibility !== 'visible';
  };
  // Which labels an opaque shape painted after them covers (at the label's middle): the
  // shapes of the step on screen, bucketed on a 48 px grid, each with its place in paint
  // order; a path is asked whether its fill holds the point.
  const occluders = svg0 => {
    const order = new Map();
    let n = 0;
    for (const e of svg0.getElementsByTagName('*')) order.set(e, n++);
    const grid = new Map();
    for (const e of svg0.querySelectorAll('rect, path, circle, ellipse, polygon')) {
      if (e.closest('defs, pattern, template, [display="none"]')) continue;
      const r = e.getBoundingClientRect();
      if (r.width < 2 || r.height < 2) continue;
      const style = getComputedStyle(e);
      if (style.fill === 'none' || style.display === 'none' || style.visibility !== 'visible' ||
          parseFloat(style.fillOpacity) * parseFloat(style.opacity) < 0.9) continue;
      const item = {e: e, r: r, order: order.get(e)};
      for (let gx = Math.floor(r.left / 48); gx <= Math.floor(r.right / 48); gx++)
        for (let gy = Math.floor(r.top / 48); gy <= Math.floor(r.bottom / 48); gy++) {
          const key = gx + ',' + gy;
          if (!grid.has(key)) grid.set(key, []);
          grid.get(key).push(item);
        }
    }
    return {order: order, grid: grid};
  };
  const coveredBy = (label, occ, memo) => {
    if (memo.has(label)) return memo.get(label);
    const [l, t, r, b] = label.box;
    const x = (l + r) / 2, y = (t + b) / 2;
    const mine = occ.order.get(label.el) || 0;
    let hit = false;
    for (const item of occ.grid.get(Math.floor(x / 48) + ',' + Math.floor(y / 48)) || []) {
      if (item.order <= mine || x < item.r.left || x > item.r.right || y < item.r.top ||
          y > item.r.bottom || (label.el.closest('text') || label.el).contains(item.e)) continue;
      if (item.e instanceof SVGPathElement || item.e instanceof SVGCircleElement ||
          item.e instanceof SVGPolygonElement || item.e instanceof SVGEllipseElement) {
        const m = item.e.getScreenCTM().inverse();
        const p = new DOMPoint(x, y).matrixTransform(m);
        if (!item.e.isPointInFill(p)) continue;
      }
      hit = true;
      break;
    }
    memo.set(label, hit);
    return hit;
  };
  for (const k of ks) {
    if (player) player.show(k, false);
    const svg = root.querySelector('svg.deck');
    const labels = [];
    for (const el of svg.querySelectorAll('text, tspan')) {
      if (el.querySelector('tspan')) continue;                 // not a leaf
      const text = el.textContent.trim();
      if (!text) continue;
      const r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      if (r.right <= frameBox.left || r.left >= frameBox.right ||
          r.bottom <= frameBox.top || r.top >= frameBox.bottom) continue;   // clipped out
      if (hidden(el, svg)) continue;
      const m = (el.closest('text') || el).getScreenCTM();
      const px = parseFloat(getComputedStyle(el).fontSize) * Math.sqrt(Math.abs(m.a * m.d - m.b * m.c));
      labels.push({text: text.slice(0, 40), px: Math.round(px * 100) / 100,
                   box: [r.left, r.top, r.right, r.bottom], el: el});
    }
    // a label that a later, opaque shape covers (a step's new cell over the old one) is not
    // seen: it is neither counted nor overlaps anything
    const occ = occluders(svg), memo = new Map();
    const seen = labels.filter(l => !coveredBy(l, occ, memo));
    labels.length = 0;
    labels.push(...seen);
    // overlaps: boxes trimmed of the line gap (a fifth of the size above, a tenth below)
    const trimmed = labels.map(l => [l.box[0] + 0.5, l.box[1] + 0.2 * l.px, l.box[2] - 0.5,
                                     l.box[3] - 0.1 * l.px]);
    const order = [...trimmed.keys()].sort((a, b) => trimmed[a][0] - trimmed[b][0]);
    const overlaps = [];
    for (let i = 0; i < order.length && overlaps.length < 8; i++) {
      const a = trimmed[order[i]];
      for (let j = i + 1; j < order.length; j++) {
        const b = trimmed[order[j]];
        if (b[0] >= a[2] - 1) break;
        const dx = Math.min(a[2], b[2]) - Math.max(a[0], b[0]);
        const dy = Math.min(a[3], b[3]) - Math.max(a[1], b[1]);
        if (dx > 1 && dy > 1)
          overlaps.push([labels[order[i]].text, labels[order[j]].text]);
      }
    }
    const now = root.querySelector('.deck-frame').getBoundingClientRect();
    out.push({frame: k, sizes: labels.map(l => l.px), overlaps: overlaps,
              box: [Math.round(now.width), Math.round(now.height)],
              smallest: labels.slice().sort((a, b) => a.px - b.px).slice(0, 4)
                              .map(l => [l.px, l.text])});
  }
  return out;
}"""


def url_of(view: View, slug: str, query: str = "") -> str:
    """``query``: a scene's query, "" or starting with "?"."""
    return view.url.format(slug=slug, query=query, sep="&" if query else "?")


def open_view(page, base: str, view: View, slug: str, query: str = "") -> int:
    """Load the scene in ``view`` and wait until its deck is laid out for its frame; the number
    of steps."""
    response = page.goto(base + url_of(view, slug, query))
    assert response is not None and response.status == 200, \
        f"{view.name} {slug}{query}: {response and response.status}"
    page.wait_for_selector("[data-player] svg.deck", state="attached")
    page.wait_for_function(BOX_SETTLED)
    return page.evaluate("() => { const r = document.querySelector('[data-player]');"
                         " return r && r.__player ? r.__player.frames : 1; }")


def measure(page, frames: list[int] | None = None) -> list[dict]:
    """[{frame, sizes, overlaps, smallest}] of the deck on ``page`` (opened by
    :func:`open_view`) at ``frames`` (-1: the last; None: every step)."""
    if frames is not None:
        n = page.evaluate("() => { const r = document.querySelector('[data-player]');"
                          " return r && r.__player ? r.__player.frames : 1; }")
        frames = sorted({k if k >= 0 else n + k for k in frames if -n <= k < n})
    return page.evaluate(MEASURE, frames)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def summary(result: list[dict]) -> dict:
    """The figures of a measurement: labels counted over its frames, their median, 5th
    percentile and smallest, the smallest labels and the overlaps seen."""
    sizes = [s for frame in result for s in frame["sizes"]]
    smallest = sorted((s for frame in result for s in frame["smallest"]), key=lambda s: s[0])
    overlaps = [(frame["frame"], *pair) for frame in result for pair in frame["overlaps"]]
    frames = {tuple(frame["box"]) for frame in result}
    return {"labels": len(sizes), "median": percentile(sizes, 0.5),
            "p5": percentile(sizes, 0.05), "min": min(sizes) if sizes else float("nan"),
            "smallest": smallest[:4], "overlaps": overlaps[:6],
            "frames": sorted(frames)}


def misses(view: View, figures: dict) -> list[str]:
    """What ``figures`` (a :func:`summary`) misses of ``view``'s targets: [] when it meets them."""
    out = []
    if not figures["labels"]:
        out.append("no label measured")
    for name, target in view.targets.items():
        value = figures[name]
        if not value >= target - 0.005:
            out.append(f"{name} {value:.1f} px < {target} px")
    if figures["overlaps"]:
        out.append(f"labels overlap: {figures['overlaps'][:3]}")
    if len(figures["frames"]) > 1:
        out.append(f"the deck's frame changes size from step to step: {figures['frames']}")
    return out
