"""DESIGN principle 15: a colour means one thing in a figure. Rank colours are for ranks only;
no rank is grey (grey means reduced / summed); past eight ranks neighbours differ in hue, not
in neighbouring shades of one map; categories (params / grads / optimizer, F / B / W, timeline
kinds) have their own colours, never a rank's."""

from __future__ import annotations

import re

import pytest

from app.draw import palette
from app.draw.lanes import KIND_COLOURS
from app.draw.palette import CATEGORY, OKABE_ITO, PASS, rank_colour


def rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[k:k + 2], 16) for k in (1, 3, 5))


def is_grey(colour: str) -> bool:
    r, g, b = rgb(colour)
    return max(r, g, b) - min(r, g, b) < 24


def hue(colour: str) -> float:
    import colorsys
    return colorsys.rgb_to_hsv(*(c / 255 for c in rgb(colour)))[0] * 360


RANK_COLOURS = {rank_colour(r, w).lower() for w in (2, 4, 8, 16, 32, 64) for r in range(w)}


@pytest.mark.parametrize("world", [2, 4, 7, 8, 9, 16, 32, 64, 128])
def test_ranks_are_never_grey_and_all_distinct(world):
    colours = [rank_colour(r, world) for r in range(world)]
    assert not [c for c in colours if is_grey(c)]
    if world <= 64:
        assert len({c.lower() for c in colours}) == world


@pytest.mark.parametrize("world", [9, 16, 32, 64])
def test_neighbours_differ_in_hue_past_eight_ranks(world):
    for r in range(world):
        a, b = rank_colour(r, world), rank_colour((r + 1) % world, world)
        gap = abs(hue(a) - hue(b))
        assert min(gap, 360 - gap) >= 20, f"ranks {r} and {r + 1} of {world}: {a} {b}"


def test_categories_never_take_a_rank_colour():
    categories = [*CATEGORY.values(), *PASS.values(), *(c for c, _ in KIND_COLOURS.values())]
    shared = {c.lower() for c in categories} & RANK_COLOURS
    assert not shared, shared
    assert not set(OKABE_ITO) & set(palette.SERIES) - set(OKABE_ITO)  # SERIES is for plots


def test_categories_are_told_apart():
    for scheme in (CATEGORY, PASS):
        assert len(set(scheme.values())) == len(scheme)


def _fills(markup: str) -> set[str]:
    """Fills the deck writer chose (the inlined theme style sheet, with its good / bad text
    colours, is the page layout's and left out)."""
    markup = re.sub(r"<style>.*?</style>", "", markup, flags=re.S)
    return {m.lower() for m in re.findall(r'fill="(#[0-9a-fA-F]{6})"', markup)} | \
           {m.lower() for m in re.findall(r'fill: (#[0-9a-fA-F]{6})', markup)}


@pytest.mark.parametrize("path", ["/svg/memory", "/svg/optimizer", "/svg/checkpointing",
                                  "/svg/pipeline?schedule=zb_h1", "/svg/pipeline?stages=8"])
def test_decks_without_ranks_use_no_rank_colour(client, path):
    """Decks whose colours are categories (bytes, passes, optimizer rows, activation states)."""
    response = client.get(path)
    assert response.status_code == 200
    shared = _fills(response.text) & {c.lower() for c in OKABE_ITO}
    assert not shared, f"{path}: rank colours {shared}"
