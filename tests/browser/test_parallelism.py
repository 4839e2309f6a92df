"""/parallelism in real Chromium: from the course, a slider repaints the stage and the URL, keys
step the player, hovering a rank lights up its groups, the DDP script steps, the embed plays.
The `page` fixture fails any test that logs a console error or requests another origin."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import (caption, drag, embedded, from_the_course, position, press,
                                   shows_problem)

pytestmark = pytest.mark.browser


def test_from_the_course_to_the_scene(page):
    from_the_course(page, "The five parallelisms and the 5D rank layout", "parallelism",
                    exact=True)
    assert page.locator("svg.deck").is_visible()
    assert position(page) == "step 1 of 13 · the mesh"


def test_a_slider_repaints_the_stage_and_the_url(page):
    page.goto(page.base + "/parallelism")
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("^8 ranks"))
    drag(page, 'input[data-target="dp"]', "2")          # positions: 1, 2, 4 → dp = 4
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("^16 ranks"))
    expect(page).to_have_url(re.compile("dp=4"))
    assert page.locator("svg.deck .mrank").count() == 16


def test_keys_step_the_player_and_the_caption(page):
    page.goto(page.base + "/parallelism")
    assert caption(page).inner_text().startswith("8 ranks = tp 2")
    press(page, "ArrowRight")
    assert position(page) == "step 2 of 13 · tp groups"
    assert "tensor-parallel groups of 2" in caption(page).inner_text()
    expect(page).to_have_url(re.compile("frame=1"))
    assert page.locator('svg.deck g.frame.current[data-axis="tp"]').is_visible()
    press(page, "End", focus=None)
    assert caption(page).inner_text().startswith("Launch: torchrun")


def test_hovering_a_rank_lights_up_its_groups(page):
    page.goto(page.base + "/parallelism?frame=1")   # the tp groups
    page.locator('svg.deck .mrank[data-rank="5"]').hover()
    tp = page.locator("svg.deck .mrank.hl-tp")
    expect(tp).to_have_count(2)
    assert sorted(int(x) for x in tp.evaluate_all("els => els.map(e => e.dataset.rank)")) == [4, 5]
    dp = page.locator("svg.deck .mrank.hl-dp").evaluate_all("els => els.map(e => e.dataset.rank)")
    assert sorted(map(int, dp)) == [5, 7]
    pp = page.locator("svg.deck .mrank.hl-pp").evaluate_all("els => els.map(e => e.dataset.rank)")
    assert sorted(map(int, pp)) == [1, 5]
    assert page.locator("svg.deck .mrank.hl-axis").count() == 2     # the frame's axis, tp
    assert page.locator('svg.deck .mrank[data-rank="4"] .s-tp').is_visible()
    page.mouse.move(2, 2)
    expect(page.locator("svg.deck .mrank.hl-tp")).to_have_count(0)


def test_the_ddp_script_steps(page):
    page.goto(page.base + "/parallelism")
    steps = page.locator(".ddp-step")
    expect(steps.nth(0)).to_be_visible()
    assert not steps.nth(1).is_visible()
    page.locator('[data-ddp="next"]').click()
    expect(steps.nth(1)).to_be_visible()
    assert "LOCAL_RANK" in steps.nth(1).inner_text()


def test_bad_order_shows_inline_and_recovers(page):
    page.goto(page.base + "/parallelism")
    field = page.locator('input[name="order"]')
    field.fill("tp-tp-ep-dp-pp")
    shows_problem(page, "repeats tp")
    field.fill("tp-cp-ep-dp-pp")
    page.locator("svg.deck").wait_for()


def test_embed_plays_inside_an_iframe(page):
    snippet, frame = embedded(page, "/parallelism")
    assert "/embed/parallelism" in snippet
    frame.locator("[data-act=next]").click()
    expect(frame.locator("[data-position]")).to_have_text("step 2 of 13 · tp groups")
    assert frame.locator("#controls").count() == 0
