"""/zero in Chromium: a slider repaints the stage and the URL, the keyboard steps the deck."""

from __future__ import annotations

import pytest

from tests.browser.helpers import caption, drag, press, shows_problem

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
    press(page, "ArrowRight", "ArrowRight", focus="svg.deck")
    page.wait_for_url("**frame=2**")
    current = page.locator("svg.deck g.frame.current")
    assert current.get_attribute("data-frame") == "2"
    assert "all-gather layer 1" in caption(page).inner_text().lower()


def test_bad_combination_shows_the_message(page):
    page.goto(page.base + "/zero?stage=0&offload=nvme")
    shows_problem(page, "needs stage 3")
