"""/train in Chromium: the deck steps through one training step with the keyboard (layers grow,
the caption and the address follow), every rank has its rows, a slider redraws the layout, the
/parallelism mesh lights up a rank's groups, and the real run's button is there."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def caption(page):
    return page.locator("[data-captions] li:not([hidden])")


def shown_frames(page) -> int:
    return page.evaluate("""() => [...document.querySelectorAll('[data-player] svg.deck g.frame')]
        .filter(g => g.getAttribute('display') !== 'none'
                     && getComputedStyle(g).display !== 'none').length""")


def test_the_deck_steps_through_one_training_step(page):
    page.goto(page.base + "/train?tp=2&cp=1&pp=2&dp=2&ep=2")
    deck = page.locator("[data-player] svg.deck")
    expect(caption(page)).to_have_text(re.compile(r"^One step of a 4-block GPT"))
    names = deck.locator("text tspan", has_text=re.compile(r"^rank \d+$"))
    expect(names).to_have_count(8)
    deck.click(position={"x": 5, "y": 5})
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    expect(caption(page)).to_have_text(re.compile(r"^t = [\d.]+ (µs|ms): stage \d \(ranks"))
    expect(page).to_have_url(re.compile(r"frame=3"))
    assert shown_frames(page) == 4                      # layers 0…3: the step so far
    page.keyboard.press("End")
    expect(caption(page)).to_have_text(re.compile(r"^Done at t = "))
    assert shown_frames(page) == int(page.get_attribute("[data-player]", "data-frames"))


def test_a_layout_slider_redraws_the_step(page):
    # 16 ranks are each named where the deck's box has room for it (the page at 1920 × 1080;
    # a smaller box names every second one, docs/legibility.md)
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto(page.base + "/train?tp=2&cp=1&pp=2&dp=2&ep=2")
    slider = page.locator("#f-pp")
    with page.expect_response(re.compile(r"/train\?.*pp=4")):
        slider.evaluate("(el) => { el.value = String(el.dataset.values.split(' ').indexOf('4'));"
                        " el.dispatchEvent(new Event('input', {bubbles: true})); }")
    expect(page).to_have_url(re.compile(r"pp=4"))
    expect(page.locator("[data-player] svg.deck text tspan",
                        has_text=re.compile(r"^rank \d+$"))).to_have_count(16)


def test_the_mesh_lights_up_a_ranks_groups(page):
    page.goto(page.base + "/train?tp=2&cp=1&pp=2&dp=2&ep=2")
    page.locator(".tr-mesh .mrank[data-rank='1']").hover()
    expect(page.locator(".tr-mesh .mrank.hl-tp")).to_have_count(2)     # its TP pair
    expect(page.locator(".tr-mesh .mrank.hl-pp")).to_have_count(2)
    assert page.locator("#verify-title").is_visible() or page.locator("#verify-title").count()
    expect(page.locator('button[hx-post^="/verify/train?"]')).to_be_enabled()
