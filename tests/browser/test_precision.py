"""/precision in Chromium: typing a number repaints its bits, a too-large one says why, the
loss-scaling player steps with the keyboard."""

from __future__ import annotations

import re

import pytest

from playwright.sync_api import expect

from tests.browser.helpers import caption, press, shows_problem

pytestmark = pytest.mark.browser


def test_typed_value_slider_and_keyboard(page):
    page.goto(page.base + "/precision")
    page.locator("#f-value").fill("3.14159")
    page.wait_for_url(re.compile(r"value=3.14159"))
    expect(page.locator(".figure-panel svg").first).to_contain_text("3.14159 in six formats")
    expect(page.locator('[data-format="bf16"]')).to_contain_text("= 3.140625")

    page.locator("#f-init_scale_log2").fill("20")
    page.wait_for_url(re.compile(r"init_scale_log2=20"))
    expect(caption(page)).to_contain_text("2^20")

    press(page, "ArrowRight", focus=".deck-frame")
    expect(page.locator("[data-k]")).to_have_text("2")
    expect(page).to_have_url(re.compile(r"frame=1"))
    expect(page.locator(".deck-frame .frame.current .step-header")).to_contain_text("Training step 1 of 24")


def test_too_large_for_the_format(page):
    page.goto(page.base + "/precision?format=fp16")
    page.locator("#f-value").fill("70000")
    shows_problem(page, "value (70000) is too large for FP16", "value")
    page.locator("#f-format").select_option("bf16")
    expect(page.locator('[data-format="bf16"]')).to_contain_text("= 70144")
