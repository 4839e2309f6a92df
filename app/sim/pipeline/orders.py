"""The orders of the six pipeline schedules, as integer action ids per rank (see
:mod:`app.sim.pipeline.schedules` for the ids and the :class:`Schedule` they make).

* GPipe (Huang et al. 2019): every forward, then every backward.
* 1F1B as Megatron-LM runs it (Narayanan et al. 2021, PipeDream-Flush): rank r does
  min(p − r − 1, m) warm-up forwards, then alternates F and B, then drains the backwards.
* Interleaved 1F1B, ZB-V and DualPipeV exactly as torch 2.13's ``ScheduleInterleaved1F1B``,
  ``ScheduleZBVZeroBubble`` and ``ScheduleDualPipeV`` order them (DualPipeV's overlapped
  "F&B" pairs become an F followed by a B, which is how torch's runtime executes them).
  Interleaved warm-up on rank r: (v − 1)·m_round + 2(p − 1 − r) with m_round micro-batches per
  round (Megatron's 10, 8, 6, 4 for v = 2, p = 4, m = 8).
* ZB-H1 (Qi et al. 2023, §3.1): 1F1B with each backward split into I and W, where rank r
  postpones its W passes by r micro-batches, so that every rank keeps p micro-batches in flight
  and the late W passes fill the cool-down bubble: (p − 1)(T_F + T_B − T_W).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from app.sim.pipeline.schedules import B, F, I, W, Schedule, action_id
from app.sim.trace import readonly


def _one_then_other(warmup: np.ndarray, steady_first: np.ndarray, steady_second: np.ndarray,
                    cooldown: np.ndarray) -> np.ndarray:
    """warm-up, then steady_first[k], steady_second[k] alternately, then the cool-down."""
    pairs = np.stack([steady_first, steady_second], axis=1).reshape(-1)
    return np.concatenate([warmup, pairs, cooldown]).astype(np.int64)


def gpipe(p: int, m: int) -> list[np.ndarray]:
    mb = np.arange(m)
    return [np.concatenate([action_id(r, F, mb, m), action_id(r, B, mb, m)]) for r in range(p)]


def one_f_one_b_warmup(rank: int, p: int, m: int) -> int:
    """Megatron's num_warmup_microbatches for 1F1B: min(p − rank − 1, m)."""
    return min(p - rank - 1, m)


def one_f_one_b(p: int, m: int) -> list[np.ndarray]:
    """Megatron's 1F1B: min(p − r − 1, m) forwards, then F, B alternately, then the B's left."""
    out = []
    for r in range(p):
        w = one_f_one_b_warmup(r, p, m)
        fwd, bwd = action_id(r, F, np.arange(m), m), action_id(r, B, np.arange(m), m)
        out.append(_one_then_other(fwd[:w], fwd[w:], bwd[:m - w], bwd[m - w:]))
    return out


def zb_h1(p: int, m: int) -> list[np.ndarray]:
    """1F1B with B split into I and W; rank r runs W(i − r) after I(i), the last r W's at the
    end. Each backward step i is the triple (F(w + i) while forwards remain, I(i), W(i − r))."""
    out = []
    for r in range(p):
        w = min(p - r - 1, m)
        i = np.arange(m)
        triples = np.full((m, 3), -1, dtype=np.int64)
        triples[:m - w, 0] = action_id(r, F, np.arange(w, m), m)
        triples[:, 1] = action_id(r, I, i, m)
        late = i >= r
        triples[late, 2] = action_id(r, W, i[late] - r, m)
        steps = triples.reshape(-1)
        tail = action_id(r, W, np.arange(max(0, m - r), m), m)
        out.append(np.concatenate([action_id(r, F, np.arange(w), m), steps[steps >= 0], tail]))
    return out


