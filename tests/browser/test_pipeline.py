"""/pipeline in Chromium: slider → new stage and URL, stepping with the keyboard, the chunks
control following the schedule, hover arrows, no console errors and nothing off-origin."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.browser


def caption(page) -> str:
    return page.locator("[data-captions] li:not([hidden])").inner_text()


def test_sliders_keys_and_hover(page):
    page.goto(page.base + "/pipeline?schedule=1f1b&stages=4&microbatches=8")
    assert page.locator("svg.pipeline-deck").is_visible()
    assert caption(page).startswith("Before: 1F1B on 4 ranks")

    # the keyboard steps the time cursor; the caption and the address follow
    page.locator("svg.pipeline-deck").click(position={"x": 5, "y": 5})
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert caption(page).startswith("t = 1: rank 0 runs 0F1")
    assert "frame=2" in page.url
    page.keyboard.press("End")
    assert caption(page).startswith("Done at t = 33")

    # the micro-batch slider picks from its list: 8 → 16 redraws the stage and the address
    slider = page.locator("#f-microbatches")
    with page.expect_response(re.compile(r"/pipeline\?.*microbatches=16")):
        slider.evaluate("(el) => { el.value = String(el.dataset.values.split(' ').indexOf('16'));"
                        " el.dispatchEvent(new Event('input', {bubbles: true})); }")
    page.wait_for_function("document.querySelector('[data-captions] li').textContent.includes('16 micro-batches')")
    assert "microbatches=16" in page.url
    assert "16 micro-batches" in page.locator("svg.pipeline-deck .title").text_content()

    # hovering a pass draws arrows to what it waits for and to what waits for it
    page.keyboard.press("End")
    page.locator('svg.pipeline-deck g.pp[data-pass]').nth(20).hover()
    assert page.locator("svg.pipeline-deck .pp-hover .dep").count() >= 1


def test_chunks_follow_the_schedule(page):
    page.goto(page.base + "/pipeline?schedule=1f1b")
    chunks = page.locator('[data-show-when="schedule=interleaved_1f1b"]')
    assert chunks.is_hidden()
    with page.expect_response(re.compile(r"/pipeline\?.*schedule=interleaved_1f1b")):
        page.locator("#controls").get_by_text("Interleaved 1F1B", exact=True).click()
    assert chunks.is_visible()
    page.wait_for_function("location.search.includes('chunks=2')")
    assert "Interleaved 1F1B" in page.locator("svg.pipeline-deck .title").text_content()
    with page.expect_response(re.compile(r"/pipeline\?.*schedule=zbv")):
        page.locator("#controls").get_by_text("ZB-V", exact=True).click()
    assert chunks.is_hidden()
    page.wait_for_function("!location.search.includes('chunks=')")


def test_invalid_combination_shows_the_message(page):
    page.goto(page.base + "/pipeline?schedule=dualpipev&stages=4&microbatches=4")
    page.console_errors.clear()     # the page itself answers 422, which Chromium logs
    assert "at least 2 × stages = 8" in page.locator(".problems").inner_text()
    assert page.locator('[data-field="microbatches"].invalid').count() == 1


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
