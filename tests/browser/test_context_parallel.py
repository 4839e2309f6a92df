"""The long-context chapter in real Chromium: from the course to the page, the cp slider that
repaints the stage and the URL, stepping with the keys, the embed, a bad choice shown inline,
and the player on a projector screen. The `page` fixture fails any test that logs a console
error or requests another origin."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import (BOX_SETTLED, caption, drag, embedded, from_the_course, open_page, position,
                                   press, shows_problem, smallest_label)

pytestmark = pytest.mark.browser


def test_from_the_course_to_the_chapter(page):
    from_the_course(page, "Long context: context parallelism", "context-parallel", exact=True)
    assert page.locator("svg.deck").is_visible()
    assert position(page) == "step 1 of 6 · who holds what"


def test_the_cp_slider_repaints_the_stage_and_the_url(page):
    page.goto(page.base + "/context-parallel")
    first = page.locator("[data-captions] > li[data-frame='0']")
    before = first.inner_text()
    drag(page, 'input[data-target="cp"]', "1")      # the stops: 2, 3, 4 …: position 1 is cp 3
    shows_problem(page, "example_seq (16) must be divisible by cp (3)")   # 16 tokens over 3 ranks
    drag(page, 'input[data-target="cp"]', "5")      # cp 8
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("cp 8"))
    expect(page).to_have_url(re.compile("cp=8"))
    expect(first).not_to_have_text(before)
    assert "on 8 ranks" in page.locator("[data-captions] > li[data-frame='0']").inner_text()


def test_keyboard_steps_through_the_ring(page):
    page.goto(page.base + "/context-parallel")
    press(page, "ArrowRight", "ArrowRight")
    assert position(page) == "step 3 of 6 · ring step 2 of 4"
    assert caption(page).inner_text().startswith("Ring step 2 of 4")
    expect(page).to_have_url(re.compile("frame=2"))
    assert page.locator('svg.deck g.frame[data-frame="2"].current').count() == 1
    press(page, "End", focus=None)
    assert "equals plain softmax" in caption(page).inner_text()


def test_embed_opens_inside_an_iframe(page):
    snippet, frame = embedded(page, "/context-parallel?frame=3")
    assert "/embed/context-parallel?" in snippet
    assert frame.locator("#controls").count() == 0


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_the_player_fits_a_projector_screen(page, size):
    open_page(page, "/context-parallel?frame=2", *size)
    # the deck is laid out for its box: measured once box.js has swapped in this window's
    page.wait_for_function(BOX_SETTLED)
    box = page.locator("[data-player]").bounding_box()
    assert box["height"] <= size[1], box
    assert smallest_label(page) * 960 / 1040 >= 12


def test_the_examples_length_shows_while_the_sequence_is_long(page):
    """seq is the model's sequence; up to 256 tokens the worked example runs all of them and
    its own length hides (and is not sent), above it shows."""
    page.goto(page.base + "/context-parallel")
    example = page.locator('[data-show-above="seq 256"]')
    expect(example).to_be_visible()
    seq = page.locator("#f-seq")
    seq.fill("32")
    seq.dispatch_event("input")
    expect(example).to_be_hidden()
    expect(page).to_have_url(re.compile(r"seq=32"))
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("32 tokens"))
    assert "example_seq" not in page.url
    seq.fill("8192")
    seq.dispatch_event("input")
    expect(example).to_be_visible()
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("16 tokens"))
