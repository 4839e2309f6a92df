"""The mixture-of-experts chapter in real Chromium: from the course to the page, sliders that
repaint the stage and the URL, stepping with the keys, the embed, a bad choice shown inline.
The `page` fixture fails any test that logs a console error or requests another origin."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import UNPROCESSABLE, drag

pytestmark = pytest.mark.browser


def test_from_the_course_to_the_chapter(page):
    page.goto(page.base + "/")
    page.get_by_role("link", name="Mixture of experts").first.click()
    page.wait_for_url("**/moe")
    assert page.locator("svg.deck").is_visible()
    assert page.locator("[data-position]").inner_text() == "step 1 of 8 · before routing: tokens and router logits"


def test_sliders_repaint_the_stage_and_the_url(page):
    page.goto(page.base + "/moe")
    caption = page.locator("[data-captions] > li[data-frame='0']")
    before = caption.inner_text()
    drag(page, 'input[name="top_k"]', "3")
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("top-3"))
    expect(page).to_have_url(re.compile("top_k=3"))
    drag(page, 'input[name="skew"]', "4")
    expect(page).to_have_url(re.compile("skew=4"))
    expect(caption).not_to_have_text(before)
    assert "skew 4" in page.locator("[data-captions] > li[data-frame='0']").inner_text()


def test_keyboard_steps_through_the_layer(page):
    page.goto(page.base + "/moe")
    caption = page.locator("[data-captions] > li:not([hidden])")
    page.locator("body").click(position={"x": 5, "y": 5})
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    assert page.locator("[data-position]").inner_text() == "step 4 of 8 · MoE layer stage 3 of 7: capacity and drops"
    assert caption.inner_text().startswith("Capacity = ⌈(16/2) · 2/8 · 1⌉ = 2")
    expect(page).to_have_url(re.compile("frame=3"))
    assert page.locator('svg.deck g.frame[data-frame="3"].current').count() == 1
    page.keyboard.press("End")
    assert page.locator("[data-position]").inner_text() == "step 8 of 8 · MoE layer stage 7 of 7: weighted sum: the output"
    assert "max |difference|" in caption.inner_text()
    page.keyboard.press("Home")
    assert page.locator("[data-position]").inner_text() == "step 1 of 8 · before routing: tokens and router logits"


def test_embed_opens_inside_an_iframe(page):
    page.goto(page.base + "/moe?frame=4")
    page.get_by_role("button", name="Embed").click()
    snippet = page.locator("[data-embed-code]").input_value()
    assert "/embed/moe?" in snippet
    page.get_by_role("button", name="Close").click()
    page.set_content(f"<html><body>{snippet}</body></html>")
    frame = page.frame_locator("iframe")
    frame.locator("svg.deck").wait_for()
    assert frame.locator("#controls").count() == 0


def test_a_bad_choice_shows_inline_and_recovers(page):
    page.goto(page.base + "/moe")
    page.select_option('select[name="ep"]', "3")
    page.locator(".problems").wait_for()
    assert "ep (3) must divide experts (8)" in page.locator(".problems").inner_text()
    page.select_option('select[name="ep"]', "4")
    page.locator("svg.deck").wait_for()
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("ep 4"))
    page.expect_console_error(UNPROCESSABLE)


def test_the_player_fits_a_projector_screen(page):
    """1280×720: once the player is scrolled to the top, deck, caption and bar are on screen."""
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(page.base + "/moe?frame=2")
    box = page.locator("[data-player]").bounding_box()
    assert box["height"] <= 720, box
    width = page.locator("svg.deck").bounding_box()["width"]
    smallest = page.evaluate("""() => Math.min(...[...document.querySelectorAll(
        'svg.deck text')].map(t => parseFloat(t.getAttribute('font-size') ||
        getComputedStyle(t).fontSize)))""")
    assert smallest * 960 / 1040 >= 12 and width > 800
