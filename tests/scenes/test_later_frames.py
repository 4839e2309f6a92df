"""The later frames' template writes a part that several layers repeat once (app/draw/deck.py,
later_frames): what static/js/player.js makes of a layer must be the very markup the frame
writer wrote, on every scene's page."""

from __future__ import annotations

import pytest

from app.caches import LAYERS
from app.draw import deck as deck_writer
from app.draw.deck import later_frames, lazy_layer
from tests.later_frames import expand

def test_repeated_parts_are_written_once_and_made_again_in_place():
    arrow = '<g class="arrow"><path d="M1,2 Q3,4 5,6" stroke="#0072b2"/></g>'
    frames = [['<g class="frame step" data-frame="1" data-unit="a &amp; b">', arrow,
               "<text>it's 1</text>", "</g>"],
              ['<g class="frame step" data-frame="2" data-unit="c">', "<rect/>", arrow, arrow,
               "</g>"],
              ['<g class="frame step" data-frame="3" data-unit="d">', arrow, "</g>"]]
    template = later_frames(frames)
    assert template.count("M1,2") == 1                     # four uses, written once
    assert expand(template) == ["".join(f) for f in frames]


def test_a_frame_whose_parts_split_its_start_tag_is_written_whole():
    frames = [['<g class="frame" data-frame="1"', ' data-unit="x">', "<rect/>" * 10, "</g>"],
              ['<g class="frame" data-frame="2" data-unit="y">', "<rect/>" * 10, "</g>"]]
    assert expand(later_frames(frames)) == ["".join(f) for f in frames]
    assert lazy_layer(frames[0]) == lazy_layer(frames[0], {})


SCENE_STATES = {
    "collective": ["world=5", "world=30", "world=64", "world=48&op=all_to_all&count=96",
                   "world=16&algorithm=tree&frame=3"],
    "pipeline": [""], "train": [""], "data-parallel": [""], "zero": [""], "moe": [""],
    "context-parallel": [""], "tensor-parallel": [""], "optimizer": [""], "memory": [""],
    "checkpointing": [""], "precision": [""], "parallelism": [""],
}


@pytest.fixture
def unshared(monkeypatch):
    """Rendering as before the pieces: every part written where it stands."""
    def render(client, url):
        for layer in LAYERS:
            layer.clear()
        with monkeypatch.context() as m:
            m.setattr(deck_writer, "shared_pieces", lambda frames: {})
            text = client.get(url, headers={"HX-Request": "true"}).text
        for layer in LAYERS:
            layer.clear()
        return text
    return render


@pytest.mark.parametrize("slug", sorted(SCENE_STATES))
def test_every_scenes_later_frames_are_the_frames_it_wrote(client, unshared, slug):
    for query in SCENE_STATES[slug]:
        url = f"/{slug}?{query}"
        shared = client.get(url, headers={"HX-Request": "true"}).text
        plain = unshared(client, url)
        if '<template class="deck-later">' not in plain:
            continue
        before, later = shared.split('<template class="deck-later">', 1)
        plain_before, plain_later = plain.split('<template class="deck-later">', 1)
        assert before == plain_before, url
        assert expand(later) == expand(plain_later), url
        assert len(later) <= len(plain_later), url
