"""What the browser tests share beyond the fixtures of tests/conftest.py."""

from __future__ import annotations

# What Chromium logs for a 422 answer: the tests that send a bad state on purpose expect it.
UNPROCESSABLE = "the server responded with a status of 422"


def drag(page, selector: str, value: str) -> None:
    """Move a range input as a user would: set its value and fire ``input``."""
    page.eval_on_selector(selector, """(el, v) => { el.value = v;
        el.dispatchEvent(new Event('input', {bubbles: true})); }""", value)
