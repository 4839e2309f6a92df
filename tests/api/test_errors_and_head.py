"""Unexpected errors answer a plain 500 behind the usual security headers (issue 12.2), and
HEAD answers like GET without the body on pages, embeds, /api and /svg (issue 12.4)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.scenes.memory import deck_svg as memory_svg
from tests.api.test_fuzz import NoJobs


@pytest.fixture(scope="module")
def client():
    runner = NoJobs(max_world=8)
    with TestClient(create_app(runner), raise_server_exceptions=False) as client:
        yield client


def explode(*args, **kwargs):
    raise RuntimeError("secret detail")


def security_headers(response, framable: bool):
    csp = response.headers.get("content-security-policy", "")
    assert "default-src 'self'" in csp
    assert response.headers.get("x-content-type-options") == "nosniff"
    assert ("frame-ancestors *" in csp) == framable
    assert response.headers.get("x-frame-options") == (None if framable else "DENY")


def uncached():
    """Nothing kept (another test may have rendered the state, and app/http_cache.py keeps
    what was sent): the request below renders, and fails."""
    from app.caches import LAYERS
    for layer in LAYERS:
        layer.clear()


def test_a_failing_page_is_a_plain_500_with_the_headers(client, monkeypatch):
    uncached()
    monkeypatch.setattr(memory_svg, "render", explode)
    response = client.get("/memory?dp=3")
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("text/html")
    assert "Server error" in response.text and "secret detail" not in response.text
    security_headers(response, framable=False)


def test_a_failing_embed_keeps_its_frame_policy(client, monkeypatch):
    uncached()
    monkeypatch.setattr(memory_svg, "render", explode)
    response = client.get("/embed/memory?dp=5")
    assert response.status_code == 500
    security_headers(response, framable=True)


def test_a_failing_api_is_json_500_with_the_headers(client, monkeypatch):
    monkeypatch.setattr("app.routes.scenes.cached_json", explode)
    response = client.get("/api/collective?world=3")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert "secret detail" not in response.text and response.json()["detail"]
    security_headers(response, framable=False)


ROUTES = ["/memory", "/embed/memory", "/api/memory", "/svg/memory", "/memory?dp=0",
          "/api/memory?dp=0", "/svg/memory?frame=99", "/", "/nowhere", "/static/js/stage.js"]


@pytest.mark.parametrize("url", ROUTES)
def test_head_answers_like_get(client, url):
    get = client.get(url)
    head = client.head(url)
    assert head.status_code == get.status_code
    assert head.content == b""
    for name in ("content-type", "content-security-policy", "x-content-type-options",
                 "x-frame-options", "cache-control", "vary", "content-encoding",
                 "content-length"):   # the GET's length (of its gzip body where compressed)
        assert head.headers.get(name) == get.headers.get(name), name


def test_head_of_a_fragment_like_get(client):
    headers = {"HX-Request": "true"}
    get = client.get("/memory?dp=2", headers=headers)
    head = client.head("/memory?dp=2", headers=headers)
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["cache-control"] == get.headers["cache-control"]
    assert head.headers["content-length"] == get.headers["content-length"]
