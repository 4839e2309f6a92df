"""Fetching ahead within a budget (issue 29, item 3; DESIGN.md's budgets): a page at rest
fetches at most ~30 states and ~300 KB on the wire; more only on intent — the pointer resting on
a slider's track fetches the state a click there lands on, so the click is answered from memory
—; under Save-Data nothing is fetched ahead at all. (The timings of jumps made this way, also
0.5 s after a page loads, are measured by ``make bench``: bench/intent.py.)"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

REST_STATES, REST_BYTES = 30, 300_000


def fetched_ahead(page) -> list:
    """Every finished request the page made ahead: (tier, URL, bytes on the wire)."""
    done: list = []

    def finished(request):
        tier = request.headers.get("x-fetch-ahead")
        if tier:
            sizes = request.sizes()
            done.append((tier, request.url, sizes["responseBodySize"] + sizes["responseHeadersSize"]))
    page.on("requestfinished", finished)
    return done


def settle(page, most_ms: int = 25_000) -> None:
    for _ in range(most_ms // 100):
        if page.evaluate("() => !!(window.ShardscopeStage && ShardscopeStage.settled() "
                         "&& performance.now() > 1500)"):
            return
        page.wait_for_timeout(100)


def point_at(page, selector: str, value: float) -> tuple[float, float]:
    """Where on the slider's track a click gives ``value`` (the thumb's centre goes there)."""
    return page.evaluate("""([selector, value]) => {
      const s = document.querySelector(selector), box = s.getBoundingClientRect(), thumb = 16;
      const f = (value - s.min) / (s.max - s.min);
      return [box.left + thumb / 2 + f * (box.width - thumb), box.top + box.height / 2];
    }""", [selector, value])


@pytest.mark.parametrize("slug", ["collective", "precision"])
def test_a_page_at_rest_fetches_at_most_30_states_and_300_kb(page, slug):
    # /precision's track has 141 positions, /collective's stages are its heaviest (issue 29:
    # 154 states, 3.8 MB and 110 states, 1.8 MB at rest before)
    ahead = fetched_ahead(page)
    page.goto(f"{page.base}/{slug}")
    settle(page)
    page.wait_for_timeout(1000)  # nothing more comes
    rest = [(url, size) for tier, url, size in ahead if tier == "rest"]
    assert 10 <= len(rest) <= REST_STATES, len(rest)
    assert sum(size for _, size in rest) <= REST_BYTES * 1.1
    assert [t for t, _, _ in ahead if t != "rest"] == []  # nobody moved: no other tier
    spent = page.evaluate("() => ShardscopeStage.spentAtRest()")
    assert spent["states"] == len(rest)


def test_the_state_under_the_pointer_is_fetched_and_the_click_answered_from_memory(page):
    ahead = fetched_ahead(page)
    own: list[str] = []
    page.on("request", lambda r: own.append(r.url) if r.resource_type == "xhr" else None)
    page.goto(page.base + "/pipeline?stages=4")
    page.wait_for_timeout(500)  # 0.5 s after the page loads: little fetched at rest yet
    slider = 'input[name="stages"]'
    high = int(page.locator(slider).get_attribute("max"))
    target = high - 3  # far along the track: no rest plan reaches it this soon
    x, y = point_at(page, slider, target)
    page.mouse.move(x - 60, y, steps=4)
    page.mouse.move(x, y, steps=4)  # the look before the click
    wanted = re.compile(rf"[?&]stages={target}&")
    for _ in range(100):
        if any(wanted.search(u) for u in page.evaluate("() => ShardscopeStage.keptUrls()")):
            break
        page.wait_for_timeout(50)
    intents = [url for tier, url, _ in ahead if tier == "intent"]
    assert intents and wanted.search(intents[0]), intents
    page.mouse.down()
    page.mouse.up()
    expect(page.locator(slider)).to_have_value(str(target))  # the click landed where we looked
    expect(page).to_have_url(wanted)
    assert not [u for u in own if "/pipeline?" in u], own  # swapped in from memory


def test_under_save_data_nothing_is_fetched_ahead(page):
    page.add_init_script("Object.defineProperty(navigator, 'connection', "
                         "{value: {saveData: true}, configurable: true})")
    ahead = fetched_ahead(page)
    page.goto(page.base + "/collective")
    page.wait_for_timeout(2500)
    slider = 'input[name="world"]'
    x, y = point_at(page, slider, 20)
    page.mouse.move(x, y, steps=5)
    page.wait_for_timeout(300)
    before = page.locator(slider).input_value()
    page.locator(slider).focus()
    page.keyboard.press("ArrowRight")  # a move of its own is still answered
    expect(page).to_have_url(re.compile(rf"world={int(before) + 1}&"))
    page.wait_for_timeout(1200)
    assert ahead == []
