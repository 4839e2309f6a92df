"""/checkpointing in Chromium: a slider repaints the stage and the address, the recompute
choice shows its own control, the keyboard steps the player."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import caption, press

pytestmark = pytest.mark.browser


def test_slider_recompute_and_keyboard(page):
    page.goto(page.base + "/checkpointing")
    page.locator("#f-micro_batch").fill("8")
    page.wait_for_url(re.compile(r"micro_batch=8"))
    expect(page.locator(".deck .title")).to_contain_text("b = 8")

    expect(page.locator("#f-recompute_layers")).to_be_visible()
    page.locator(".segmented span", has_text=re.compile(r"^selective$")).click()
    page.wait_for_url(re.compile(r"recompute=selective"))
    expect(page.locator("#f-recompute_layers")).to_be_hidden()
    expect(page.locator(".deck text", has_text="selective this run")).to_be_visible()

    press(page, "ArrowRight", "ArrowRight", "ArrowRight", focus=".deck-frame")
    expect(page.locator("[data-k]")).to_have_text("4")
    expect(page).to_have_url(re.compile(r"frame=3"))
    expect(caption(page)).to_contain_text("Forward, layer 3")
    expect(page.locator(".deck-frame .frame.current .step-header")).to_contain_text("Forward")
