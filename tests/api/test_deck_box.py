"""The view parameters ``box`` and ``font`` (issue 27; app/view.py, app/draw/box.py): decks that
lay out for their box are drawn for it on pages, embeds, /svg and /export; bad values are a 422
naming the parameter and its range; boxes are bucketed (a multiple of 40 px a side), so states
are cached per bucket; a scene still to do ignores them."""

from __future__ import annotations

import re

import pytest

from app.draw.box import EMBEDS, EXPORT, PAGE, Box, fitted
from app.main import SCENES

BOXED = [s.slug for s in SCENES if s.boxed]


def deck_tag(html: str) -> str:
    return re.search(r'<svg [^>]*class="deck[^"]*"[^>]*>', html).group(0)


def view_box(tag: str) -> tuple[float, float]:
    w, h = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', tag).groups()
    return float(w), float(h)


def test_the_pilot_scenes_lay_out_for_their_box():
    assert {"memory", "pipeline", "collective"} <= set(BOXED)


@pytest.mark.parametrize("slug", BOXED)
@pytest.mark.parametrize("path,box", [("/{slug}", PAGE), ("/embed/{slug}", EMBEDS["16:9"]),
                                      ("/embed/{slug}?aspect=4:3", EMBEDS["4:3"]),
                                      ("/{slug}?box=920x360", Box(920, 360)),
                                      ("/{slug}?box=935x379", Box(920, 360)),
                                      ("/embed/{slug}?box=1840x840&font=1.5",
                                       Box(1840, 840, 1.5))])
def test_a_page_draws_its_deck_for_its_box(client, slug, path, box):
    r = client.get(path.format(slug=slug))
    assert r.status_code == 200
    tag = deck_tag(r.text)
    assert f'data-box="{box.key}"' in tag and f'data-font="{box.font:g}"' in tag
    w, h = view_box(tag)
    assert w >= box.width and h == max(box.height, 320)   # a deck's least width may be wider
    if "/embed/" not in path:
        assert f'name="box" value="{box.key}"' in r.text       # the form asks for it again


@pytest.mark.parametrize("slug", BOXED)
def test_one_bucket_one_deck(client, slug):
    """Two frames in the same bucket get the very same deck (the server buckets too)."""
    a = client.get(f"/embed/{slug}?box=920x360").text
    b = client.get(f"/embed/{slug}?box=959x399").text
    c = client.get(f"/embed/{slug}?box=960x400").text
    assert deck_tag(a) == deck_tag(b) and deck_tag(a) != deck_tag(c)


@pytest.mark.parametrize("query,param", [("box=12x5", "box"), ("box=wide", "box"),
                                         ("box=3000x400", "box"), ("font=9", "font"),
                                         ("font=big", "font"), ("font=0.5", "font")])
@pytest.mark.parametrize("path", ["/memory", "/api-less"])
def test_bad_view_parameters_name_themselves(client, query, param, path):
    if path == "/api-less":
        r = client.get(f"/svg/memory?{query}")
        assert r.status_code == 422
        problem = r.json()["detail"][0]
        assert problem["param"] == param and param in problem["message"]
        assert re.search(r"\d", problem["message"])                 # the range, in numbers
    else:
        r = client.get(f"{path}?{query}")
        assert r.status_code == 422 and f"{param} must be" in r.text


@pytest.mark.parametrize("slug", BOXED)
@pytest.mark.parametrize("query,size", [("", (EXPORT.width, EXPORT.height)),
                                        ("&box=960x540", (960, 540)),
                                        ("&box=1920x1080&font=1.3", (1920, 1080)),
                                        ("&box=960x540&font=2", (960, 540))])
def test_a_file_is_drawn_for_its_page(client, slug, query, size):
    # at large type a deck may be laid out larger than its page (app/draw/widen.py): the file
    # is still the page's size, the drawing scaled down above the caption
    r = client.get(f"/svg/{slug}?frame=1{query}")
    assert r.status_code == 200
    root = re.search(r"<svg\b[^>]*>", r.text).group(0)
    assert f'width="{size[0]}"' in root and f'height="{size[1]}"' in root
    assert "data-box" not in root                          # a file is not laid out again


def test_a_slide_export_is_16_by_9(client):
    from PIL import Image
    import io
    png = client.get("/export/memory.png?frame=2").content
    assert Image.open(io.BytesIO(png)).size == (1280, 720)
    png = client.get("/export/memory.png?frame=2&box=960x540&width=960").content
    assert Image.open(io.BytesIO(png)).size == (960, 540)


def test_every_scene_lays_its_deck_out_for_its_box(client):
    """Issue 27 item 1 done: no scene keeps a fixed-size deck; each embed's deck says the box it
    was drawn for, another box draws another deck, and a box out of range is refused."""
    assert [s.slug for s in SCENES if not s.boxed] == []
    for scene in SCENES:
        plain = client.get(f"/embed/{scene.slug}").text
        assert "data-box" in deck_tag(plain), scene.slug
        assert client.get(f"/embed/{scene.slug}?box=1840x840&font=1.5").text != plain, scene.slug
        assert client.get(f"/embed/{scene.slug}?box=1x1").status_code == 422


def test_buckets_cover_each_view_with_one_box():
    """The defaults are the buckets of the frames Chromium gives the deck (measured in
    tests/browser/test_deck_box.py); the bucket of a frame is never larger than it."""
    for w, h in [(943, 378), (856, 373), (1256, 707), (1239, 526), (1879, 852), (310, 523)]:
        b = fitted(w, h)
        assert b.width % 40 == 0 and b.height % 40 == 0
        assert b.width <= max(w, 320) and b.height <= h and w - b.width < 40 and h - b.height < 40


@pytest.mark.parametrize("box,label", [(Box(920, 360), 14.0), (Box(840, 360), 11.0),
                                       (Box(1200, 520), 15.5), (Box(1840, 840), 18.5),
                                       (Box(320, 520), 9.0)])
def test_type_sizes_meet_issue_27s_targets_at_scale_one(box, label):
    """The smallest size a deck writes (``small``) in each view's box, at one unit a pixel: the
    embed's median 14 (most labels) and 5th percentile 12, the page's 11, presentation's 14
    and 18, a phone's 9."""
    assert box.small >= label and box.text > box.small and box.head > box.text
