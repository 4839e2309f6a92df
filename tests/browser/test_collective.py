"""The collectives chapter in real Chromium: navigation, sliders, keyboard, embed, download,
a real run, themes, and the page without JavaScript. The `page` fixture fails any test that
logs a console error or requests another origin."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import (caption, embedded, from_the_course, position, press,
                                   shows_problem, slide)

pytestmark = pytest.mark.browser


def test_from_the_course_to_the_chapter(page):
    from_the_course(page, "Collective communication", "collective")
    assert page.locator("svg.deck").is_visible()
    assert position(page) == "step 1 of 7 · before the collective"


def test_moving_a_slider_repaints_the_stage_and_the_url(page):
    page.goto(page.base + "/collective")
    before = page.locator("svg.deck").get_attribute("aria-label")
    slide(page, "world", 6)
    expect(page.locator("svg.deck")).to_have_attribute("aria-label", re.compile("6 ranks"))
    assert page.locator("svg.deck").get_attribute("aria-label") != before
    expect(page).to_have_url(re.compile("world=6"))
    assert position(page) == "step 1 of 11 · before the collective"
    # the op switch: reduce_scatter needs a multiple of 6 elements; the slider keeps it valid
    page.locator("label", has_text="ReduceScatter").click()
    expect(page.locator("svg.deck")).to_have_attribute("aria-label",
                                                       re.compile("^reduce_scatter"))
    count = int(page.locator('input[name="count"]').input_value())
    assert count % 6 == 0
    assert "op=reduce_scatter" in page.url


def test_keyboard_steps_and_plays(page):
    page.goto(page.base + "/collective?world=4&count=8")
    assert caption(page).inner_text().startswith("Before")
    press(page, "ArrowRight")
    assert position(page) == "step 2 of 7 · reduce-scatter, round 1 of 3"
    assert caption(page).inner_text().startswith("Communication step 1 of 6")
    expect(page).to_have_url(re.compile("frame=1"))
    press(page, "End", focus=None)
    assert position(page) == "step 7 of 7 · all-gather, round 3 of 3"
    assert "Done" in caption(page).inner_text()
    press(page, "ArrowLeft", focus=None)
    assert position(page) == "step 6 of 7 · all-gather, round 2 of 3"
    press(page, "Home", " ", focus=None)
    expect(page.locator("[data-k]")).to_have_text("3", timeout=10000)
    press(page, " ", focus=None)
    assert not page.locator(".player.playing").count()


def test_the_url_opens_that_very_step(page):
    page.goto(page.base + "/collective?world=5&count=10&op=all_gather&frame=3")
    assert position(page) == "step 4 of 5 · all-gather, round 3 of 4"
    assert page.locator('svg.deck g.frame[data-frame="4"]').count() == 0  # not drawn yet
    press(page, "ArrowRight", focus=None)
    assert page.locator('svg.deck g.frame[data-frame="4"].current').count() == 1


def test_later_steps_are_made_with_their_shared_parts(page, client):
    """The later frames' template writes an arrow that several steps draw once (app/draw/
    deck.py, later_frames): every step the player makes draws the elements the server wrote
    for it, arrows and header included, and no piece's number is left in the page."""
    from tests.later_frames import expand
    url = "/collective?world=30&count=8"
    fragment = client.get(url, headers={"HX-Request": "true"}).text
    later = fragment.split('<template class="deck-later">', 1)[1]
    assert "data-pieces=" in later
    written = {int(re.search(r'data-frame="(\d+)"', f).group(1)): f for f in expand(later)}
    page.goto(page.base + url)
    for k in (1, 2, 17, 58):
        page.evaluate("k => document.querySelector('[data-player]').__player.show(k, false)", k)
        made = page.evaluate("""k => { const g = document.querySelector(
            `svg.deck g.frame[data-frame="${k}"]`);
            return {arrows: g.querySelectorAll(".arrows .arrow").length,
                    elements: g.querySelectorAll("*").length, text: g.textContent,
                    current: g.classList.contains("current")}; }""", k)
        expected = written[k]
        assert made["current"]
        assert made["arrows"] == expected.count('<g class="arrow"') > 0
        assert made["elements"] == len(re.findall(r"<[a-z]", expected)) - 1
        assert "\ue000" not in made["text"] and "Communication step" in made["text"]


def test_embed_opens_inside_an_iframe(page):
    snippet, frame = embedded(page, "/collective?world=4&count=8")
    assert snippet.startswith("<iframe") and "/embed/collective?" in snippet
    assert frame.locator("[data-player]").count() == 1
    assert frame.locator("#controls").count() == 0


def test_download_svg_of_the_current_step(page):
    page.goto(page.base + "/collective?world=4&count=8")
    press(page, "ArrowRight", "ArrowRight", focus=None)
    with page.expect_download() as info:
        page.get_by_role("link", name="Download SVG").click()
    path = info.value.path()
    text = open(path, encoding="utf-8").read()
    assert text.startswith("<?xml") and "<svg" in text
    assert "Communication step 2 of 6" in text


def test_real_run_button_shows_a_pass(page):
    page.goto(page.base + "/collective?world=4&count=8")
    page.get_by_role("button", name=re.compile("Run on real gloo")).click()
    page.locator(".job.passed, .job.failed, .job.error").wait_for(timeout=90000)
    assert page.locator(".job.passed").count() == 1, page.locator(".verify-result").inner_text()
    assert "Largest difference: 0" in page.locator(".verify-result").inner_text()


def test_bad_parameters_show_inline_and_recover(page):
    page.goto(page.base + "/collective?algorithm=halving_doubling&world=8&count=8")
    slide(page, "world", 6)
    shows_problem(page, "power-of-two", "world")
    slide(page, "world", 4)
    page.locator("svg.deck").wait_for()


def test_theme_toggle(page):
    page.goto(page.base + "/collective")
    toggle = page.locator("[data-theme-toggle]")
    toggle.click()
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    toggle.click()
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(16, 19, 23)"


def test_the_stage_shows_without_javascript(browser, live_server):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(live_server + "/collective?world=4&count=8&frame=2")
    assert page.locator("svg.deck").is_visible()
    assert caption(page).inner_text().startswith("Communication step 2 of 6")
    context.close()
