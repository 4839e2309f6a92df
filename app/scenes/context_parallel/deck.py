"""The context-parallel scene as drawable geometry: one attention layer's forward pass, one frame
per step of the simulation (app.sim.context_parallel), whatever the method.

Left, the score matrix S = QKᵀ of the whole sequence at the resolution of the layout's chunks
(seq/cp tokens, seq/(2·cp) for zigzag): rows are query chunks, columns key chunks, each row
labelled with the rank that holds those queries. Above the causal diagonal it is hatched: those
scores are never computed. The matrix is drawn in layers: frame k adds the blocks computed in
step k, in the colour of the rank that computed them (while the frame is current they are
outlined), so the matrix fills up as the ring turns — with contiguous chunks the last rank's
row fills in cp steps while rank 0 is done after one; with zigzag every rank adds the same area
each step. All-to-all groups (Ulysses, hybrid) compute the same blocks for different heads: a
group's blocks take the colour of its first rank and the legend says so.

Right, redrawn each frame: a row per rank — the tokens it holds, what it holds or receives this
step, the scores it computes, and the online softmax of one of its query rows with the real
numbers: the running max m → m′, the old sum l rescaled by e^(m−m′), the new sum l′. Arrows
show the step's transfers (the ring's K/V block to the next rank, an all-to-all's pieces, the
all-gather's forwarding). Under the rows, the scores each rank has computed so far, as bars.
The last frame puts a few output numbers beside plain attention's, with their difference.

More than :data:`DETAIL_RANKS` ranks are summarised, never shrunk: the rows show the first
three ranks and the last, the bars stay one per rank, and at most :data:`ARROWS` arrows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.draw.fmt import coord
from app.draw.palette import rank_colour, text_on
from app.draw.shapes import Arrow, Path, Rect, Text
from app.sim.context_parallel.captions import METHOD_NAMES
from app.sim.context_parallel.methods import Transfers

WIDTH, HEIGHT = 1040, 490
DETAIL_RANKS = 8
ARROWS = 8
MX0, MY0, MSIZE = 64, 100, 340  # the score matrix
RX0, RX1, RY0, RY1 = 480, 1024, 60, 372   # the rank rows
BX0, BX1, BY0, BY1 = 560, 1010, 404, 462  # the work bars
COVER_TOP = 46


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    items: tuple
    current: tuple = ()          # drawn only while the frame is current (outlines)
    arrows: tuple[Arrow, ...] = ()
    unit: str = ""               # what this step is, for the player ("ring step 2 of 4")


@dataclass(frozen=True)
class CpDeck:
    width: int
    height: int
    title: str
    frames: tuple[FrameView, ...]


def deck_title(p) -> str:
    extra = f" (u {p.ulysses})" if p.method == "hybrid" else ""
    return (f"{METHOD_NAMES[p.method]}{extra} · cp {p.cp} · {p.example_tokens} tokens · "
            f"{'causal' if p.causal else 'full'} · "
            f"{'zigzag chunks' if p.balance == 'zigzag' else 'contiguous chunks'}")


def _num(x) -> str:
    if x is None:
        return "−∞"
    return f"{x:.3g}".replace("-", "−")


def _spans(tokens) -> str:
    """[0, 1, 2, 3, 14, 15] → "0–3, 14–15"."""
    tokens = sorted(int(t) for t in tokens)
    if not tokens:
        return "none"
    runs, start = [], tokens[0]
    for a, b in zip(tokens, tokens[1:] + [None]):
        if b != a + 1:
            runs.append(f"{start}" if start == a else f"{start}–{a}")
            start = b
    return ", ".join(runs)


def shown_ranks(cp: int) -> list[int]:
    return list(range(cp)) if cp <= DETAIL_RANKS else [0, 1, 2, cp - 1]


class _Matrix:
    """Chunk geometry of the score matrix."""

    def __init__(self, p, trace):
        self.p = p
        self.chunk = p.example_tokens // (2 * p.cp if p.balance == "zigzag" else p.cp)
        self.n = p.example_tokens // self.chunk
        self.cell = MSIZE / self.n
        self.owner = [0] * self.n
        for r in trace.ranks:
            for t in r.tokens:
                self.owner[t // self.chunk] = r.rank
        # the chunks of each rank's queries, once per deck (every frame reads them)
        self.query_chunks = [self.chunks(r.query_tokens) for r in trace.ranks]
        # a block's corners from tables: the same float expressions as one coord() per corner
        # (x = MX0 + kc·cell, x + cell, …), formatted once per column and row, not per block
        s = self.cell
        self._x = [coord(MX0 + c * s) for c in range(self.n)]
        self._y = [coord(MY0 + c * s) for c in range(self.n)]
        self._x1 = [coord(MX0 + c * s + s) for c in range(self.n)]
        self._y1 = [coord(MY0 + c * s + s) for c in range(self.n)]
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
        p, items = self.p, []
        items.append(Rect(MX0, MY0, MSIZE, MSIZE, cls="blank"))
        if p.causal:
            d = "".join(f"M{coord(MX0 + (q + 1) * self.cell)} {coord(MY0 + q * self.cell)}"
                        f"H{coord(MX0 + MSIZE)}v{coord(self.cell)}"
                        f"H{coord(MX0 + (q + 1) * self.cell)}Z" for q in range(self.n - 1))
            d += "".join(f"M{coord(MX0 + q * self.cell)} {coord(MY0 + q * self.cell)}"
                         f"h{coord(self.cell)}v{coord(self.cell)}Z" for q in range(self.n))
            items.append(Path(d, cls="pad"))
        step = max(1, self.n // 16)
        label = self.n <= 32
        for c in range(0, self.n, 1 if label else step):
            r = self.owner[c]
            y = MY0 + c * self.cell
            items.append(Rect(MX0 - 14, y, 10, self.cell, fill=rank_colour(r, p.cp),
                              tip=f"queries {c * self.chunk}–{(c + 1) * self.chunk - 1}: "
                                  f"rank {r}"))
            if label and self.cell >= 16:
                items.append(Text(MX0 - 18, y + self.cell / 2 + 5, str(r), anchor="end"))
        items += [Text(MX0 + MSIZE / 2, MY0 - 10, f"keys 0 … {p.example_tokens - 1} →", anchor="middle"),
                  Text(20, MY0 - 10, "rank", cls="muted"),
                  Text(MX0, MY0 + MSIZE + 22,
                       ("queries ↓ · a group's block: each rank its heads"
                        if p.a2a_size > 1 else "queries ↓ · each block: that rank's scores"),
                       cls="muted"),
                  Text(MX0, MY0 + MSIZE + 42,
                       ("hatched: above the causal diagonal, never computed" if p.causal
                        else "no mask: every block is computed"), cls="muted")]
        return items


def _computed_blocks(p, trace, mat: _Matrix, k: int, step) -> dict[str, set[tuple[int, int]]]:
    """Per fill colour, the (query chunk, key chunk) blocks step k computes."""
    frame = trace.frames[k]
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


def build_deck(trace) -> CpDeck:
    p = trace.params
    mat = _Matrix(p, trace)
    frames = []
    done = np.zeros(p.cp, dtype=np.int64)
    # each rank's scores over the whole layer: drawn dashed from step 0 (the work to come)
    total = np.sum([np.array(f.source.unmasked) for f in trace.frames], axis=0, dtype=np.int64)
    for k, frame in enumerate(trace.frames):
        items: list = []
        current: list = []
        if k == 0:
            items += [Rect(0, COVER_TOP, WIDTH, HEIGHT - COVER_TOP, cls="panel-bg")]
            items += mat.base()
        step = frame.source          # the simulation's step: per rank arrays and tuples
        for colour, blocks in _computed_blocks(p, trace, mat, k, step).items():
            d = "".join(mat.cell_path(qc, kc) for qc, kc in sorted(blocks))
            if d:
                items.append(Path(d, fill=colour, cls="filled" if mat.cell >= 8 else ""))
                current.append(Path(d, cls="changed-box"))
        done += np.array(step.unmasked)
        items += _rank_panel(p, trace, k, done, total)
        header = _header(p, trace, k)
        frames.append(FrameView(k, header, tuple(items), tuple(current),
                                tuple(_arrows(p, frame)), _unit(header)))
    return CpDeck(WIDTH, HEIGHT, deck_title(p), tuple(frames))


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


def _row_y(p, i: int) -> tuple[float, float]:
    n = len(shown_ranks(p.cp)) + (1 if p.cp > DETAIL_RANKS else 0)
    h = (RY1 - RY0) / max(n, 4)
    return RY0 + i * h, h


def _rank_panel(p, trace, k: int, done: np.ndarray, total: np.ndarray) -> list:
    frame = trace.frames[k]
    items: list = [Rect(RX0 - 10, COVER_TOP, WIDTH - RX0 + 10, HEIGHT - COVER_TOP,
                        cls="panel-bg")]
    if frame.phase == "result":
        return items + _result_panel(p, trace)
    shown = shown_ranks(p.cp)
    for i, r in enumerate(shown):
        y, h = _row_y(p, i + (1 if p.cp > DETAIL_RANKS and r == p.cp - 1 else 0))
        rf, rs = frame.rank(r), trace.ranks[r]
        colour = rank_colour(r, p.cp)
        items.append(Rect(RX0 + 30, y + 4, 40, 24, fill=colour))
        items.append(Text(RX0 + 50, y + 21, str(r), anchor="middle", weight=700,
                          fill=text_on(colour), cls=""))
        items.append(Text(RX0 + 80, y + 21, f"tokens {_spans(rs.tokens)}"))
        items.append(Text(RX0 + 300, y + 21, _doing(p, trace, frame, rf), weight=700
                          if rf.computed else 0, cls="ink" if not rf.skipped else "bad-text"))
        if rf.rows and h >= 40:
            items.append(_softmax_text(rf, y + 41))
    if p.cp > DETAIL_RANKS:
        y, _ = _row_y(p, 3)
        items.append(Text(RX0 + 80, y + 21, f"⋮  ranks 3 … {p.cp - 2} alike", cls="muted"))
    items += _bars(p, done, total)
    return items


def _softmax_text(rf, y: float) -> Text:
    """The online softmax of the shown row that this step changed most, in numbers:
    m → m′, and l′ = l·e^(m−m′) + the block's Σ e^(S−m′)."""
    row = max(rf.rows, key=lambda r: r["l_after"] - r["l_rescaled"])
    added = row["l_after"] - row["l_rescaled"]
    if not rf.computed:
        text = f"q{row['token']}: m {_num(row['m_after'])}, l {_num(row['l_after'])} unchanged"
    elif row["m_before"] is None:
        text = (f"q{row['token']}: m −∞ → {_num(row['m_after'])}   "
                f"l′ = 0 + {_num(added)} = {_num(row['l_after'])}")
    else:
        text = (f"q{row['token']}: m {_num(row['m_before'])} → {_num(row['m_after'])}   "
                f"l′ = {_num(row['l_before'])}×{_num(row['correction'])} + {_num(added)} = "
                f"{_num(row['l_after'])}")
    return Text(RX0 + 80, y, text, cls="muted")


