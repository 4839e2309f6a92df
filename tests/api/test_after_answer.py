"""What an answer's computation leaves is done after the answer is sent (app/main.py,
AfterAnswer; app/caches.py, after_answer): the caches that walk objects to size them (traces,
decks) keep an entry at once and size it then, and the cycle collector's due pass runs then."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np

from app import caches
from app.caches import MiB, ByteCache, approx_bytes, settle


def test_an_entry_is_kept_at_once_and_counted_when_settled():
    cache = ByteCache("t", 4 * MiB, approx_bytes, deferred=True)
    value = np.zeros(1000)
    cache.put("a", value)
    assert cache.get("a") is value and cache.total == 0
    settle()
    assert cache.total == approx_bytes(value) >= 8000


def test_settling_evicts_the_oldest_and_drops_one_too_large_to_keep():
    cache = ByteCache("t", 4 * MiB, approx_bytes, deferred=True)
    for k in range(5):
        cache.put(k, np.zeros(90_000))                 # 720 kB each
    cache.put("big", np.zeros(200_000))                # 1.6 MB > a quarter of the budget
    settle()
    assert cache.get("big") is None
    assert cache.total <= cache.max_bytes
    for k in range(5, 10):
        cache.put(k, np.zeros(90_000))
    settle()
    assert cache.total <= cache.max_bytes and cache.get(0) is None and cache.get(9) is not None


def test_an_entry_replaced_or_cleared_before_it_is_settled_is_left_alone():
    cache = ByteCache("t", 4 * MiB, approx_bytes, deferred=True)
    first, second = np.zeros(10), np.zeros(20)
    cache.put("a", first)
    cache.put("a", second)
    settle()
    assert cache.get("a") is second and cache.total == approx_bytes(second)
    cache.put("b", first)
    cache.clear()
    settle()
    assert cache.total == 0 and cache.get("b") is None


def test_many_unsized_entries_are_settled_by_the_put_past_the_most():
    cache = ByteCache("t", 64 * MiB, approx_bytes, deferred=True)
    settle()
    for k in range(caches.MOST_UNSIZED + 1):
        cache.put(k, np.zeros(10))
    assert len(caches.UNSIZED) == 0 and cache.total > 0


def test_a_page_leaves_nothing_unsized_once_answered(client):
    settle()
    response = client.get("/collective?world=23&count=46", headers={"HX-Request": "true"})
    assert response.status_code == 200
    deadline = time.monotonic() + 5
    while caches.UNSIZED and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not caches.UNSIZED
    assert caches.TRACES.total > 0 and caches.DECKS.total > 0


def test_the_collector_pass_after_an_answer_is_the_generation_that_is_due(monkeypatch):
    monkeypatch.setattr(caches, "AFTER_ANSWER_THRESHOLDS", (100, 3, 2))
    asked = []
    monkeypatch.setattr(gc, "get_count", lambda: counts[0])
    monkeypatch.setattr(gc, "collect", lambda generation=2: asked.append(generation))
    for counts_now, expected in [((50, 0, 0), None), ((150, 0, 0), 0), ((150, 3, 0), 1),
                                 ((150, 3, 2), 2), ((150, 0, 2), 2)]:
        counts = [counts_now]
        asked.clear()
        caches.collect_after_answer()
        assert asked == ([] if expected is None else [expected]), counts_now


def test_no_collector_pass_runs_inside_a_render_of_a_drag(client):
    """Forty first visits one after another: every pass of the collector runs in the thread
    that finishes answers, none in a request's (where it would add 20–30 ms to a move)."""
    caches.after_answer()
    during = []

    def watch(phase, info):
        if phase == "start":
            during.append(threading.current_thread().name)
    gc.callbacks.append(watch)
    try:
        for world in range(20, 60):
            client.get(f"/collective?world={world}&count={2 * world}",
                       headers={"HX-Request": "true"})
            time.sleep(0.02)    # the browser draws what came
    finally:
        gc.callbacks.remove(watch)
    assert during, "forty first visits make a pass due"
    assert all(not name.startswith("AnyIO") for name in during), during
