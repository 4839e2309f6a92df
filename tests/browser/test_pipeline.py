"""/pipeline in Chromium: slider → new stage and URL, stepping with the keyboard, the chunks
control following the schedule, hover arrows, no console errors and nothing off-origin."""

from __future__ import annotations

import re

import pytest

from playwright.sync_api import expect

from tests.browser.helpers import caption, drag_to_value, press, shows_problem

pytestmark = pytest.mark.browser


def test_sliders_keys_and_hover(page):
    page.goto(page.base + "/pipeline?schedule=1f1b&stages=4&microbatches=8")
    assert page.locator("svg.pipeline-deck").is_visible()
    expect(caption(page)).to_have_text(re.compile(r"^Before: 1F1B on 4 ranks"))

    # the keyboard steps the time cursor; the caption and the address follow
    press(page, "ArrowRight", "ArrowRight", focus="svg.pipeline-deck")
    expect(caption(page)).to_have_text(re.compile(r"^t = 1: rank 0 runs 0F1"))
    expect(page).to_have_url(re.compile(r"frame=2"))
    press(page, "End", focus=None)
    expect(caption(page)).to_have_text(re.compile(r"^Done at t = 33"))

    # the micro-batch slider picks from its list: 8 → 16 redraws the stage and the address
    with page.expect_response(re.compile(r"/pipeline\?.*microbatches=16")):
        drag_to_value(page, "#f-microbatches", 16)
    expect(page.locator("svg.pipeline-deck .title")).to_have_text(re.compile("16 micro-batches"))
    expect(page).to_have_url(re.compile(r"microbatches=16"))

    # hovering a pass draws arrows to what it waits for and to what waits for it
    press(page, "End", focus="svg.pipeline-deck")
    expect(caption(page)).to_have_text(re.compile(r"^Done at"))
    page.locator('svg.pipeline-deck g.pp[data-pass]').nth(20).hover()
    expect(page.locator("svg.pipeline-deck .pp-hover .dep").first).to_be_attached()


def test_chunks_follow_the_schedule(page):
    page.goto(page.base + "/pipeline?schedule=1f1b")
    chunks = page.locator('[data-show-for="interleaved_1f1b"][data-show-when="schedule"]')
    assert chunks.is_hidden()
    with page.expect_response(re.compile(r"/pipeline\?.*schedule=interleaved_1f1b")):
        page.locator("#controls").get_by_text("Interleaved 1F1B", exact=True).click()
    expect(chunks).to_be_visible()
    expect(page).to_have_url(re.compile(r"chunks=2"))
    expect(page.locator("svg.pipeline-deck .title")).to_have_text(re.compile("Interleaved 1F1B"))
    with page.expect_response(re.compile(r"/pipeline\?.*schedule=zbv")):
        page.locator("#controls").get_by_text("ZB-V", exact=True).click()
    expect(chunks).to_be_hidden()
    expect(page).not_to_have_url(re.compile(r"chunks="))


def test_invalid_combination_shows_the_message(page):
    page.goto(page.base + "/pipeline?schedule=dualpipev&stages=4&microbatches=4")
    shows_problem(page, "at least 2 × stages = 8", "microbatches")


@pytest.mark.workers
def test_run_on_real_gloo_shows_the_verdict(page):
    """The button starts a real 2-rank job; its fragment polls until the verdict and the
    per-rank order table appear."""
    pytest.importorskip("torch")
    page.goto(page.base + "/pipeline?schedule=1f1b&stages=2&microbatches=3")
    page.get_by_role("button", name="Run on real gloo").click()
    page.wait_for_selector(".job.passed, .job.failed, .job.error", timeout=120_000)
    result = page.locator(".verify-result").inner_text()
    assert "Passed" in result and "every rank ran exactly the simulated order" in result
    assert page.locator(".verify-result tbody tr").count() == 2
