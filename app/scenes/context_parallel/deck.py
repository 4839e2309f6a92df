"""The context-parallel scene as drawable geometry: one attention layer's forward pass, one frame
per step of the simulation (app.sim.context_parallel), whatever the method, laid out for its box
(app/draw/box.py, docs/legibility.md).

Left, the score matrix S = QKᵀ of the whole sequence at the resolution of the layout's chunks
(seq/cp tokens, seq/(2·cp) for zigzag): rows are query chunks, columns key chunks, each row
marked with the rank that holds those queries. Above the causal diagonal it is hatched: those
scores are never computed. The matrix is drawn in layers: frame k adds the blocks computed in
step k, in the colour of the rank that computed them (while the frame is current they are
outlined), so the matrix fills up as the ring turns — with contiguous chunks the last rank's
row fills in cp steps while rank 0 is done after one; with zigzag every rank adds the same area
each step. All-to-all groups (Ulysses, hybrid) compute the same blocks for different heads: a
group's blocks take the colour of its first rank and the legend says so.

Right, redrawn each frame (laid out by :mod:`.deck_rows`, drawn by :mod:`.deck_panel`): a row
per rank — the tokens it holds, what it holds or receives this step, and the online softmax of
one of its query rows with the real numbers; arrows show the step's transfers; under the rows,
the scores each rank has computed so far, as bars. The last frame puts a few output numbers
beside plain attention's.

Sizes come from the box and the texts: the matrix is a square as tall as the drawing (at most
:data:`MATRIX_SHARE` of its width), the rank rows' columns as wide as their widest texts over
every frame; the softmax line of a row is drawn where the rows have room for it (else it is the
rank chip's hover text); more ranks than rows fit are summarised (the first three and the last),
never shrunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.draw.box import Box
from app.draw.fmt import coord
from app.draw.layout import heading, legend_rows
from app.draw.palette import rank_colour
from app.draw.shapes import Arrow, Path, Rect, Text
from app.draw.text import fits, text_width
from app.scenes.context_parallel import deck_panel as panel
from app.scenes.context_parallel import deck_rows
from app.sim.context_parallel.captions import METHOD_NAMES

MIN_WIDTH, MIN_HEIGHT = 640, 320
"""The smallest box the deck is laid out for: a narrower frame (a phone) scrolls it."""
MATRIX_SHARE = 0.36
"""The matrix's side is at most this share of the deck's width (the rank rows take the rest)."""


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    items: tuple
    current: tuple = ()          # drawn only while the frame is current (outlines)
    arrows: tuple[Arrow, ...] = ()
    unit: str = ""               # what this step is, for the player ("ring step 2 of 4")
    arrow_labels: tuple[Text, ...] = ()


@dataclass(frozen=True)
class CpDeck:
    width: int
    height: int
    box: Box
    """the box asked for (its bucket is the deck's ``data-box``); width × height is what it
    was laid out in (wider on a phone: :data:`MIN_WIDTH`)"""
    title: str
    """the deck's title, whole (its accessible name)"""
    title_lines: tuple[Text, ...]
    header: Text
    """where each frame writes its header (the text is the frame's)"""
    base: tuple
    """the matrix's fixtures under every frame: its background, mask, rank marks and labels"""
    legend: tuple
    """the legend's swatches (Rects) and texts"""
    frames: tuple[FrameView, ...]


def deck_title(p) -> str:
    extra = f" (u {p.ulysses})" if p.method == "hybrid" else ""
    return (f"{METHOD_NAMES[p.method]}{extra} · cp {p.cp} · {p.example_tokens} tokens · "
            f"{'causal' if p.causal else 'full'} · "
            f"{'zigzag chunks' if p.balance == 'zigzag' else 'contiguous chunks'}")


@dataclass(frozen=True)
class Layout:
    """Where the parts go, from the box's sizes and the widest texts."""
    text: float
    small: float
    pad: float
    top: float                   # where the drawing starts (under the heading)
    bottom: float                # where it ends (over the legend)
    mx0: float                   # the matrix
    my0: float
    msize: float
    px0: float                   # the right panel's left edge (its background from here)
    px1: float
    rows: deck_rows.Rows


class _Matrix:
    """Chunk geometry of the score matrix."""

    def __init__(self, p, trace, lay: Layout):
        self.p, self.lay = p, lay
        self.chunk = p.example_tokens // (2 * p.cp if p.balance == "zigzag" else p.cp)
        self.n = p.example_tokens // self.chunk
        self.x0, self.y0, self.size = lay.mx0, lay.my0, lay.msize
        self.cell = self.size / self.n
        self.owner = [0] * self.n
        for r in trace.ranks:
            for t in r.tokens:
                self.owner[t // self.chunk] = r.rank
        # the chunks of each rank's queries, once per deck (every frame reads them)
        self.query_chunks = [self.chunks(r.query_tokens) for r in trace.ranks]
        # a block's corners from tables: formatted once per column and row, not per block
        s, x0, y0 = self.cell, self.x0, self.y0
        self._x = [coord(x0 + c * s) for c in range(self.n)]
        self._y = [coord(y0 + c * s) for c in range(self.n)]
        self._x1 = [coord(x0 + c * s + s) for c in range(self.n)]
        self._y1 = [coord(y0 + c * s + s) for c in range(self.n)]
        self._square = f"h{coord(s)}v{coord(s)}h{coord(-s)}Z"

    def chunks(self, tokens) -> list[int]:
        return sorted({int(t) // self.chunk for t in tokens})

    def cell_path(self, qc: int, kc: int) -> str:
        """One block: a square, or its lower triangle on the causal diagonal; "" if masked."""
        if self.p.causal and kc > qc:
            return ""
        if self.p.causal and kc == qc:
            return f"M{self._x[kc]} {self._y[qc]}V{self._y1[qc]}H{self._x1[kc]}Z"
        return f"M{self._x[kc]} {self._y[qc]}{self._square}"

    def base(self) -> list:
        """The matrix's background, its mask, the query chunks' rank marks (a number where a
        row is tall enough for one at the small size, every few rows else) and its labels."""
        p, lay, items = self.p, self.lay, []
        x0, y0, size, cell, small = self.x0, self.y0, self.size, self.cell, lay.small
        items.append(Rect(x0, y0, size, size, cls="blank"))
        if p.causal:
            d = "".join(f"M{coord(x0 + (q + 1) * cell)} {coord(y0 + q * cell)}"
                        f"H{coord(x0 + size)}v{coord(cell)}"
                        f"H{coord(x0 + (q + 1) * cell)}Z" for q in range(self.n - 1))
            d += "".join(f"M{coord(x0 + q * cell)} {coord(y0 + q * cell)}"
                         f"h{coord(cell)}v{coord(cell)}Z" for q in range(self.n))
            items.append(Path(d, cls="pad"))
        strip = small * 0.65
        every = max(1, int(np.ceil(small * 1.15 / cell)))
        for c in range(self.n):
            r = self.owner[c]
            y = y0 + c * cell
            items.append(Rect(x0 - strip - 4, y, strip, cell, fill=rank_colour(r, p.cp),
                              tip=f"queries {c * self.chunk}–{(c + 1) * self.chunk - 1}: "
                                  f"rank {r}"))
            middle = y + cell / 2
            # every few rows where rows are thin, none sticking out of the matrix
            if (c % every == every // 2 and middle - small * 0.45 >= y0
                    and middle + small * 0.45 <= y0 + size):
                items.append(Text(x0 - strip - 8, middle + small * 0.35, str(r), size=small,
                                  anchor="end"))
        keys = f"keys 0 … {p.example_tokens - 1} →"
        if not fits(keys, small, size):
            keys = "keys →"
        items += [Text(x0 + size / 2, y0 - small * 0.5, keys, size=small, anchor="middle",
                       cls="muted"),
                  Text(lay.pad, y0 - small * 0.5, "rank", size=small, cls="muted")]
        return items


def legend_items(p) -> list[tuple[str, str]]:
    """(swatch, text) of the legend: what a block's colour, outline and hatching mean."""
    colour = ("block: its group's first rank (each rank its heads)" if p.a2a_size > 1
              else "block: the rank that computes it")
    mask = ("hatched: above the causal diagonal, never computed" if p.causal
            else "no mask: every block is computed")
    return [("rank", colour), ("outline", "outlined: this step's"),
            ("hatch" if p.causal else "blank", mask)]


def layout(p, trace, box: Box, headers, title: str) -> tuple[Layout, object, object]:
    area = box.at_least(MIN_WIDTH, MIN_HEIGHT)
    pad, small = area.pad, area.small
    top = heading(area, headers, title)
    legend = legend_rows(area, [text for _, text in legend_items(p)])
    bottom = legend.top - pad * 0.4
    my0 = top.top + small * 1.1
    strip_col = max(text_width("rank", small),
                    text_width(str(p.cp - 1), small) + small * 0.65 + 8)
    mx0 = pad + strip_col + 4
    msize = max(small * 4, min(bottom - my0, area.width * MATRIX_SHARE))
    px0 = mx0 + msize + pad * 0.6
    rows = deck_rows.rows_layout(p, trace, area, px0 + pad * 0.4, area.width - pad, top.top,
                             bottom)
    lay = Layout(area.text, small, pad, top.top, bottom, mx0, my0, msize, px0,
                 area.width - pad, rows)
    return lay, top, legend


def build_deck(trace, box: Box) -> CpDeck:
    p = trace.params
    title = deck_title(p)
    headers = [_header(p, trace, k) for k in range(len(trace.frames))]
    area = box.at_least(MIN_WIDTH, MIN_HEIGHT)
    lay, top, legend = layout(p, trace, box, headers, title)
    mat = _Matrix(p, trace, lay)
    frames = []
    done = np.zeros(p.cp, dtype=np.int64)
    # each rank's scores over the whole layer: drawn dashed from step 0 (the work to come)
    total = np.sum([np.array(f.source.unmasked) for f in trace.frames], axis=0, dtype=np.int64)
    for k, frame in enumerate(trace.frames):
        items: list = []
        current: list = []
        step = frame.source          # the simulation's step: per rank arrays and tuples
        outlines = []
        for colour, blocks in _computed_blocks(p, mat, frame, step).items():
            d = "".join(mat.cell_path(qc, kc) for qc, kc in sorted(blocks))
            if d:
                items.append(Path(d, fill=colour, cls="filled" if mat.cell >= 8 else ""))
                outlines.append(d)
        if outlines:     # the step's blocks outlined while it is current: one path for all
            current.append(Path("".join(outlines), cls="changed-box"))
        done += np.array(step.unmasked)
        items.append(Rect(lay.px0, lay.top - lay.pad * 0.3, area.width - lay.px0,
                          lay.bottom - lay.top + lay.pad * 0.3, cls="panel-bg"))
        items += panel.rank_panel(p, trace, lay.rows, k, done, total)
        arrows, labels = panel.arrows(p, lay.rows, frame)
        frames.append(FrameView(k, headers[k], tuple(items), tuple(current), tuple(arrows),
                                _unit(headers[k]), tuple(labels)))
    titles = tuple(Text(x, y, line, size=area.small, anchor="end", cls="muted")
                   for x, y, line in top.title)
    return CpDeck(area.width, area.height, box, title, titles,
                  Text(top.header_x, top.header_y, "", size=area.head, weight=700),
                  tuple(mat.base()), tuple(_legend(p, area, legend)), tuple(frames))


def _legend(p, area: Box, legend) -> list:
    out: list = []
    for (kind, text), (x, y) in zip(legend_items(p), legend.at):
        side = legend.swatch
        if kind == "rank":
            out.append(Rect(x, y, side, side, fill=rank_colour(0, p.cp)))
        elif kind == "outline":
            out.append(Path(f"M{coord(x + 1)} {coord(y + 1)}h{coord(side - 2)}"
                            f"v{coord(side - 2)}h{coord(2 - side)}Z", cls="changed-box"))
        else:
            out.append(Rect(x, y, side, side, cls="pad" if kind == "hatch" else "blank"))
        out.append(Text(x + legend.text_dx, y + legend.text_dy, text, size=area.small,
                        cls="muted"))
    return out


def _computed_blocks(p, mat: _Matrix, frame, step) -> dict[str, set[tuple[int, int]]]:
    """Per fill colour, the (query chunk, key chunk) blocks this step computes."""
    out: dict[str, set] = {}
    u = p.a2a_size
    for r, (b, w) in enumerate(zip(step.kv_block, step.unmasked)):
        if not w > 0 or (u > 1 and r % u):
            continue           # a group's first rank speaks for the group's blocks
        q_chunks = mat.query_chunks[r]
        k_chunks = (range(mat.n) if frame.phase == "attend" else mat.query_chunks[b])
        out.setdefault(rank_colour(r, p.cp), set()).update(
            (qc, kc) for qc in q_chunks for kc in k_chunks)
    return out


def _unit(header: str) -> str:
    """The player's name for a step: the header without its "Step k: " ("ring step 2 of 4",
    "all-to-all, sequence → heads"); step 0 is "who holds what"."""
    return header.split(": ", 1)[1] if ": " in header else header


def _header(p, trace, k: int) -> str:
    frame = trace.frames[k]
    ring = [f.step for f in trace.frames if f.phase == "ring"]
    gather = [f.step for f in trace.frames if f.phase == "all_gather"]
    n = k + 1          # steps count from 1, as the player counts them
    return {"start": "Step 1: who holds what",
            "all_to_all": f"Step {n}: all-to-all, sequence → heads",
            "ring": f"Step {n}: ring step {ring.index(k) + 1 if k in ring else 0} of {len(ring)}",
            "all_gather": f"Step {n}: all-gather of K/V, "
                          f"{gather.index(k) + 1 if k in gather else 0} of {len(gather)}",
            "attend": f"Step {n}: attend locally",
            "all_to_all_back": f"Step {n}: all-to-all back, heads → sequence",
            "result": f"Step {n}: the result"}.get(frame.phase, f"Step {n}")

