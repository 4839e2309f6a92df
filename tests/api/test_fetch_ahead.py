"""What the server answers a state fetched before it is asked for (static/js/stage.js sends
X-Fetch-Ahead with the next states of a drag and the states one change away): a rejected state
as a 200 that says 422 (kept by the page, no failed load in the console), nothing while another
render is in flight (fetching ahead never slows anyone's own move), and every page render says
what it cost the server (Server-Timing, which bench/jump_split.py reads)."""

from __future__ import annotations

import re

from app.routes.scenes import RENDERING

HX = {"HX-Request": "true"}
AHEAD = {**HX, "X-Fetch-Ahead": "rest"}


def test_a_rejected_state_fetched_ahead_is_a_200_that_says_422(client):
    asked = client.get("/collective?op=reduce_scatter&world=3&count=8", headers=HX)
    ahead = client.get("/collective?op=reduce_scatter&world=3&count=8", headers=AHEAD)
    assert asked.status_code == 422 and "x-stage-status" not in asked.headers
    assert ahead.status_code == 200
    assert ahead.headers["x-stage-status"] == "422"
    assert ahead.headers["cache-control"] == "no-store"   # never answered from the HTTP cache
    assert ahead.text == asked.text                       # the same stage: its problems
    assert 'class="problems"' in ahead.text


def test_an_accepted_state_fetched_ahead_is_the_fragment_itself(client):
    asked = client.get("/collective?world=5", headers=HX)
    ahead = client.get("/collective?world=5", headers=AHEAD)
    assert ahead.status_code == 200 and "x-stage-status" not in ahead.headers
    assert ahead.text == asked.text
    assert ahead.headers["cache-control"] == asked.headers["cache-control"]


def test_nothing_is_rendered_ahead_while_another_render_is_in_flight(client):
    with RENDERING:  # someone's move being rendered in another thread
        busy = client.get("/collective?world=6", headers=AHEAD)
        guess = client.get("/collective?world=6", headers={**HX, "X-Fetch-Ahead": "guess"})
        own = client.get("/collective?world=6", headers=HX)
    assert busy.status_code == 204 and busy.content == b""
    assert guess.status_code == 204
    assert own.status_code == 200                          # a person's own move always is
    assert RENDERING.count == 0
    assert client.get("/collective?world=6", headers=AHEAD).status_code == 200


def test_every_page_render_says_what_it_cost_the_server(client):
    for url, headers in (("/zero?dp=6", HX), ("/zero?dp=6", {}), ("/zero?dp=999", HX)):
        timing = client.get(url, headers=headers).headers["server-timing"]
        assert re.fullmatch(r"render;dur=\d+\.\d", timing), timing


def test_a_browsers_own_prefetch_waits_too_and_nothing_waits_in_the_thread_pool(client):
    # Sec-Purpose: prefetch (a browser's speculative fetch) is treated as X-Fetch-Ahead; the
    # 204 is sent before routing (app/routes/ahead.py), so it is never kept and costs no thread.
    # An answer already sent once goes out again even then: it costs no render (app/http_cache.py)
    kept = client.get("/collective?world=12", headers=HX)
    with RENDERING:
        busy = client.get("/collective?world=11", headers={"Sec-Purpose": "prefetch"})
        intent = client.get("/collective?world=11", headers={**HX, "X-Fetch-Ahead": "intent"})
        again = client.get("/collective?world=12", headers={**HX, "X-Fetch-Ahead": "intent"})
    assert busy.status_code == 204 and busy.headers["cache-control"] == "no-store"
    assert intent.status_code == 204 and "etag" not in intent.headers
    assert again.status_code == 200 and again.content == kept.content
    assert client.get("/collective?world=11", headers={"Sec-Purpose": "prefetch"}).status_code == 200
