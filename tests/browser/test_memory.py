"""/memory in Chromium: sliders re-render the stage and the URL, the keyboard steps through the
ledger, a preset fills the shape placeholders, bad input highlights its control."""

from __future__ import annotations

import re

import pytest

from tests.browser.helpers import UNPROCESSABLE, caption, press

pytestmark = pytest.mark.browser


def test_slider_keyboard_and_preset(page):
    page.goto(page.base + "/memory")
    stage = page.locator("#stage")
    shown = caption(page)
    assert "does not fit" in shown.inner_text() or "Ψ =" in shown.inner_text()

    # the key slider: micro-batch 1 → 2 re-renders the stage and the address bar
    before = page.locator(".memory-deck").first.inner_html()
    page.locator("#f-micro_batch").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_url(re.compile(r"micro_batch=2"))
    page.wait_for_function(
        "b => document.querySelector('.memory-deck').innerHTML !== b", arg=before)
    assert "micro_batch=2" in page.url and "layers=" not in page.url
    assert stage.locator(".memory-deck").count() == 1

    # keyboard stepping: Home shows the parameters, → adds the gradients
    press(page, "Home", focus=".deck-frame")
    assert "parameters" in shown.inner_text()
    press(page, "ArrowRight", focus=None)
    assert "gradient" in shown.inner_text()
    assert page.locator('g.frame[data-frame="1"]').get_attribute("class") == "frame current"
    # a later layer is not shown: it waits in the deck's template, or hidden once loaded
    assert page.locator('svg.deck g.frame[data-frame="2"]:not([display="none"])').count() == 0
    assert "frame=1" in page.url
    press(page, "ArrowRight", focus=None)
    assert page.locator('svg.deck g.frame[data-frame="2"]').get_attribute("class") \
        == "frame current"
    press(page, "ArrowLeft", focus=None)

    # a preset empties the shape fields and shows its own values as placeholders
    page.locator("#f-preset").select_option("gpt2")
    page.wait_for_url(re.compile(r"preset=gpt2"))
    assert page.locator("#f-layers").get_attribute("placeholder") == "12"
    assert page.locator("#f-hidden").input_value() == ""
    page.wait_for_function(
        "() => document.querySelector('.memory-deck').ariaLabel.startsWith('GPT-2 124M')")


def test_bad_input_highlights_the_control(page):
    page.goto(page.base + "/memory")
    page.locator("#f-pp").fill("5")
    problem = page.locator('[data-problem-param="pp"]')
    problem.wait_for()
    assert "pp (5) must divide layers (32)" in problem.inner_text()
    assert "invalid" in page.locator('[data-field="pp"]').get_attribute("class")
    page.expect_console_error(UNPROCESSABLE)
    page.locator("#f-pp").fill("4")
    page.locator(".memory-deck").wait_for()
    assert page.locator('[data-field="pp"]').get_attribute("class").count("invalid") == 0