def _doing(p, trace, frame, rf) -> str:
    phase = frame.phase
    if phase == "start":
        return "holds Q, K, V of its tokens"
    if phase == "all_to_all":
        rs = trace.ranks[rf.rank]
        return f"now heads {_spans(rs.query_heads)} of tokens {_spans(rs.query_tokens)}"
    if phase == "all_to_all_back":
        return "gets back all heads of its tokens"
    if phase == "all_gather":
        return f"holds K/V of {len(rf.holds)} of {p.cp} ranks"
    if phase == "attend":
        return f"{rf.unmasked_scores:,} scores, all keys"
    if rf.skipped:
        return f"K/V of rank {rf.kv_block}: skipped"
    if rf.kv_block is None:
        return "idle"
    return f"K/V of rank {rf.kv_block}: {rf.unmasked_scores:,} scores"


def _bars(p, done: np.ndarray, total: np.ndarray) -> list:
    """Each rank's scores so far, over a dashed outline of all it will compute (so step 0
    already shows how the work will split: with contiguous chunks and a causal mask the last
    rank's outline is cp× the first's)."""
    dashed = " · dashed: to come" if p.cp <= 16 or not done.any() else ""
    items: list = [Text(BX0 - 80, BY0 - 8, f"scores per rank{dashed}", cls="muted")]
    most = max(int(total.max()), 1)
    w = (BX1 - BX0) / p.cp
    # what is still to come, above each bar, as one path (64 ranks × 66 frames of rectangles
    # would weigh 0.4 MB); a rank that is done has none
    scale = (BY1 - BY0) / most
    items.append(Path("".join(
            f"M{coord(BX0 + r * w + w * 0.1)} {coord(BY1 - scale * work)}"
            f"v{coord(-scale * (whole - work))}h{coord(w * 0.8)}v{coord(scale * (whole - work))}"
            for r, (work, whole) in enumerate(zip(done.tolist(), total.tolist()))
            if whole > work), cls="empty"))
    for r, (work, whole) in enumerate(zip(done.tolist(), total.tolist())):
        x = BX0 + r * w + w * 0.1                  # Python ints: the same quotients, faster
        h = (BY1 - BY0) * work / most
        if h > 0:
            items.append(Rect(x, BY1 - h, w * 0.8, h,
                              fill=rank_colour(r, p.cp), tip=f"rank {r}: {work:,}"))
    items.append(Path(f"M{BX0} {BY1}H{BX1}", cls="axis"))
    items.append(Text(BX0 - 8, BY1, "0", anchor="end", cls="muted"))
    items.append(Text(BX0 - 8, BY0 + 10, f"{most:,}", anchor="end", cls="muted"))
    if p.cp > DETAIL_RANKS:
        items.append(Text(BX0, BY1 + 20, "rank 0", cls="muted"))
        items.append(Text(BX1, BY1 + 20, f"rank {p.cp - 1}", anchor="end", cls="muted"))
    else:
        items += [Text(BX0 + (r + 0.5) * w, BY1 + 20, str(r), anchor="middle", cls="muted")
                  for r in range(p.cp)]
    shares = done if done.min() > 0 else total    # before any work: the split to come
    spread = int(shares.max()) / max(int(shares.min()), 1)
    if shares.min() > 0 and spread > 1.001:
        items.append(Text(BX1, BY0 - 8, f"busiest / idlest: {spread:.2g}×", anchor="end",
                          weight=700))
    elif shares.min() > 0:
        items.append(Text(BX1, BY0 - 8, "balanced", anchor="end", weight=700))
    return items


