"""/optimizer in Chromium: a slider repaints the stage and the address, the keyboard steps the
player, and the optimizer's own controls show only for it."""

from __future__ import annotations

import re

import pytest

from playwright.sync_api import expect

from tests.browser.helpers import caption, press, shows_problem

pytestmark = pytest.mark.browser


def test_slider_keyboard_and_dependent_controls(page):
    page.goto(page.base + "/optimizer")
    player = page.locator("[data-player]")
    expect(player).to_have_attribute("data-frames", "25")  # AdamW, mixed, λ > 0: 1 + 3 × 8
    page.locator("#f-steps").fill("5")
    page.wait_for_url(re.compile(r"steps=5"))
    expect(player).to_have_attribute("data-frames", "41")
    expect(page.locator(".deck .step-header").first).to_be_attached()

    press(page, "ArrowRight", "ArrowRight", focus=".deck-frame")
    expect(page.locator("[data-k]")).to_have_text("3")
    expect(page).to_have_url(re.compile(r"frame=2"))
    expect(caption(page)).to_contain_text("w·(1 − ηλ)")
    press(page, "End", focus=None)
    expect(page.locator("[data-k]")).to_have_text("41")

    expect(page.locator("#f-momentum")).to_be_hidden()
    page.locator(".segmented span", has_text=re.compile(r"^Momentum$")).click()
    page.wait_for_url(re.compile(r"optimizer=momentum"))
    expect(page.locator("#f-momentum")).to_be_visible()
    expect(page.locator("#f-beta1")).to_be_hidden()
    expect(page.locator(".deck text", has_text="momentum buffer b").first).to_be_visible()


def test_bad_learning_rate_shows_the_message(page):
    page.goto(page.base + "/optimizer?optimizer=sgd&steps=30")
    page.locator("#f-lr").fill("10")
    shows_problem(page, "lr (10) makes sgd diverge", "lr")
