"""Predict, then reveal, in Chromium: g switches predict mode on; each new step (its deck
layer and caption) stays hidden with the scene's question until the guess is typed and Enter
pressed (or → reveals it), then says how far off the guess was; it works in presentation mode
and switches off with g."""

from __future__ import annotations

import re

import pytest

from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def caption(page, k):
    return page.locator(f'[data-captions] > li[data-frame="{k}"]')


def test_predict_hides_the_step_until_the_guess_then_reveals_it(page):
    page.goto(page.base + "/collective?op=all_reduce&world=4&count=8")
    page.locator(".deck-frame").click()
    page.keyboard.press("g")
    expect(page.locator("[data-predict-toggle]")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("html")).to_have_class(re.compile(r"\bpredicting\b"))
    page.keyboard.press("ArrowRight")
    expect(page.locator("[data-k]").first).to_have_text("2")          # frame 1: step 2
    prompt = page.locator(".predict-prompt")
    expect(prompt).to_contain_text("Step 2 — How many elements does rank 0 send in this step?")
    expect(caption(page, 1)).to_be_hidden()
    assert page.locator('svg.deck g.frame[data-frame="1"]').first.get_attribute(
        "display") == "none"
    # → does not step on while the step is hidden: it reveals
    page.locator(".predict-guess").fill("2")
    page.locator(".predict-guess").press("Enter")
    expect(prompt).to_contain_text("It is 2 elements — you said 2: within 5 %")
    expect(caption(page, 1)).to_be_visible()
    assert page.locator('svg.deck g.frame[data-frame="1"]').first.get_attribute(
        "display") is None
    page.locator(".deck-frame").click(position={"x": 5, "y": 5})
    page.keyboard.press("ArrowRight")
    expect(page.locator("[data-k]").first).to_have_text("3")
    expect(caption(page, 2)).to_be_hidden()
    page.keyboard.press("ArrowRight")                     # reveals, stays on step 3 (frame 2)
    expect(page.locator("[data-k]").first).to_have_text("3")
    expect(caption(page, 2)).to_be_visible()
    page.keyboard.press("ArrowLeft")                      # stepping back shows what was seen
    expect(caption(page, 1)).to_be_visible()
    page.keyboard.press("g")
    expect(page.locator("html")).not_to_have_class(re.compile(r"\bpredicting\b"))


def test_predict_in_presentation_mode(page):
    page.goto(page.base + "/pipeline?present=1")
    page.keyboard.press("g")
    page.keyboard.press("ArrowRight")
    prompt = page.locator(".predict-prompt")
    expect(prompt).to_contain_text("ranks are idle")
    size = float(prompt.evaluate("el => getComputedStyle(el).fontSize").rstrip("px"))
    assert size >= 22
    page.keyboard.press("Enter")
    expect(caption(page, 1)).to_be_visible()