def _result_panel(p, trace) -> list:
    items: list = [Text(RX0 + 10, RY0 + 20, "output head 0, first tokens: CP vs plain attention",
                        weight=700)]
    dims = min(p.head_dim, 3)
    y = RY0 + 50
    items.append(Text(RX0 + 10, y, "token", cls="muted"))
    items.append(Text(RX0 + 66, y, "context parallel", cls="muted"))
    items.append(Text(RX0 + 250, y, "plain attention", cls="muted"))
    items.append(Text(RX0 + 434, y, "|diff|", cls="muted"))
    for t in range(min(p.example_tokens, 8)):
        y += 24
        cpv, ref = trace.output[t, 0, :dims], trace.reference[t, 0, :dims]
        owner = next(r.rank for r in trace.ranks if t in r.tokens)
        items.append(Rect(RX0 + 10, y - 15, 44, 20, fill=rank_colour(owner, p.cp),
                          tip=f"token {t} is rank {owner}'s"))
        items.append(Text(RX0 + 32, y, str(t), anchor="middle", fill=text_on(
            rank_colour(owner, p.cp)), cls=""))
        items.append(Text(RX0 + 66, y, " ".join(f"{x:+.3f}" for x in cpv).replace("-", "−")))
        items.append(Text(RX0 + 250, y, " ".join(f"{x:+.3f}" for x in ref).replace("-", "−")))
        items.append(Text(RX0 + 434, y, f"{np.abs(cpv - ref).max():.0e}"))
    items.append(Text(RX0 + 10, y + 36, f"max |difference| over all {p.example_tokens}×{p.heads}×"
                                        f"{p.head_dim} numbers: {trace.max_abs_error:.1e}",
                      weight=700, cls="good-text" if trace.max_abs_error <= 1e-9 else "bad-text"))
    sent = trace.ranks[0].elements_sent
    items.append(Text(RX0 + 10, y + 60, f"each rank sent {sent:,} numbers", cls="muted"))
    return items


