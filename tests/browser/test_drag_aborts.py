"""A quick drag aborts the requests of the moves it passed over (hx-sync="this:replace"); an
expected abort is not an error: nothing about it reaches the console (static/js/stage.js)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("path,slider,values", [
    ("/collective?world=4", 'input[name="world"]', [9, 33, 17, 60, 5, 41, 23, 64, 12, 50, 3,
                                                    37, 28, 55, 7, 46, 19, 62, 30, 11]),
    ("/checkpointing", 'input[name="micro_batch"]', [1, 9, 3, 17, 5, 29, 2, 40, 7, 13, 21,
                                                    33, 6, 48, 11, 25, 63, 15, 37, 8]),
])
def test_a_fast_drag_logs_no_abort(page, path, slider, values):
    messages: list[str] = []
    page.on("console", lambda m: messages.append(f"{m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.goto(page.base + path)
    page.evaluate("""() => { window.aborts = 0;
        document.addEventListener('htmx:sendAbort', () => { window.aborts++; }); }""")
    # every move 2 ms after the last: each request is still on its way when the next comes
    page.eval_on_selector(slider, """async (el, values) => {
        for (const v of values) {
            el.value = String(v);
            el.dispatchEvent(new Event('input', {bubbles: true}));
            await new Promise(r => setTimeout(r, 2));
        }}""", values)
    name = re.search(r'name="(\w+)"', slider).group(1)
    expect(page).to_have_url(re.compile(rf"[?&]{name}={values[-1]}(&|$)"))
    assert page.evaluate("window.aborts") > 0, "the drag aborted nothing: the test proves nothing"
    assert not [m for m in messages if re.search(r"abort|htmx:afterRequest", m, re.I)], messages
