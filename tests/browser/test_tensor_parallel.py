"""/tensor-parallel in Chromium: move the rank slider, switch block and sequence parallelism,
step with the keyboard; the stage and the address bar follow, and nothing errs or leaves the
origin (the `page` fixture checks both)."""

from __future__ import annotations

import re

import pytest

from playwright.sync_api import expect

from tests.browser.helpers import UNPROCESSABLE

pytestmark = pytest.mark.browser


def frame_shown(page) -> int:
    return int(page.locator(".player [data-k]").inner_text()) - 1   # the frame: step k + 1 is shown


def test_slider_block_and_keyboard(page):
    page.goto(page.base + "/tensor-parallel")
    stage = page.locator("#stage")
    assert stage.locator("[data-player]").get_attribute("data-frames") == "9"   # column, tp 2

    # drag tp to 4: the ffn slider stays a multiple of it and the stage re-renders
    page.locator("#f-tp").fill("4")
    page.wait_for_url(re.compile(r"tp=4"))
    page.wait_for_function("document.querySelector('#stage').textContent.includes('on 4 ranks')")
    assert page.locator("svg.deck circle").count() >= 4
    assert int(page.locator("#f-ffn").input_value()) % 4 == 0

    # the MLP with sequence parallelism: tokens snap to multiples of tp, the deck grows
    page.locator("label:has(input[name=block][value=mlp])").click()
    page.wait_for_url(re.compile(r"block=mlp"))
    page.locator("label:has(input[name=sequence_parallel][value=true])").click()
    page.wait_for_url(re.compile(r"sequence_parallel=true"))
    page.wait_for_function("document.querySelector('#stage [data-player]').dataset.frames == '21'")
    # the panels below the fold render once scrolled to (content-visibility: auto)
    panel = page.locator("#stage .panel").first
    panel.scroll_into_view_if_needed()
    expect(panel).to_contain_text("reduce-scatter", use_inner_text=True)

    # step with the keyboard: the caption and the address bar follow
    page.locator("svg.deck").click()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert frame_shown(page) == 2
    page.wait_for_url(re.compile(r"frame=2"))
    assert page.locator(".captions li:not([hidden])").inner_text().startswith("All-gather")
    page.keyboard.press("End")
    assert frame_shown(page) == 20
    assert "max |Δ|" in page.locator("svg.deck g.frame.current").text_content()


def test_bad_combination_shows_the_problem_and_keeps_the_controls(page):
    page.goto(page.base + "/tensor-parallel?block=embedding&tp=4&vocab=10")
    box = page.locator(".problems")
    assert "tp (4) must divide vocab (10)" in box.inner_text()
    assert page.locator('[data-field="vocab"].invalid').count() == 1
    page.expect_console_error(UNPROCESSABLE)
