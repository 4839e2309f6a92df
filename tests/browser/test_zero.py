"""/zero in Chromium: a slider repaints the stage and the URL, the keyboard steps the deck."""

from __future__ import annotations

import pytest

from tests.browser.helpers import UNPROCESSABLE, drag

pytestmark = pytest.mark.browser


def test_slider_repaints_and_keys_step(page):
    page.goto(page.base + "/zero")
    page.wait_for_selector("svg.deck")
    assert "4 ranks" in page.locator("svg.deck .title").text_content()
    drag(page, "#f-dp", "6")
    page.wait_for_url("**dp=6**")
    page.wait_for_function("document.querySelector('svg.deck .title').textContent.includes('6 ranks')")
    page.click("label:has-text('3 · P_os+g+p')")
    page.wait_for_url("**stage=3**")
    page.wait_for_function("document.querySelector('svg.deck .title').textContent.includes('ZeRO-3')")
    page.locator("svg.deck").click()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.wait_for_url("**frame=2**")
    current = page.locator("svg.deck g.frame.current")
    assert current.get_attribute("data-frame") == "2"
    assert "all-gather layer 1" in page.locator("[data-captions] li:not([hidden])").inner_text().lower()


def test_bad_combination_shows_the_message(page):
    page.goto(page.base + "/zero?stage=0&offload=nvme")
    assert "needs stage 3" in page.locator(".problems").inner_text()
    page.expect_console_error(UNPROCESSABLE)
