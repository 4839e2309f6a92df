"""The mixture-of-experts chapter in real Chromium: from the course to the page, sliders that
repaint the stage and the URL, stepping with the keys, the embed, a bad choice shown inline.
The `page` fixture fails any test that logs a console error or requests another origin."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import (BOX_SETTLED, caption, drag, embedded, from_the_course, open_page, position,
                                   press, shows_problem, smallest_label)

pytestmark = pytest.mark.browser


def test_from_the_course_to_the_chapter(page):
    from_the_course(page, "Mixture of experts", "moe")
    assert page.locator("svg.deck").is_visible()
    assert position(page) == "step 1 of 8 · before routing: tokens and router logits"


def test_sliders_repaint_the_stage_and_the_url(page):
    page.goto(page.base + "/moe")
    first = page.locator("[data-captions] > li[data-frame='0']")
    before = first.inner_text()
    drag(page, 'input[name="top_k"]', "3")
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("top-3"))
    expect(page).to_have_url(re.compile("top_k=3"))
    drag(page, 'input[name="skew"]', "4")
    expect(page).to_have_url(re.compile("skew=4"))
    expect(first).not_to_have_text(before)
    assert "skew 4" in page.locator("[data-captions] > li[data-frame='0']").inner_text()


def test_keyboard_steps_through_the_layer(page):
    page.goto(page.base + "/moe")
    press(page, "ArrowRight", "ArrowRight", "ArrowRight")
    assert position(page) == "step 4 of 8 · MoE layer stage 3 of 7: capacity and drops"
    assert caption(page).inner_text().startswith("Capacity = ⌈(16/2) · 2/8 · 1⌉ = 2")
    expect(page).to_have_url(re.compile("frame=3"))
    assert page.locator('svg.deck g.frame[data-frame="3"].current').count() == 1
    press(page, "End", focus=None)
    assert position(page) == "step 8 of 8 · MoE layer stage 7 of 7: weighted sum: the output"
    assert "max |difference|" in caption(page).inner_text()
    press(page, "Home", focus=None)
    assert position(page) == "step 1 of 8 · before routing: tokens and router logits"


def test_embed_opens_inside_an_iframe(page):
    snippet, frame = embedded(page, "/moe?frame=4")
    assert "/embed/moe?" in snippet
    assert frame.locator("#controls").count() == 0


def test_a_bad_choice_shows_inline_and_recovers(page):
    page.goto(page.base + "/moe")
    page.select_option('select[name="ep"]', "3")
    shows_problem(page, "ep (3) must divide experts (8)")
    page.select_option('select[name="ep"]', "4")
    page.locator("svg.deck").wait_for()
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("ep 4"))


def test_the_player_fits_a_projector_screen(page):
    """1280×720: once the player is scrolled to the top, deck, caption and bar are on screen."""
    open_page(page, "/moe?frame=2", 1280, 720)
    # the deck is laid out for its box: measured once box.js has swapped in this window's
    page.wait_for_function(BOX_SETTLED)
    box = page.locator("[data-player]").bounding_box()
    assert box["height"] <= 720, box
    width = page.locator("svg.deck").bounding_box()["width"]
    assert smallest_label(page) * 960 / 1040 >= 12 and width > 800
