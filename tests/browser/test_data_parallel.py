"""/data-parallel in Chromium: the log-scale bucket slider, the mode switch, keyboard steps."""

from __future__ import annotations

import pytest

from tests.browser.helpers import caption, drag, press

pytestmark = pytest.mark.browser


def test_bucket_slider_mode_switch_and_keys(page):
    page.goto(page.base + "/data-parallel")
    page.wait_for_selector("svg.deck")
    assert "≤ 25 MiB" in page.locator("svg.deck .title").text_content()
    drag(page, "#f-bucket_mb", "1")                     # 2¹ MiB
    page.wait_for_url("**bucket_mb=2**")
    page.wait_for_function("document.querySelector('svg.deck .title').textContent.includes('≤ 2 MiB')")
    assert page.locator("#o-bucket_mb").inner_text() == "2"
    page.click("label:has-text('FSDP')")
    page.wait_for_url("**mode=fsdp**")
    page.wait_for_function("document.querySelector('svg.deck .title').textContent.includes('FSDP')")
    assert page.locator("[data-field=prefetch]").is_visible()
    assert not page.locator("[data-field=bucket_mb]").is_visible()
    press(page, "End", focus="svg.deck")
    page.wait_for_url("**frame=**")
    assert "hidden" in caption(page).inner_text()
    press(page, "Home", focus=None)
    assert page.locator("svg.deck g.frame.current").get_attribute("data-frame") == "0"
