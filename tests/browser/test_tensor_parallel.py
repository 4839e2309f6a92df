"""/tensor-parallel in Chromium: move the rank slider, switch block and sequence parallelism,
step with the keyboard; the stage and the address bar follow, and nothing errs or leaves the
origin (the `page` fixture checks both)."""

from __future__ import annotations

import re

import pytest

from playwright.sync_api import expect

from tests.browser.helpers import caption, frame_shown, press, shows_problem

pytestmark = pytest.mark.browser


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
    press(page, "ArrowRight", "ArrowRight", focus="svg.deck")
    assert frame_shown(page) == 2
    page.wait_for_url(re.compile(r"frame=2"))
    assert caption(page).inner_text().startswith("All-gather")
    press(page, "End", focus=None)
    assert frame_shown(page) == 20
    assert "max |Δ|" in page.locator("svg.deck g.frame.current").text_content()


def test_bad_combination_shows_the_problem_and_keeps_the_controls(page):
    page.goto(page.base + "/tensor-parallel?block=embedding&tp=4&vocab=10")
    shows_problem(page, "tp (4) must divide vocab (10)", "vocab")
