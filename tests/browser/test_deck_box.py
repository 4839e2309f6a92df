"""A deck laid out for the box it is shown in (issue 27; static/js/box.js): the client measures
its deck's frame and swaps in its bucket's deck once, unseen until then; the defaults are the
buckets of the views' frames (no second request there); a resize, presentation mode and a phone
lay it out again on the same step; the form asks every state for the box, the address bar
leaves it out; A−/A+ reflow the labels and are remembered; ?font= sets the scale."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.draw.box import EMBEDS, PAGE

SCENE = "memory"
SETTLED = "() => window.ShardscopeBox && window.ShardscopeBox.settled()"


def boxed_requests(page) -> list[str]:
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url) if "box=" in r.url else None)
    return seen


def deck(page) -> dict:
    return page.evaluate("""() => { const s = document.querySelector('[data-player] svg.deck');
        const f = s.parentNode;
        return {box: s.dataset.box, font: parseFloat(s.dataset.font), w: f.clientWidth,
                h: f.clientHeight, k: document.querySelector('[data-player]').__player.k,
                scale: s.getScreenCTM().a, visibility: getComputedStyle(s).visibility}; }""")


def bucket(n: float) -> int:
    return int(n // 40 * 40)


@pytest.mark.parametrize("viewport,path,default", [
    ((960, 540), f"/embed/{SCENE}", EMBEDS["16:9"]),
    ((960, 720), f"/embed/{SCENE}?aspect=4:3", EMBEDS["4:3"]),
    ((1920, 1080), f"/{SCENE}", PAGE),
])
def test_the_defaults_are_the_views_buckets(page, live_server, viewport, path, default):
    """The embed of the Embed dialog's sizes and the page at 1920 × 1080 come drawn for their
    frame: no second request, the deck at one unit a pixel (or a step's rounding more)."""
    page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
    asked = boxed_requests(page)
    page.goto(live_server + path)
    page.wait_for_function(SETTLED)
    d = deck(page)
    assert d["box"] == default.key, d
    assert not [u for u in asked if "/embed/" in u], asked      # no deck asked for again
    assert 1 <= d["scale"] < 1.1


def test_a_page_swaps_in_its_bucket_unseen(page, live_server):
    """At 1280 × 720 the default (1920 × 1080's) does not fit: one request for the frame's
    bucket, then the deck at one unit a pixel — and no painted frame ever shows the deck drawn
    for the other box (sampled before every paint)."""
    page.set_viewport_size({"width": 1280, "height": 720})
    page.add_init_script("""(() => {
        window.__seen = [];
        const tick = () => {
          const s = document.querySelector('[data-player] svg.deck');
          if (s) window.__seen.push([s.dataset.box, getComputedStyle(s).visibility]);
          if (!(window.ShardscopeBox && window.ShardscopeBox.settled())) requestAnimationFrame(tick);
        };
        requestAnimationFrame(tick);
      })()""")
    asked = []

    def slow(route):
        asked.append(route.request.url)
        page.wait_for_timeout(400)
        route.continue_()

    page.route(re.compile(rf".*/embed/{SCENE}\?.*box=.*"), slow)
    page.goto(live_server + f"/{SCENE}?frame=3")
    page.wait_for_function(SETTLED)
    after = deck(page)
    assert after["visibility"] == "visible"
    assert after["box"] == f"{bucket(after['w'])}x{bucket(after['h'])}" != PAGE.key, after
    assert after["k"] == 3                                     # the same step
    assert len(asked) == 1 and f"box={after['box']}" in asked[0]
    assert 1 <= after["scale"] < 1.1
    seen = page.evaluate("window.__seen")
    assert any(box == PAGE.key for box, _ in seen)             # it was there, …
    assert all(shown == "hidden" for box, shown in seen if box == PAGE.key), seen   # … unseen


def test_resize_and_presentation_lay_out_again(page, live_server):
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto(live_server + f"/{SCENE}?frame=2")
    page.wait_for_function(SETTLED)
    assert deck(page)["box"] == PAGE.key
    page.set_viewport_size({"width": 1366, "height": 768})
    page.wait_for_function(f"() => document.querySelector('svg.deck').dataset.box !== '{PAGE.key}'"
                           " && window.ShardscopeBox.settled()")
    d = deck(page)
    assert d["box"] == f"{bucket(d['w'])}x{bucket(d['h'])}" and d["k"] == 2
    page.keyboard.press("p")                                    # presentation mode
    page.wait_for_function(f"() => document.querySelector('svg.deck').dataset.box !== '{d['box']}'")
    page.wait_for_function(SETTLED)
    p = deck(page)
    assert p["w"] > d["w"] and p["box"] == f"{bucket(p['w'])}x{bucket(p['h'])}" and p["k"] == 2


def test_every_state_is_asked_for_the_box_and_the_address_leaves_it_out(page, live_server):
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(live_server + f"/{SCENE}")
    page.wait_for_function(SETTLED)
    box = deck(page)["box"]
    assert page.input_value('#controls input[name="box"]') == box
    asked = []
    page.on("request", lambda r: asked.append(r.url) if r.headers.get("hx-request") else None)
    page.select_option('#controls select[name="dp"]', "4")
    page.wait_for_function("() => location.search.includes('dp=4')")
    page.wait_for_function(SETTLED)
    assert deck(page)["box"] == box
    assert "box=" not in page.evaluate("location.search")
    assert any(f"box={box}" in u and "dp=4" in u for u in asked) or page.evaluate(
        f"() => window.ShardscopeStage.keptUrls().some(u => u.includes('box={box}') && u.includes('dp=4'))")


def test_a_plus_reflows_the_labels_and_is_remembered(page, live_server):
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(live_server + f"/{SCENE}?frame=4")
    page.wait_for_function(SETTLED)
    size = lambda: page.evaluate("() => parseFloat(getComputedStyle(document.querySelector("
                                 "'svg.deck .frame.current .step-header')).fontSize)")
    before, box = size(), deck(page)["box"]
    page.click("[data-font-step='1']")
    page.wait_for_function("() => document.querySelector('svg.deck').dataset.font === '1.15'")
    page.wait_for_function(SETTLED)
    after = deck(page)
    assert size() > before * 1.1 and after["box"] == box and after["k"] == 4
    assert 1 <= after["scale"] < 1.1                              # reflowed, not scaled
    assert page.evaluate("localStorage.getItem('shardscope-font')") == "1.15"
    page.goto(live_server + f"/embed/{SCENE}")                   # remembered per browser
    page.wait_for_function(SETTLED)
    assert deck(page)["font"] == 1.15
    page.keyboard.press("-")
    page.wait_for_function("() => document.querySelector('svg.deck').dataset.font === '1'")


def test_font_in_the_address_is_drawn_at_once(page, live_server):
    page.set_viewport_size({"width": 960, "height": 540})
    asked = boxed_requests(page)
    page.goto(live_server + f"/embed/{SCENE}?font=1.5")
    page.wait_for_function(SETTLED)
    assert deck(page)["font"] == 1.5
    assert not [u for u in asked if "/embed/" in u], asked
    expect(page.locator("[data-font-step='1']")).to_be_visible()


def test_a_phone_scrolls_a_wider_deck_in_its_frame(browser, live_server):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                  has_touch=True)
    page = context.new_page()
    page.goto(live_server + f"/{SCENE}")
    page.wait_for_function(SETTLED)
    d = page.evaluate("""() => { const s = document.querySelector('svg.deck'); const f = s.parentNode;
        return [f.clientWidth, f.scrollWidth, s.viewBox.baseVal.width, s.getScreenCTM().a,
                document.documentElement.scrollWidth]; }""")
    context.close()
    frame_w, scroll_w, drawn_w, scale, page_w = d
    assert scroll_w > frame_w and abs(scroll_w - drawn_w) < 2 and scale == pytest.approx(1, abs=0.02)
    assert page_w <= 390                                  # the page itself does not scroll sideways
