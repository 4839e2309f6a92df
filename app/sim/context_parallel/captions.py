"""What each frame says: the step in words, with the numbers a student can check on the figure."""

from __future__ import annotations

import math

import numpy as np

from app.sim.context_parallel.methods import Run, Step

METHOD_NAMES = {"ring": "Ring Attention", "all_gather": "All-gather of K/V",
                "ulysses": "DeepSpeed-Ulysses", "hybrid": "Hybrid Ulysses × ring"}


def _num(x: float) -> str:
    return "−∞" if x == -math.inf else f"{x:.3g}".replace("-", "−")


def _ranks(ranks) -> str:
    ranks = list(ranks)
    if not ranks:
        return "none"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _by_rank(values) -> str:
    """"0, 64, 64, 64 (by rank)", or beyond eight ranks "0 to 64 per rank"."""
    values = [int(v) for v in values]
    if len(values) <= 8:
        return f"{', '.join(map(str, values))} (by rank)"
    low, high = min(values), max(values)
    return f"{low:,} on every rank" if low == high else f"{low:,} to {high:,} per rank"


def _layout(p) -> str:
    n = p.example_tokens // p.cp
    if p.balance == "zigzag":
        c = p.example_tokens // (2 * p.cp)
        return (f"zigzag: the {p.example_tokens} tokens are cut into 2·cp = {2 * p.cp} chunks of {c} and "
                f"rank r holds chunks r and {2 * p.cp - 1}−r ({n} tokens each)")
    return f"contiguous: rank r holds tokens {n}·r … {n}·r+{n - 1}"


def start(p, run: Run) -> str:
    kind = "causal " if p.causal else ""
    what = {"ring": "Its K/V block will travel round the ring while every rank keeps its "
                    "queries, merging one block per step with the online softmax.",
            "all_gather": "First every rank gathers every K/V block (a ring all-gather), then "
                          "attends once against the whole sequence.",
            "ulysses": f"An all-to-all will trade tokens for heads: each rank gets all {p.example_tokens} "
                       f"tokens of {p.heads // p.cp} query head(s) and attends locally.",
            "hybrid": f"An all-to-all inside each group of {p.ulysses} ranks trades tokens for "
                      f"heads, then a ring of {p.cp // p.ulysses} groups passes the K/V blocks."
            }[p.method]
    return (f"{METHOD_NAMES[p.method]} on {p.cp} ranks, {kind}attention over {p.example_tokens} tokens, "
            f"{p.heads} query heads reading {p.kv_heads} key/value head(s) of {p.head_dim} "
            f"dimensions. Layout {_layout(p)}. {what}")


def all_to_all(p, step: Step) -> str:
    u = p.cp if p.method == "ulysses" else p.ulysses
    total = sum(t.elements for t in step.transfers if t.src == 0)
    return (f"All-to-all of Q, K and V inside each group of {u} ranks (sequence → heads): rank "
            f"i of a group keeps heads i·{p.heads // u} … and receives them for the tokens of "
            f"the whole group ({u * p.example_tokens // p.cp} tokens). Each rank sends {u - 1}/{u} of its "
            f"Q, K and V: {total:,} numbers.")


def ring_step(p, run: Run, s: int, step: Step, ring: int) -> str:
    u = 1 if p.method == "ring" else p.ulysses
    skipped = [r for r, (b, w) in enumerate(zip(step.kv_block, step.unmasked))
               if b is not None and w == 0]
    head = (f"Ring step {s + 1} of {ring}: rank r attends with its queries to the K/V block "
            f"that started at rank r − {s * u}" + (f" (mod {p.cp})" if s else " — its own") + ".")
    if skipped:
        head += (f" {_ranks(skipped) if len(skipped) <= 4 else f'{len(skipped)} ranks'} "
                 f"skip{'s' if len(skipped) == 1 else ''} it: the block lies wholly above the "
                 f"causal diagonal.")
    elif p.causal and p.balance == "zigzag" and s:
        head += " Zigzag: every rank has the same number of unmasked scores this step."
    work = f" Scores computed: {_by_rank(step.unmasked)}."
    if s < ring - 1:
        send = step.transfers[0].elements
        move = (f" Meanwhile each rank passes the block to rank r + {u} ({send:,} numbers of K "
                f"and V), overlapping the compute.")
    else:
        move = " Last step: nothing left to send."
    rows = step.rows
    example = ""
    if rows is not None:
        # the shown row that this block changed most: what it added to the rescaled sum
        added = rows.l_after - rows.l_before * rows.correction               # (cp, rows)
        r, i = (int(x) for x in np.unravel_index(np.argmax(added), added.shape))
        m0, m1 = rows.m_before[r, i], rows.m_after[r, i]
        l0, l1, f = rows.l_before[r, i], rows.l_after[r, i], rows.correction[r, i]
        example = (f" Rank {r}, token {int(rows.tokens[r, i])}, head {int(run.q_heads[r, 0])}: "
                   f"m {_num(m0)} → {_num(m1)}, l′ = {_num(l0)}·e^(m−m′) + Σe^(S−m′) = "
                   f"{_num(l0 * f)} + {_num(l1 - l0 * f)} = {_num(l1)}.")
    return head + work + move + example


