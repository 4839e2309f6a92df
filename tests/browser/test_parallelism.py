"""/parallelism in real Chromium: from the course, a slider repaints the stage and the URL, keys
step the player, hovering a rank lights up its groups, the DDP script steps, the embed plays.
The `page` fixture fails any test that logs a console error or requests another origin."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import UNPROCESSABLE, drag

pytestmark = pytest.mark.browser


def test_from_the_course_to_the_scene(page):
    page.goto(page.base + "/")
    page.get_by_role("link", name="The five parallelisms and the 5D rank layout",
                     exact=True).first.click()
    page.wait_for_url("**/parallelism")
    assert page.locator("svg.deck").is_visible()
    assert page.locator("[data-position]").inner_text() == "step 1 of 13 · the mesh"


def test_a_slider_repaints_the_stage_and_the_url(page):
    page.goto(page.base + "/parallelism")
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("^8 ranks"))
    drag(page, 'input[data-target="dp"]', "2")          # positions: 1, 2, 4 → dp = 4
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("^16 ranks"))
    expect(page).to_have_url(re.compile("dp=4"))
    assert page.locator("svg.deck .mrank").count() == 16


def test_keys_step_the_player_and_the_caption(page):
    page.goto(page.base + "/parallelism")
    caption = page.locator("[data-captions] > li:not([hidden])")
    assert caption.inner_text().startswith("8 ranks = tp 2")
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("ArrowRight")
    assert page.locator("[data-position]").inner_text() == "step 2 of 13 · tp groups"
    assert "tensor-parallel groups of 2" in caption.inner_text()
    expect(page).to_have_url(re.compile("frame=1"))
    assert page.locator('svg.deck g.frame.current[data-axis="tp"]').is_visible()
    page.keyboard.press("End")
    assert caption.inner_text().startswith("Launch: torchrun")


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
    page.locator(".problems").wait_for()
    assert "repeats tp" in page.locator(".problems").inner_text()
    field.fill("tp-cp-ep-dp-pp")
    page.locator("svg.deck").wait_for()
    page.expect_console_error(UNPROCESSABLE)


def test_embed_plays_inside_an_iframe(page):
    page.goto(page.base + "/parallelism")
    page.get_by_role("button", name="Embed").click()
    snippet = page.locator("[data-embed-code]").input_value()
    assert "/embed/parallelism" in snippet
    page.get_by_role("button", name="Close").click()
    page.set_content(f"<html><body>{snippet}</body></html>")
    frame = page.frame_locator("iframe")
    frame.locator("svg.deck").wait_for()
    frame.locator("[data-act=next]").click()
    expect(frame.locator("[data-position]")).to_have_text("step 2 of 13 · tp groups")
    assert frame.locator("#controls").count() == 0
