"""Two decks' defects of issue 27, measured as Chromium lays them out:

- /data-parallel: the header ("t = 18.1 ms of 26 ms · event 12 of 23") ran into the deck's
  title ("DDP · 4 ranks · …") at every size and on the home page's thumbnail; and at the event
  where bucket 6's all-reduce ends, the caption said it had finished while the strip drew it
  still all-reducing.
- /moe step 3 (frame 2): the token-to-expert arrows ended in mid-air beside the bins and ran
  through the slots' numbers.
"""

from __future__ import annotations

import re

import pytest

from app.main import SCENES
from tests.browser.helpers import BOX_SETTLED

pytestmark = pytest.mark.browser

OVERLAP = """() => {
  const box = el => { const r = el.getBoundingClientRect(); return {l: r.left, r: r.right, t: r.top, b: r.bottom}; };
  const title = document.querySelector('svg text.title');
  const out = [];
  document.querySelectorAll('svg g.frame').forEach(g => {
    const header = g.querySelector('text.step-header');
    if (!header) return;
    const was = g.getAttribute('display');
    g.removeAttribute('display');
    g.classList.add('current');
    const a = box(header), b = box(title);
    const gap = b.l - a.r;                   // the title sits right of the header
    const apart = a.b <= b.t || b.b <= a.t || gap >= 12;
    if (!apart) out.push([g.dataset.frame, header.textContent, Math.round(gap)]);
    g.classList.remove('current');
    if (was) g.setAttribute('display', was);
  });
  return out;
}"""

LONG = "mode=ddp&dp=64&preset=llama3-405b&bucket_mb=0.25"


@pytest.mark.parametrize("query", ["", LONG, "mode=fsdp&dp=64&preset=llama3-405b"],
                         ids=["default", "long-title", "fsdp"])
def test_data_parallel_header_clears_the_title(page, query):
    for size in ((1920, 1080), (960, 540), (390, 844)):
        page.set_viewport_size({"width": size[0], "height": size[1]})
        page.goto(f"{page.base}/embed/data-parallel?{query}")
        page.wait_for_load_state("load")
        page.evaluate("document.querySelector('[data-player]').__player.load(1e9)")
        assert page.evaluate(OVERLAP) == [], (query, size)


def test_data_parallel_thumbnail_header_clears_the_title(page):
    """The home page's thumbnail is the scene's /svg at its preview query."""
    scene = next(s for s in SCENES if s.slug == "data-parallel")
    page.goto(page.base + "/")
    src = page.locator('img[src^="/svg/data-parallel"]').get_attribute("src")
    assert scene.preview in src
    # the file itself, laid out in the page: the thumbnail is it, scaled
    page.evaluate("""src => fetch(src).then(r => r.text()).then(t => {
        document.body.innerHTML = t.replace(/^<\\?xml[^>]*>/, ''); })""", src)
    assert page.evaluate(OVERLAP) == []


def test_data_parallel_strip_agrees_with_the_caption():
    """At every event, a bucket the caption says has finished its all-reduce is drawn reduced
    (black) in the bucket strip, and one it says started is drawn all-reducing or reduced."""
    from app.params import parse
    from app.scene import trace_of
    from app.scenes.data_parallel.deck import BucketClock
    scene = next(s for s in SCENES if s.slug == "data-parallel")
    for query in ({}, {"bucket_mb": "4"}, {"bucket_mb": "100", "dp": "8"}):
        trace = trace_of(scene, parse(scene.params, query))
        clock = BucketClock(trace)
        buckets = {b.index: b for b in trace.timeline.buckets}
        checked = 0
        for k, frame in enumerate(trace.frames[1:], start=1):
            t = trace.moments[k].t_us
            for n in re.findall(r"finished all-reduce of bucket (\d+)", frame.caption):
                assert clock.state(buckets[int(n)], t)[0] == "reduced", (query, k, frame.caption)
                checked += 1
            for n in re.findall(r"started all-reduce of bucket (\d+)", frame.caption):
                assert clock.state(buckets[int(n)], t)[0] in ("reducing", "reduced"), (query, k)
        assert checked >= 3, (query, checked)


ARROWS = """() => {
  const deck = document.querySelector('#stage svg.deck');
  const current = deck.querySelector('g.frame.current');
  const out = {ends: [], through: []};
  const arrows = [...current.querySelectorAll('.arrows .arrow')];
  const numbers = [...current.querySelectorAll('text tspan, text')].filter(t =>
      (t.tagName === 'tspan' || !t.querySelector('tspan')) &&
      /^\\d+$/.test(t.textContent.trim()) && !t.closest('.arrows'));
  for (const a of arrows) {
    // the tip: the polygon's first point, on screen
    const [x, y] = a.querySelector('polygon').getAttribute('points').split(' ')[0].split(',').map(Number);
    const p = new DOMPoint(x, y + 3).matrixTransform(deck.getScreenCTM());
    const under = document.elementsFromPoint(p.x, p.y).find(el => !a.contains(el) && el !== deck &&
        deck.contains(el) && !el.closest('.arrows') && el.tagName !== 'text' && el.tagName !== 'tspan' &&
        getComputedStyle(el).fill !== 'none');
    const fill = under ? getComputedStyle(under).fill : 'none';
    out.ends.push({tip: [x, y], under: under ? under.tagName + ' ' + (under.getAttribute('class') || '') : null, fill});
    // where the shaft crosses a slot's number, the number is on top
    const path = a.querySelector('path');
    const length = path.getTotalLength();
    for (let s = 0; s <= length; s += 3) {
      const q = path.getPointAtLength(s).matrixTransform(deck.getScreenCTM());
      for (const n of numbers) {
        const r = n.getBoundingClientRect();
        if (q.x < r.left + 2 || q.x > r.right - 2 || q.y < r.top + 2 || q.y > r.bottom - 2) continue;
        const top = document.elementFromPoint(q.x, q.y);
        if (top && a.contains(top)) out.through.push(n.textContent.trim());
      }
    }
  }
  return out;
}"""


@pytest.mark.parametrize("query", ["", "tokens=32&experts=8&top_k=2&ep=2", "top_k=1&experts=4&ep=1"])
def test_moe_arrows_land_on_their_column_and_run_under_the_numbers(page, query):
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto(f"{page.base}/moe?{query}&frame=2&present=1")
    page.wait_for_load_state("load")
    # the deck is laid out for its box: wait until box.js has swapped in this frame's layout
    page.wait_for_function(BOX_SETTLED)
    found = page.evaluate(ARROWS)
    assert found["ends"], "no arrows drawn"
    for end in found["ends"]:
        # just below each tip lies a slot of the bins: the arrow stops on a box, not in the air
        assert end["under"] and end["under"].startswith(("path", "rect")), end
        assert end["fill"] not in ("none", "rgb(255, 255, 255)"), end
    assert found["through"] == []
