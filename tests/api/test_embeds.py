"""What every scene's embed page offers around its deck: one link out to the full page of the
same state, and frame links that stay inside the embed when JavaScript is off."""

from __future__ import annotations

import re

import pytest

from app.main import SCENES


@pytest.mark.parametrize("slug", [s.slug for s in SCENES])
def test_embed_links_out_once_and_steps_within_itself(client, slug):
    embed = client.get(f"/embed/{slug}?frame=1")
    assert embed.status_code == 200
    credits = re.findall(r'<a class="embed-credit" href="([^"]+)"', embed.text)
    assert len(credits) == 1 and credits[0].startswith(f"/{slug}?"), credits
    assert embed.text.count("Open in Shardscope") == 1
    steps = re.findall(r'<noscript>\s*(.*?)</noscript>', embed.text, re.S)[-1]
    assert f'href="/embed/{slug}?' in steps and "frame=0" in steps, steps
    page = client.get(f"/{slug}?frame=1")
    assert "Open in Shardscope" not in page.text
    steps = re.findall(r'<noscript>\s*(.*?)</noscript>', page.text, re.S)
    assert any(f'href="/{slug}?' in s and "frame=2" in s for s in steps), steps
