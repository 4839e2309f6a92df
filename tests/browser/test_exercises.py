"""The exercises in Chromium: a wrong answer gets a hint, the right one the worked solution,
"Show solution" reveals it, a solved problem is marked on the index (localStorage), and
Enter checks the answer typed."""

from __future__ import annotations

import pytest

from playwright.sync_api import expect

from app.exercises.model import BANK

pytestmark = pytest.mark.browser


def test_wrong_answer_hint_then_right_answer_solution_and_progress(page):
    t = BANK.templates["ring-allreduce-bytes"]
    expected = t.solve(t.given(3)).answer
    page.goto(page.base + "/exercises/ring-allreduce-bytes?seed=3")
    field = page.locator("input[name=answer]")
    field.fill(f"{expected / 2:.6g}")
    page.get_by_role("button", name="Check").click()
    box = page.locator(".verdict-box")
    expect(box).to_have_class("verdict-box wrong")
    expect(box).to_contain_text("the 2 of ring all-reduce")
    expect(page.locator("ol.solution")).to_have_count(0)
    assert page.url.endswith("/exercises/ring-allreduce-bytes?seed=3")   # htmx: no reload

    field.fill(f"{expected / 1e9:.6g} GB")
    field.press("Enter")                                   # Enter checks, like the button
    expect(box).to_have_class("verdict-box right")
    expect(page.locator("ol.solution li")).to_have_count(len(t.solve(t.given(3)).steps))
    expect(page.locator(".solution-links a")).to_have_attribute("href", t.scene_url(
        t.given(3), solved=True))
    stored = page.evaluate("JSON.parse(localStorage.getItem('shardscope-exercises'))")
    assert stored["ring-allreduce-bytes"]["solved"] == ["3"]

    page.goto(page.base + "/exercises")
    expect(page.locator('a[data-progress-id="ring-allreduce-bytes"]')).to_have_class("solved")
    expect(page.locator('[data-progress-chapter~="ring-allreduce-bytes"]')).to_contain_text(
        f"1 of {len(BANK.chapter(2))} solved")


def test_show_solution_and_coordinates(page):
    page.goto(page.base + "/exercises/layout-rank-coords?seed=2")
    page.locator("input[name=coord_tp]").fill("0")
    page.get_by_role("button", name="Check").click()
    expect(page.locator(".verdict-box")).to_contain_text("Could not read that")
    page.get_by_role("button", name="Show solution").click()
    expect(page.locator(".verdict-box.revealed")).to_contain_text("tp = ")
    expect(page.locator("ol.solution li").first).to_be_visible()


def test_a_chapter_set_checks_each_problem_in_place(page):
    page.goto(page.base + "/exercises/10?seed=2")
    first = page.locator("li.problem").first
    first.locator("input[name=answer]").fill("1")
    first.get_by_role("button", name="Check").click()
    expect(first.locator(".verdict-box")).to_be_visible()
    expect(page.locator(".verdict-box")).to_have_count(1)
