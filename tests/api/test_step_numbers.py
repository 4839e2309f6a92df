"""Steps count one way (issue 27: "step 0 of 4 · ledger line 1 of 5"): from 1, wherever a person
reads them. The player says "step k+1 of N" for frame k (tests/browser/test_classroom.py);
here, every bare "Step n" a scene writes — in a caption, in a deck's header — is that same
number. A quantity of the scene's own is named for what it counts ("training step 3",
"ring step 2 of 4", "communication step 1 of 6"), never a bare "Step". The URL's frame=k (and
start, end, first, last) counts frames from 0; docs/lecturer-tools.md says so."""

from __future__ import annotations

import html
import re

import pytest

from app.main import SCENES

BARE = re.compile(r"\bStep (\d+)")
TEXT = re.compile(r"<text\b[^>]*>([^<]*)</text>|<tspan\b[^>]*>([^<]*)</tspan>")


@pytest.mark.parametrize("scene", SCENES, ids=[s.slug for s in SCENES])
def test_a_bare_step_is_the_players_step(client, scene):
    frames = client.get(f"/api/{scene.slug}").json()["frames"]
    wrong = []
    for k, frame in enumerate(frames):
        for n in BARE.findall(frame["caption"]):
            if int(n) != k + 1:
                wrong.append((k, "caption", frame["caption"][:60]))
        svg = client.get(f"/svg/{scene.slug}?frame={k}").text
        # the current layer's header (what the deck shows at this step), drawn texts only
        current = svg[svg.index('class="frame current') if 'class="frame current' in svg else 0:]
        for a, b in TEXT.findall(current):
            for n in BARE.findall(html.unescape(a or b)):
                if int(n) != k + 1:
                    wrong.append((k, "deck", (a or b)[:60]))
    assert not wrong, wrong[:6]
