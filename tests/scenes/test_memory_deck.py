"""The memory deck's geometry: the squarified treemap tiles its rectangle in proportion, labels
stay inside their boxes and at projector size, and the text regions never overlap."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.sim.memory.params import MemoryParams
from app.sim.memory.simulate import simulate
from app.scenes.memory.deck import (BAR_RIGHT, CHAR_BOLD, MAP_BOTTOM, MAP_LEFT, MAP_RIGHT, MAP_TOP,
                              build_deck, squarify)
from app.scenes.memory.page import title


@given(st.lists(st.floats(0.001, 1e6), min_size=1, max_size=30))
def test_squarify_tiles_in_proportion(sizes):
    sizes = sorted(sizes, reverse=True)
    rects = squarify(sizes, 10, 20, 800, 500)
    total = sum(sizes)
    assert sum(w * h for _, _, w, h in rects) == pytest.approx(800 * 500)
    for size, (x, y, w, h) in zip(sizes, rects):
        assert w * h == pytest.approx(size / total * 800 * 500, rel=1e-6)
        eps = 1e-3  # a thousandth of a pixel: rounding accumulates over many tiles
        assert 10 - eps <= x and x + w <= 810 + eps and 20 - eps <= y and y + h <= 520 + eps


@pytest.mark.parametrize("query", [
    {}, {"preset": "gpt3-175b", "dp": 64, "tp": 8, "pp": 8, "zero": 1,
         "sequence_parallel": True, "recompute": "selective"},
    {"preset": "gpt2", "dp": 1, "zero": 0, "optimizer": "sgd", "precision": "fp32"},
    {"preset": "llama3-405b", "micro_batch": 64, "dp": 1, "zero": 0, "recompute": "none"},
    {"preset": "llama3-70b", "dp": 1024, "tp": 64, "pp": 16, "zero": 3, "gpu": "a100-40",
     "heads": 64, "kv_heads": 64, "layers": 1 * 16, "micro_batch": 4096},
])
def test_labels_fit_and_stay_legible(query):
    params = MemoryParams(**query)
    trace = simulate(params)
    deck = build_deck(trace, title(params, trace))
    assert deck.title.size >= 14
    for layer in deck.layers:
        for box in layer.boxes:
            assert MAP_LEFT - 0.1 <= box.x and box.x + box.w <= MAP_RIGHT + 0.1
            assert MAP_TOP - 0.1 <= box.y and box.y + box.h <= MAP_BOTTOM + 0.1
            assert " = " in box.title and "·" in box.title      # formula, value and tag
            for t in box.labels:
                assert t.size >= 14
                assert box.x < t.x and t.x + len(t.text) * CHAR_BOLD * t.size <= box.x + box.w
                assert box.y < t.y - t.size + 4 and t.y <= box.y + box.h
        if layer.bar:
            assert " = " in layer.bar.title
            for t in layer.bar.labels:
                assert layer.bar.y < t.y - t.size + 4 <= layer.bar.y + layer.bar.h
                assert abs(t.y - 5 - deck.capacity_y) > 8   # never under the capacity line
    for t in (*deck.capacity, *deck.ticks):
        assert t.size >= 14
    # capacity labels sit between the bar and the treemap
    for t in deck.capacity:
        assert BAR_RIGHT < t.x and t.x + len(t.text) * CHAR_BOLD * t.size < MAP_LEFT
    legend = [t for layer in deck.layers for t in layer.legend]
    ends = [t.x + len(t.text) * 0.6 * t.size for t in legend]
    assert all(end < nxt.x - 26 for end, nxt in zip(ends, legend[1:]))
    assert ends[-1] < deck.width