def interleaved_rounds(p: int, m: int) -> tuple[int, int]:
    """(rounds, micro-batches per round) of torch's interleaved schedule: max(1, m // p) rounds,
    which must divide m."""
    rounds = max(1, m // p)
    return rounds, m // rounds


def interleaved_warmup(rank: int, p: int, m: int, v: int) -> int:
    """Forwards before rank's first backward: (v − 1)·m_round + 2(p − 1 − rank), at most m·v."""
    _, per_round = interleaved_rounds(p, m)
    return min((v - 1) * per_round + 2 * (p - 1 - rank), m * v)


def interleaved_1f1b(p: int, m: int, v: int) -> list[np.ndarray]:
    """torch's ScheduleInterleaved1F1B, depth first: forward step k runs local chunk
    (k // R) mod v on micro-batch (k // (R·v))·R + k mod R, R micro-batches per round; backward
    step j the chunks in reverse."""
    rounds, per_round = interleaved_rounds(p, m)
    if m % rounds:
        raise ValueError(f"interleaved 1F1B needs m ({m}) divisible by its rounds ({rounds})")
    k = np.arange(m * v)
    chunk = (k // per_round) % v
    mb = (k // (per_round * v)) * per_round + k % per_round
    out = []
    for r in range(p):
        w = interleaved_warmup(r, p, m, v)
        fwd = action_id(chunk * p + r, F, mb, m)
        bwd = action_id((v - 1 - chunk) * p + r, B, mb, m)
        out.append(_one_then_other(fwd[:w], fwd[w:], bwd[:m * v - w], bwd[m * v - w:]))
    return out


def zbv(p: int, m: int) -> list[np.ndarray]:
    """torch's ScheduleZBVZeroBubble: two stages per rank in a V (Qi et al. 2023, §6)."""
    n = max(2 * p - 1, m)  # built for at least 2p − 1 micro-batches, then cut back to m
    out = []
    for r in range(p):
        # ids with n micro-batches: (stage · 4 + kind) · n + micro-batch
        f0, f1 = (r * 4 + F) * n, ((2 * p - 1 - r) * 4 + F) * n
        i0, i1 = (r * 4 + I) * n, ((2 * p - 1 - r) * 4 + I) * n
        w0, w1 = (r * 4 + W) * n, ((2 * p - 1 - r) * 4 + W) * n
        order: list[int] = []
        add = order.append
        nf0 = nf1 = nb0 = nb1 = 0
        for _ in range(2 * (p - r) - 1):
            add(f0 + nf0); nf0 += 1
        for _ in range(r):
            add(f1 + nf1); nf1 += 1
            add(f0 + nf0); nf0 += 1
        for _ in range(p - r):
            add(f1 + nf1); add(i1 + nb1); add(w1 + nb1); nf1 += 1; nb1 += 1
        while nf1 < nf0 or nf0 < n:
            if nf0 < n:
                add(f0 + nf0); nf0 += 1
            add(i0 + nb0); add(w0 + nb0); nb0 += 1
            add(f1 + nf1); add(i1 + nb1); add(w1 + nb1); nf1 += 1; nb1 += 1
        nw0, nw1 = nb0, nb1
        for _ in range(r):
            add(i0 + nb0); add(i1 + nb1); nb0 += 1; nb1 += 1
        for _ in range(p - r):
            add(i0 + nb0); add(w0 + nw0); nb0 += 1; nw0 += 1
        order += range(w1 + nw1, w1 + nb1)
        order += range(w0 + nw0, w0 + nb0)
        ids = np.array(order, dtype=np.int64)
        stage_kind, mb = np.divmod(ids, n)
        keep = mb < m
        out.append(stage_kind[keep] * m + mb[keep])
    return out


def dualpipev(p: int, m: int) -> tuple[list[np.ndarray], frozenset[tuple[int, int]]]:
    """torch's ScheduleDualPipeV (DeepSeek-V3's DualPipe cut in half); needs m ≥ 2p. Returns
    the orders and the positions of the overlapped F&B pairs."""
    if m < 2 * p:
        raise ValueError(f"DualPipeV needs m ({m}) ≥ 2p ({2 * p})")
    out, overlapped = [], set()
    for r in range(p):
        down, up = r, 2 * p - 1 - r
        order: list[tuple[int, int, int]] = []
        forwards = {down: 0, up: 0}
        backwards = {down: 0, up: 0}     # a full backward B counts as that micro-batch's I
        weights: deque[tuple[int, int]] = deque()

        def add(stage: int, kind: int) -> None:
            count = forwards if kind == F else backwards
            order.append((stage, kind, count[stage]))
            if kind == I:
                weights.append((stage, count[stage]))
            count[stage] += 1

        def add_overlap(forward: int, backward: int) -> None:
            overlapped.add((r, len(order)))
            add(forward, F)
            add(backward, B)

        def add_weight() -> None:
            if weights:
                stage, mb = weights.popleft()
                order.append((stage, W, mb))

        for _ in range(2 * (p - r - 1)):                        # 1: F0
            add(down, F)
        for _ in range(r + 1):                                  # 2: F0 F1
            add(down, F); add(up, F)
        for _ in range(p - r - 1):                              # 3: I1 W1 F1
            add(up, I); add_weight(); add(up, F)
        for i in range(m - 2 * p + r + 1):                      # 4: F0&B1, F1&B0
            if i == 0 and r == p - 1:
                add(down, F); add(up, B)
            else:
                add_overlap(down, up)
            add_overlap(up, down)
        for _ in range(p - r - 1):                              # 5: B1, F1&B0
            add(up, B); add_overlap(up, down)
        split = False
        for i in range(r + 1):                                  # 6: B1 B0, then I1 I0
            if i == (r + 1) // 2 and r % 2 == 1:
                split = True
            add(up, I if split else B)
            if i == (r + 1) // 2 and r % 2 == 0:
                split = True
            add(down, I if split else B)
        for _ in range(p - r - 1):                              # 7: W0 B0
            add_weight(); add(down, I if split else B)
        for _ in range(r + 1):                                  # 8: W0
            add_weight()
        arr = np.array(order, dtype=np.int64)
        out.append(action_id(arr[:, 0], arr[:, 1], arr[:, 2], m))
    return out, frozenset(overlapped)


@dataclass(frozen=True)
class ScheduleKind:
    key: str
    title: str
    style: str
    chunks: int | None
    """fixed model chunks per rank, or None when the user chooses v (interleaved)"""
    splits_backward: bool
    source: str


SCHEDULE_KINDS: dict[str, ScheduleKind] = {k.key: k for k in (
    ScheduleKind("gpipe", "GPipe", "loop", 1, False, "Huang et al. 2019, GPipe"),
    ScheduleKind("1f1b", "1F1B", "loop", 1, False,
                 "Narayanan et al. 2021 (PTD-P): Megatron-LM's 1F1B"),
    ScheduleKind("interleaved_1f1b", "Interleaved 1F1B", "loop", None, False,
                 "Narayanan et al. 2021 (PTD-P) §2.2; torch's ScheduleInterleaved1F1B"),
    ScheduleKind("zb_h1", "ZB-H1", "loop", 1, True, "Qi et al. 2023, Zero Bubble, §3.1"),
    ScheduleKind("zbv", "ZB-V", "v", 2, True,
                 "Qi et al. 2023, Zero Bubble, §6; torch's ScheduleZBVZeroBubble"),
    ScheduleKind("dualpipev", "DualPipeV", "v", 2, True,
                 "DeepSeek-V3 (2024), DualPipe; torch's ScheduleDualPipeV"),
)}


def build(name: str, p: int, m: int, v: int = 1) -> Schedule:
    """The schedule ``name`` for p ranks, m micro-batches and (interleaved) v chunks per rank."""
    kind = SCHEDULE_KINDS[name]
    chunks = kind.chunks or v
    overlapped: frozenset[tuple[int, int]] = frozenset()
    if name == "gpipe":
        ids = gpipe(p, m)
    elif name == "1f1b":
        ids = one_f_one_b(p, m)
    elif name == "interleaved_1f1b":
        ids = interleaved_1f1b(p, m, chunks)
    elif name == "zb_h1":
        ids = zb_h1(p, m)
    elif name == "zbv":
        ids = zbv(p, m)
    else:
        ids, overlapped = dualpipev(p, m)
    return Schedule(name, p, m, chunks, kind.style,
                    tuple(readonly(np.asarray(a, dtype=np.int64)) for a in ids), overlapped)


def infeasible(name: str, p: int, m: int, v: int) -> tuple[str, str] | None:
    """Why ``name`` cannot run with p ranks, m micro-batches and v chunks per rank, as
    (parameter to change, message with the numbers); None when it can."""
    kind = SCHEDULE_KINDS[name]
    if kind.chunks is not None and v != kind.chunks:
        why = ("the two arms of its V" if kind.style == "v" else "one stage per rank")
        return "chunks", (f"chunks ({v}) does not apply to {name}: it always runs {kind.chunks} "
                          f"model chunk{'s' if kind.chunks > 1 else ''} per rank ({why}); only "
                          f"interleaved_1f1b takes chunks from 2 to 8")
    if name == "interleaved_1f1b":
        if v < 2:
            return "chunks", (f"chunks ({v}) must be from 2 to 8 for interleaved_1f1b: with one "
                              f"chunk per rank it is 1f1b")
        rounds, _ = interleaved_rounds(p, m)
        if m % rounds:
            below, above = m - m % rounds, m + rounds - m % rounds
            return "microbatches", (f"microbatches ({m}) must be a multiple of the number of "
                                    f"rounds, max(1, m // p) = {rounds}, for interleaved_1f1b "
                                    f"(torch's ScheduleInterleaved1F1B) — try {below} or {above}")
    if name == "dualpipev" and m < 2 * p:
        return "microbatches", (f"microbatches ({m}) must be at least 2 × stages = {2 * p} for "
                                f"dualpipev (torch's ScheduleDualPipeV)")
    return None
