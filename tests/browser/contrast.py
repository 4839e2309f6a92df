"""Text contrast measured in the browser from computed colours (WCAG 2.x relative luminance and
contrast ratio, https://www.w3.org/TR/WCAG21/#dfn-contrast-ratio), for the text of SVG figures,
which axe's color-contrast rules do not read.

Each visible text leaf (a ``<text>`` without ``<tspan>``s, or a ``<tspan>``) is held against
what is painted behind its letters: its halo, where it has one wide enough to be its
background (painted under the letters, ``paint-order: stroke``, at least a quarter of an em
wide and opaque: WCAG's "wide border around the letter … would be considered background"),
else the topmost painted shape under the middle of the text (a rank's fill, a cell, the deck's
ground), found with ``elementsFromPoint``. The opacity of the text and of every group around it
is folded in: a faded group is drawn at its opacity over what lies beneath it.
"""

from __future__ import annotations

MEASURE = r"""(scope) => {
  const parse = (c) => {
    const m = /rgba?\(([^)]+)\)/.exec(c || "");
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
  };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const over = (top, alpha, under) => ({r: top.r * alpha + under.r * (1 - alpha),
    g: top.g * alpha + under.g * (1 - alpha), b: top.b * alpha + under.b * (1 - alpha), a: 1});
  const SHAPES = new Set(["rect", "path", "circle", "ellipse", "polygon", "polyline"]);
  // the opacity an element is drawn at, groups around it included, up to its <svg>
  const alphaOf = (el) => {
    let a = 1;
    for (let e = el; e && e.tagName.toLowerCase() !== "svg"; e = e.parentElement) a *= parseFloat(getComputedStyle(e).opacity);
    return a;
  };
  // the colour painted at (x, y) beneath `skip`: the filled shapes there, top to bottom, down to
  // the first opaque one (or the page behind the figure), composited
  const behind = (x, y, svg, skip) => {
    const layers = [];
    let base = {r: 255, g: 255, b: 255, a: 1};
    for (const el of document.elementsFromPoint(x, y)) {
      if (skip.contains(el)) continue;
      const tag = el.tagName.toLowerCase();
      if (SHAPES.has(tag) && svg.contains(el)) {
        const cs = getComputedStyle(el);
        const fill = parse(cs.fill);          // a pattern (hatching) reads as what is under it
        if (!fill || fill.a === 0) continue;
        const a = fill.a * parseFloat(cs.fillOpacity) * alphaOf(el);
        if (a <= 0.02) continue;
        if (a >= 0.999) { base = fill; break; }
        layers.push([fill, a]);
      } else if (!(el instanceof SVGElement)) {
        for (let e = el; e; e = e.parentElement) {
          const bg = parse(getComputedStyle(e).backgroundColor);
          if (bg && bg.a > 0) { base = bg; break; }
        }
        break;
      }
    }
    let c = base;
    for (let i = layers.length - 1; i >= 0; i--) c = over(layers[i][0], layers[i][1], c);
    return c;
  };
  const out = [];
  const root = document.querySelector(scope);
  if (!root) return out;
  for (const svg of root.querySelectorAll("svg")) {
    for (const t of svg.querySelectorAll("text, tspan")) {
      if (t.tagName.toLowerCase() === "text" && t.querySelector("tspan")) continue;
      const text = (t.textContent || "").trim();
      if (!text) continue;
      const box = t.getBoundingClientRect();
      if (box.width < 1 || box.height < 1) continue;
      if (box.bottom < 0 || box.top > innerHeight || box.right < 0 || box.left > innerWidth) continue;
      const cs = getComputedStyle(t);
      if (cs.visibility === "hidden" || t.closest('[display="none"]')) continue;
      const fill = parse(cs.fill);
      if (!fill) continue;
      const x = box.left + box.width / 2, y = box.top + box.height / 2;
      const textEl = t.tagName.toLowerCase() === "tspan" ? t.closest("text") : t;
      const under = behind(x, y, svg, textEl);
      const alpha = alphaOf(t) * fill.a * parseFloat(cs.fillOpacity);
      const stroke = parse(cs.stroke);
      const size = parseFloat(cs.fontSize);
      const halo = stroke && cs.paintOrder.startsWith("stroke") && stroke.a === 1 &&
        parseFloat(cs.strokeOpacity) === 1 && parseFloat(cs.strokeWidth) >= 0.25 * size;
      const ground = halo ? over(stroke, alphaOf(t), under) : under;
      const ink = over(fill, alpha, ground);
      out.push({text: text.slice(0, 40), ratio: Math.round(ratio(ink, ground) * 100) / 100, halo: !!halo,
                fill: cs.fill, ground: `rgb(${Math.round(ground.r)}, ${Math.round(ground.g)}, ${Math.round(ground.b)})`});
    }
  }
  return out;
}"""


def text_contrasts(page, scope: str = "#stage") -> list[dict]:
    """Every visible SVG text leaf under ``scope``: its text, contrast ratio, whether a halo is
    its background, its fill and the colour behind it."""
    return page.evaluate(MEASURE, scope)
