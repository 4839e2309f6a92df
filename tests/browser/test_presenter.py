"""The presenter view (issue 27): /<scene>/presenter?…, or the key n in presentation mode, opens
in a second window with the current step, the next step's preview, the caption as speaker
notes, a timer and the step list; the two windows stay in step both ways (BroadcastChannel)
and a clicker's keys (PageUp/PageDown, arrows, space) work in either."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def step(page) -> int:
    """The frame (from 0) a presenting page shows: its player bar says step k + 1."""
    return int(page.inner_text("#stage [data-player-bar] [data-k]")) - 1


def presenter_step(view) -> int:
    return int(view.inner_text("[data-pv-step]")) - 1


def ready(view):
    view.wait_for_load_state("load")
    view.wait_for_function("window.ShardscopePresenter && window.ShardscopePresenter.current()")


def notes(view) -> str:
    return view.locator("[data-pv-notes] > li:not([hidden])").inner_text().strip()


@pytest.fixture
def lecture(page):
    """A presenting window of /moe and its presenter view, opened with n."""
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(page.base + "/moe?present=1")
    page.wait_for_load_state("load")
    page.keyboard.press("ArrowRight")
    with page.context.expect_page() as opened:
        page.keyboard.press("n")
    view = opened.value
    errors: list[str] = []
    view.on("pageerror", lambda e: errors.append(str(e)))
    ready(view)
    captions = page.evaluate("fetch('/api/moe').then(r => r.json()).then(j => j.frames.map(f => f.caption))")
    yield page, view, captions
    assert not errors, errors


def test_n_opens_the_presenter_view_at_the_step_on_screen(lecture):
    page, view, captions = lecture
    assert re.search(r"/moe/presenter\?.*&frame=1$", view.url)
    assert presenter_step(view) == 1
    assert notes(view) == captions[1].strip()
    # the next step's preview shows step 3, the step list has every step, the current marked
    expect(view.locator("[data-pv-next-label]")).to_have_text("step 3")
    next_frame = view.frame_locator("[data-pv-next]")
    expect(next_frame.locator("svg.deck g.frame.current")).to_have_attribute("data-frame", "2")
    items = view.locator("[data-go]")
    assert items.count() == len(captions)
    assert items.nth(1).get_attribute("aria-current") == "step"
    expect(items.nth(2).locator("[data-pv-step-unit]")).to_contain_text("MoE layer stage 2 of 7")
    # the timer runs
    first = view.inner_text("[data-pv-elapsed]")
    view.wait_for_timeout(1300)
    assert view.inner_text("[data-pv-elapsed]") != first


def test_the_two_windows_stay_in_step_both_ways(lecture):
    page, view, captions = lecture
    view.keyboard.press("PageDown")                  # a clicker on the presenter's window
    expect(page.locator("#stage [data-player-bar] [data-k]")).to_have_text("3")
    page.keyboard.press("ArrowRight")                # … and on the audience's
    expect(view.locator("[data-pv-step]")).to_have_text("4")
    assert notes(view) == captions[3].strip()
    view.keyboard.press("PageUp")
    view.keyboard.press("ArrowLeft")
    expect(page.locator("#stage [data-player-bar] [data-k]")).to_have_text("2")
    view.locator("[data-go='5']").click()            # a step chosen from the list
    expect(page.locator("#stage [data-player-bar] [data-k]")).to_have_text("6")
    # the clicker's keys work while the current step's frame has the focus, too
    view.locator("[data-pv-current]").click()
    view.keyboard.press("PageDown")
    expect(page.locator("#stage [data-player-bar] [data-k]")).to_have_text("7")
    expect(view.locator("[data-pv-step]")).to_have_text("7")
    # space plays and pauses, in either window
    view.keyboard.press("Home")
    expect(page.locator("#stage [data-player-bar] [data-k]")).to_have_text("1")
    view.keyboard.press(" ")
    expect(page.locator("#stage [data-player-bar] [data-k]")).not_to_have_text("1", timeout=5000)
    view.keyboard.press(" ")
    # b on the presenter blanks the audience's screen
    view.keyboard.press("b")
    expect(page.locator(".blank-screen")).to_be_visible()
    view.keyboard.press("b")
    expect(page.locator(".blank-screen")).to_be_hidden()


def test_the_presenter_follows_a_change_of_the_key_parameter(lecture):
    page, view, _ = lecture
    page.eval_on_selector('#controls [data-field="skew"] input[type=range]', """el => {
        el.value = '3'; el.dispatchEvent(new Event('input', {bubbles: true})); }""")
    view.wait_for_url(re.compile(r"/moe/presenter\?.*skew=3"), timeout=30000)
    ready(view)
    view.keyboard.press("ArrowRight")
    expect(page.locator("#stage [data-player-bar] [data-k]")).to_have_text("2")


def test_presenter_view_alone_steps_and_links_to_no_one(page):
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto(page.base + "/pipeline/presenter?schedule=1f1b&stages=2&microbatches=2&frame=2")
    ready(page)
    assert presenter_step(page) == 2
    page.keyboard.press("End")
    last = page.locator("[data-go]").count() - 1
    expect(page.locator("[data-pv-step]")).to_have_text(str(last + 1))
    expect(page.locator("[data-pv-next-label]")).to_have_text("the end")
    assert "frame=" + str(last) in page.url
    # one screen: the current step, the notes and the list on it
    for part in ("[data-pv-current]", "[data-pv-notes]", "[data-pv-next]", ".pv-steps"):
        box = page.locator(part).bounding_box()
        assert box and box["y"] >= 0 and box["y"] + box["height"] <= 1081, (part, box)
