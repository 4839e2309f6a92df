"""What the browser tests share beyond the fixtures of tests/conftest.py: moving a slider,
stepping the player with the keys, reading the player's position and caption, opening a page at
a screen size, the course's link to a scene, the embed dialog's snippet in an iframe, the
smallest deck label, a refused state shown inline, and a screenshot kept for a person to look
at."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.conftest import ARTIFACTS

# What Chromium logs for a 422 answer: the tests that send a bad state on purpose expect it.
UNPROCESSABLE = "the server responded with a status of 422"

SMALLEST_LABEL = """() => Math.min(...[...document.querySelectorAll('svg.deck text')].map(
    t => parseFloat(t.getAttribute('font-size') || getComputedStyle(t).fontSize)))"""
"""The smallest font size of the deck's labels, in the deck's units (its viewBox)."""


def drag(page, selector: str, value: str) -> None:
    """Move a range input as a user would: set its value and fire ``input``."""
    page.eval_on_selector(selector, """(el, v) => { el.value = v;
        el.dispatchEvent(new Event('input', {bubbles: true})); }""", value)


def slide(page, name: str, value) -> None:
    """Move the slider of field ``name`` (``input[name=…]``) to ``value``."""
    drag(page, f'input[name="{name}"]', str(value))


def drag_to_value(page, selector: str, value) -> None:
    """Move a slider over a list of values (``data-values``) to the position of ``value``."""
    page.eval_on_selector(selector, """(el, v) => {
        el.value = String(el.dataset.values.split(' ').indexOf(v));
        el.dispatchEvent(new Event('input', {bubbles: true})); }""", str(value))


def press(page, *keys: str, focus: str | None = "body") -> None:
    """Press ``keys`` in turn for the player, after a click on ``focus`` (at its top left
    corner, where no control is) so that no field holds the keys; None: no click."""
    if focus is not None:
        page.locator(focus).first.click(position={"x": 5, "y": 5})
    for key in keys:
        page.keyboard.press(key)


def position(page) -> str:
    """The player's position text: "step 2 of 5 · ring step 2 of 4"."""
    return page.locator("[data-position]").inner_text()


def caption(page):
    """The caption of the frame shown (a locator: it follows the player)."""
    return page.locator("[data-captions] > li:not([hidden])")


BOX_SETTLED = "() => !window.ShardscopeBox || window.ShardscopeBox.settled()"
"""static/js/box.js has the deck laid out for its frame (until then a deck drawn for another box
is kept unseen): what a person sees once the page has loaded."""


def open_page(page, path: str, width: int, height: int) -> None:
    """``path`` in a window of ``width`` × ``height`` CSS pixels, loaded and its deck laid out
    for its box."""
    page.set_viewport_size({"width": width, "height": height})
    page.goto(page.base + path)
    page.wait_for_load_state("load")
    page.wait_for_function(BOX_SETTLED)


def from_the_course(page, link: str, slug: str, exact: bool = False) -> None:
    """From the home page, follow the course's link named ``link`` to /``slug``."""
    page.goto(page.base + "/")
    page.get_by_role("link", name=link, exact=exact).first.click()
    page.wait_for_url(f"**/{slug}")
    page.wait_for_function(BOX_SETTLED)    # the deck laid out for its box (hidden until then)


def embedded(page, path: str):
    """Open ``path``, copy the Embed dialog's snippet and put it in a page of its own:
    (the snippet, the iframe's frame locator once its deck is drawn)."""
    page.goto(page.base + path)
    page.get_by_role("button", name="Embed").click()
    snippet = page.locator("[data-embed-code]").input_value()
    page.get_by_role("button", name="Close").click()
    page.set_content(f"<html><body>{snippet}</body></html>")
    frame = page.frame_locator("iframe")
    frame.locator("svg.deck").wait_for()
    return snippet, frame


def smallest_label(page) -> float:
    """:data:`SMALLEST_LABEL` on the page."""
    return page.evaluate(SMALLEST_LABEL)


def screenshot(page, name: str, full_page: bool = True) -> str:
    """Keep a screenshot in test-artifacts/ (CI uploads it) for a person to look at; its
    path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = str(ARTIFACTS / f"{name}.png")
    page.screenshot(path=path, full_page=full_page)
    return path


def frame_shown(page) -> int:
    """The index of the frame the player shows, from 0 (its bar counts steps from 1)."""
    return int(page.locator("[data-player-bar] [data-k]").inner_text()) - 1


def shows_problem(page, message: str, field: str | None = None) -> None:
    """A refused state is shown inline: the problems box says ``message`` (waiting for it),
    the control of ``field`` is marked invalid, and Chromium's log line of the 422 is expected
    (the page fixture fails on any other console error)."""
    expect(page.locator(".problems")).to_contain_text(message)
    if field is not None:
        expect(page.locator(f'[data-field="{field}"].invalid')).to_have_count(1)
    page.expect_console_error(UNPROCESSABLE)
