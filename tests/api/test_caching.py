"""What browsers may keep. A stage fragment is a pure function of its URL, so the browser may
reuse it (a slider dragged back, or onto a state fetched ahead); the page itself, htmx's history
restore (same URL, HX-Request too) and a rejected state must never be answered from it; static
files under the current asset version never change."""

from __future__ import annotations

import re

import pytest

from app.main import SCENES
from app.templating import asset_version

HX = {"HX-Request": "true"}


@pytest.mark.parametrize("slug", [s.slug for s in SCENES])
def test_a_stage_fragment_may_be_kept_the_page_may_not(client, slug):
    fragment = client.get(f"/{slug}", headers=HX)
    assert fragment.status_code == 200
    assert fragment.text.lstrip().startswith('<section id="stage"')
    assert fragment.headers["cache-control"] == "private, max-age=600"
    vary = {v.strip().lower() for v in fragment.headers["vary"].split(",")}
    assert {"hx-request", "hx-history-restore-request"} <= vary
    page = client.get(f"/{slug}")
    assert "cache-control" not in page.headers
    assert {v.strip().lower() for v in page.headers["vary"].split(",")} >= vary


@pytest.mark.parametrize("slug", [s.slug for s in SCENES])
def test_a_stage_fragment_brings_no_style_or_script(client, slug):
    # a stylesheet added and removed with every slider move restyles the whole page, and htmx
    # drops a fragment's scripts: what a stage needs is in the page's CSS and scripts
    fragment = client.get(f"/{slug}", headers=HX).text
    assert "<style" not in fragment and "<script" not in fragment


def test_history_restore_gets_the_whole_page_uncached(client):
    restore = client.get("/collective?world=6",
                         headers={**HX, "HX-History-Restore-Request": "true"})
    assert restore.status_code == 200
    assert "<html" in restore.text and "cache-control" not in restore.headers


def test_a_rejected_state_is_not_kept(client):
    bad = client.get("/collective?world=999", headers=HX)
    assert bad.status_code == 422
    assert "cache-control" not in bad.headers


def test_versioned_assets_are_immutable_others_revalidate(client):
    page = client.get("/collective").text
    assets = re.findall(r'(?:href|src)="(/static/[^"]+\?v=[0-9a-f]+)"', page)
    assert any(a.startswith("/static/js/stage.js") for a in assets), assets
    for url in assets:
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.headers["cache-control"] == "public, max-age=31536000, immutable", url
    assert asset_version() in assets[0]
    for url in ("/static/js/stage.js", "/static/js/stage.js?v=0000000000"):
        assert "cache-control" not in client.get(url).headers, url