def all_gather_step(p, s: int, step: Step) -> str:
    full = sum(1 for h in step.held if len(h) == p.cp)
    return (f"All-gather step {s + 1} of {p.cp - 1}: each rank forwards to rank r + 1 the K/V "
            f"block it received last (at first its own), {step.transfers[0].elements:,} numbers."
            f" {full} of {p.cp} ranks now hold the whole sequence's K and V.")


def attend(p, step: Step) -> str:
    if p.method == "ulysses":
        return (f"Each rank attends locally: all {p.example_tokens} queries of its {p.heads // p.cp} "
                f"head(s) against all {p.example_tokens} keys of its {p.kv_heads // p.cp} key/value "
                f"head(s) — one ordinary attention, no ring. Scores computed: "
                f"{_by_rank(step.unmasked)}: the same on every rank, "
                f"whatever the mask and the layout.")
    return (f"Every rank attends with its {p.example_tokens // p.cp} queries to all {p.example_tokens} keys at once "
            f"(the gathered K, V: {2 * p.example_tokens * p.kv_heads * p.head_dim:,} numbers on every "
            f"rank). Scores computed: {_by_rank(step.unmasked)}.")


def all_to_all_back(p, step: Step) -> str:
    u = p.cp if p.method == "ulysses" else p.ulysses
    return (f"All-to-all of the output back (heads → sequence): each rank returns the rows of "
            f"its heads to the ranks that own the tokens; rank r ends with all {p.heads} heads "
            f"of its own {p.example_tokens // p.cp} tokens ({step.transfers[0].elements:,} numbers to each "
            f"of the {u - 1} others).")


def result(p, error: float, sent: list[int]) -> str:
    return (f"Each rank divides its accumulator by the running sum: O = o / l. Gathered in "
            f"token order, the output equals plain softmax(QKᵀ/√d + mask)·V to "
            f"{error:.1e}. Each rank sent "
            + (f"{', '.join(f'{x:,}' for x in sent)} numbers." if len(set(sent)) > 1 or
               len(sent) <= 4 else f"{sent[0]:,} numbers."))


def captions(p, run: Run, error: float, sent: list[int]) -> list[str]:
    out = []
    ring_steps = [k for k, s in enumerate(run.steps) if s.phase == "ring"]
    gather_steps = [k for k, s in enumerate(run.steps) if s.phase == "all_gather"]
    for k, step in enumerate(run.steps):
        if step.phase == "start":
            out.append(start(p, run))
        elif step.phase == "all_to_all":
            out.append(all_to_all(p, step))
        elif step.phase == "ring":
            out.append(ring_step(p, run, ring_steps.index(k), step, len(ring_steps)))
        elif step.phase == "all_gather":
            out.append(all_gather_step(p, gather_steps.index(k), step))
        elif step.phase == "attend":
            out.append(attend(p, step))
        elif step.phase == "all_to_all_back":
            out.append(all_to_all_back(p, step))
        else:
            out.append(result(p, error, sent))
    return out


def load_note(unmasked: np.ndarray) -> str:
    """'rank 3 computes 5.8× what rank 0 does' — the causal imbalance in words."""
    low, high = int(unmasked.min()), int(unmasked.max())
    if low == high:
        return "every rank computes the same number of scores"
    return (f"rank {int(unmasked.argmax())} computes {high / max(low, 1):.1f}× the scores of "
            f"rank {int(unmasked.argmin())}")