def _arrows(p, frame) -> list[Arrow]:
    """The step's transfers between the shown rows, on the rows' left edge (at most ARROWS)."""
    shown = shown_ranks(p.cp)
    where = {r: i + (1 if p.cp > DETAIL_RANKS and r == p.cp - 1 else 0)
             for i, r in enumerate(shown)}
    out = []
    firsts = [t for t in _between(frame.transfers, where) if t.src in where and t.dst in where]
    if frame.phase in ("all_to_all", "all_to_all_back"):
        firsts = [t for t in firsts if t.src == 0] or firsts
    for n, t in enumerate(firsts[:ARROWS]):
        y0 = _row_y(p, where[t.src])[0] + 16
        y1 = _row_y(p, where[t.dst])[0] + 16
        x = RX0 + 26
        bend = 14 + 10 * min(abs(where[t.dst] - where[t.src]), 6)
        colour = rank_colour(t.src, p.cp)
        d = f"M{x} {coord(y0)}C{coord(x - bend)} {coord(y0)} {coord(x - bend)} {coord(y1)} " \
            f"{coord(x - 6)} {coord(y1)}"
        head = f"{x} {coord(y1)} {x - 9} {coord(y1 - 5)} {x - 9} {coord(y1 + 5)}"
        label = f"{t.elements:,}" if n == 0 else ""
        out.append(Arrow(d, head, colour, label, x - bend - 4, (y0 + y1) / 2))
    return out


def _between(transfers, where: dict):
    """The transfers whose ends are both in ``where`` (read from the arrays of a ring or
    all-gather step, without making the other 60 of 64 ranks' transfers)."""
    if not isinstance(transfers, Transfers):
        return transfers
    shown = np.zeros(len(transfers.src), dtype=bool)
    shown[list(where)] = True
    keep = np.flatnonzero(shown[transfers.src] & shown[transfers.dst])
    return [transfers[i] for i in keep]
