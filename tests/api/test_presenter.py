"""The lecturer's routes every scene gets from the generic scene router (issue 27):
/<scene>/presenter (the presenter view: one template for all) and /<scene>/key-stops (the stops
of the key parameter a state accepts, which presentation mode's overlay keeps to)."""

from __future__ import annotations

import html
import re

import pytest

from app.main import SCENES
from app.params import control

SLUGS = [s.slug for s in SCENES]


@pytest.mark.parametrize("slug", SLUGS)
def test_every_scene_has_a_presenter_view(client, slug):
    frames = client.get(f"/api/{slug}").json()["frames"]
    r = client.get(f"/{slug}/presenter?frame=1")
    assert r.status_code == 200
    page = r.text
    # the current step with its player, the next step's preview without: the scene's embeds
    current = re.search(r'data-pv-current[^>]*src="([^"]+)"', page).group(1)
    preview = re.search(r'data-pv-next[^>]*src="([^"]+)"', page).group(1)
    assert current.startswith(f"/embed/{slug}?") and "frame=1" in current
    assert preview.startswith(f"/embed/{slug}?") and "frame=2" in preview and "controls=0" in preview
    # the notes hold every caption, the list every step, counted from 1
    notes = re.findall(r'<li data-frame="(\d+)"[^>]*>(.*?)</li>', page, flags=re.S)
    assert [int(k) for k, _ in notes] == list(range(len(frames)))
    assert html.unescape(notes[1][1]).strip() == frames[1]["caption"].strip()
    assert page.count("data-go=") == len(frames)
    assert f"Step <strong data-pv-step>2</strong> of {len(frames)}" in page


def test_presenter_of_a_refused_state_says_why(client):
    r = client.get("/context-parallel/presenter?cp=5")
    assert r.status_code == 422
    assert "cp" in r.text and "cannot be simulated" in r.text


@pytest.fixture
def client_get(client):
    return lambda slug, query: client.get(f"/api/{slug}?{query}")


@pytest.mark.parametrize("slug,query", [
    ("context-parallel", ""), ("context-parallel", "method=ulysses&heads=8&kv_heads=8"),
    ("tensor-parallel", ""), ("parallelism", ""), ("pipeline", "stages=8"),
])
def test_key_stops_are_exactly_the_accepted_ones(client, client_get, slug, query):
    """Against /api itself: each stop of the key control is listed if and only if /api accepts
    the state with that stop (the defect: /context-parallel's cp = 5 was offered)."""
    scene = next(s for s in SCENES if s.slug == slug)
    c = control(scene.params, scene.key_slider)
    values = c["values"] or list(range(int(c["min"]), int(c["max"]) + 1))
    body = client.get(f"/{slug}/key-stops?{query}").json()
    assert body["name"] == scene.key_slider
    want = [str(v) for v in values
            if client_get(slug, f"{query}&{scene.key_slider}={v}").status_code == 200]
    assert body["stops"] == want
    if slug == "context-parallel" and not query:
        assert "5" not in want and {"2", "4", "8", "16"} <= set(want)


def test_key_stops_of_a_continuous_slider_are_none(client):
    assert client.get("/moe/key-stops").json() == {"name": "skew", "stops": None}
    assert client.get("/context-parallel/key-stops?cp=0").status_code == 422
