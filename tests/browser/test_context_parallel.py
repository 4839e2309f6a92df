"""The long-context chapter in real Chromium: from the course to the page, the cp slider that
repaints the stage and the URL, stepping with the keys, the embed, a bad choice shown inline,
and the player on a projector screen. The `page` fixture fails any test that logs a console
error or requests another origin."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import UNPROCESSABLE, drag

pytestmark = pytest.mark.browser


def test_from_the_course_to_the_chapter(page):
    page.goto(page.base + "/")
    page.get_by_role("link", name="Long context: context parallelism", exact=True).first.click()
    page.wait_for_url("**/context-parallel")
    assert page.locator("svg.deck").is_visible()
    assert page.locator("[data-position]").inner_text() == "step 1 of 6 · who holds what"


def test_the_cp_slider_repaints_the_stage_and_the_url(page):
    page.goto(page.base + "/context-parallel")
    caption = page.locator("[data-captions] > li[data-frame='0']")
    before = caption.inner_text()
    drag(page, 'input[data-target="cp"]', "1")      # the stops: 2, 3, 4 …: position 1 is cp 3
    page.locator(".problems").wait_for()            # 16 tokens do not split over 3 ranks
    assert "seq (16) must be divisible by cp (3)" in page.locator(".problems").inner_text()
    drag(page, 'input[data-target="cp"]', "5")      # cp 8
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("cp 8"))
    expect(page).to_have_url(re.compile("cp=8"))
    expect(caption).not_to_have_text(before)
    assert "on 8 ranks" in page.locator("[data-captions] > li[data-frame='0']").inner_text()
    page.expect_console_error(UNPROCESSABLE)


def test_keyboard_steps_through_the_ring(page):
    page.goto(page.base + "/context-parallel")
    caption = page.locator("[data-captions] > li:not([hidden])")
    page.locator("body").click(position={"x": 5, "y": 5})
    for _ in range(2):
        page.keyboard.press("ArrowRight")
    assert page.locator("[data-position]").inner_text() == "step 3 of 6 · ring step 2 of 4"
    assert caption.inner_text().startswith("Ring step 2 of 4")
    expect(page).to_have_url(re.compile("frame=2"))
    assert page.locator('svg.deck g.frame[data-frame="2"].current').count() == 1
    page.keyboard.press("End")
    assert "equals plain softmax" in caption.inner_text()


def test_embed_opens_inside_an_iframe(page):
    page.goto(page.base + "/context-parallel?frame=3")
    page.get_by_role("button", name="Embed").click()
    snippet = page.locator("[data-embed-code]").input_value()
    assert "/embed/context-parallel?" in snippet
    page.get_by_role("button", name="Close").click()
    page.set_content(f"<html><body>{snippet}</body></html>")
    frame = page.frame_locator("iframe")
    frame.locator("svg.deck").wait_for()
    assert frame.locator("#controls").count() == 0


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_the_player_fits_a_projector_screen(page, size):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.goto(page.base + "/context-parallel?frame=2")
    box = page.locator("[data-player]").bounding_box()
    assert box["height"] <= size[1], box
    smallest = page.evaluate("""() => Math.min(...[...document.querySelectorAll(
        'svg.deck text')].map(t => parseFloat(t.getAttribute('font-size') ||
        getComputedStyle(t).fontSize)))""")
    assert smallest * 960 / 1040 >= 12
