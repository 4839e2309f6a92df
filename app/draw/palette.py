"""Colours that every scene shares: one colour per rank that colour-blind viewers can tell apart.

Up to eight ranks use the Okabe–Ito palette (Okabe & Ito 2008, "Color Universal Design"), chosen
so that protanopes, deuteranopes and tritanopes can tell every pair apart; the order puts
contrasting hues next to each other, since ring neighbours are drawn side by side. Okabe–Ito's
eighth colour is black, which vanishes on the dark theme; the eighth rank takes Paul Tol's wine
instead — never grey, since grey means "reduced / summed" in the decks (DESIGN principle 15).

Beyond eight ranks no palette keeps every rank distinct. Neighbouring shades of one sequential
map (viridis at 32 ranks) cannot be told apart, so ranks keep the eight hues in turn — rank r
takes hue r mod 8, so neighbours always differ in hue — and each further group of eight is
darker than the one before; every drawing with more than eight ranks also writes rank numbers.

Categories (params / grads / optimizer states / activations; forward / backward / weight
passes) never take a rank's colour: they have their own scheme, :data:`CATEGORY` and
:data:`PASS` (Paul Tol's "muted" scheme, also colour-blind safe, no colour shared with the rank
palette), and decks tell them apart by labels or hatching as well.
"""

from __future__ import annotations

from functools import lru_cache

OKABE_ITO: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
    "#882255",  # wine (Tol; in place of Okabe–Ito's black, and never grey: grey means reduced)
)

# viridis sampled at nine evenly spaced points (matplotlib's _viridis_data)
VIRIDIS: tuple[str, ...] = ("#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c",
                            "#28ae80", "#5ec962", "#addc30", "#fde725")

# sequential blues for "sum of k of n ranks" when n is too large for stripes (ColorBrewer Blues)
BLUES: tuple[str, ...] = ("#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5",
                          "#08519c", "#08306b")


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


@lru_cache(maxsize=4096)
def mix(a: str, b: str, t: float) -> str:
    """The colour a fraction ``t`` of the way from ``a`` to ``b``."""
    (r1, g1, b1), (r2, g2, b2) = _rgb(a), _rgb(b)
    return "#{:02x}{:02x}{:02x}".format(round(r1 + (r2 - r1) * t), round(g1 + (g2 - g1) * t),
                                        round(b1 + (b2 - b1) * t))


@lru_cache(maxsize=4096)
def ramp(stops: tuple[str, ...], t: float) -> str:
    """The colour at ``t`` ∈ [0, 1] along evenly spaced ``stops``."""
    t = min(max(t, 0.0), 1.0) * (len(stops) - 1)
    i = min(int(t), len(stops) - 2)
    return mix(stops[i], stops[i + 1], t - i)


RANK_GROUP_DARKEN = 0.55
"""How much darker (mixed with black) the last group of eight ranks is than the first."""


@lru_cache(maxsize=4096)
def rank_colour(rank: int, world: int) -> str:
    """Rank ``rank``'s colour among ``world``: Okabe–Ito up to eight ranks; beyond, hue
    ``rank mod 8`` (neighbours differ in hue) darkened by its group of eight."""
    hue = OKABE_ITO[rank % len(OKABE_ITO)]
    if world <= len(OKABE_ITO):
        return hue
    if rank == world - 1 and rank % len(OKABE_ITO) == 0:
        hue = OKABE_ITO[2]   # the last rank sits between rank 0 (blue) and a wine one in a ring
    groups = -(-world // len(OKABE_ITO))
    return mix(hue, "#000000", RANK_GROUP_DARKEN * (rank // len(OKABE_ITO)) / max(groups - 1, 1))


@lru_cache(maxsize=4096)
def text_on(colour: str) -> str:
    """Black or white, whichever reads better on ``colour`` (WCAG relative luminance)."""
    def channel(c: int) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in _rgb(colour))
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "#000000" if luminance > 0.179 else "#ffffff"


CATEGORY: dict[str, str] = {
    "params": "#332288",       # indigo
    "grads": "#DDCC77",        # sand
    "optimizer": "#44AA99",    # teal
    "activations": "#CC6677",  # rose
    "buffers": "#999933",      # olive
}
"""What a byte is for (Paul Tol's muted scheme): no rank's colour, labelled where drawn."""

PASS: dict[str, str] = {"F": "#88CCEE", "B": "#CC6677", "W": "#DDCC77"}
"""Pipeline passes by kind: forward cyan, backward rose (I hatched over it), weight sand."""

SUMMED = "#3b4252"
"""A value that sums every rank's contribution, where a drawing cannot follow the theme (decks
that can use the "complete" class, which is grey in either theme)."""

SERIES: tuple[str, ...] = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")
"""Line colours for plots with a few series (Okabe–Ito, most distinct first)."""
DASHES: tuple[str, ...] = ("", "8 4", "2 4", "10 3 2 3", "4 4", "1 3")
"""Dash patterns paired with SERIES, so lines differ in more than colour."""
