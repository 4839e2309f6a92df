"""Context parallelism against references that know nothing about ranks: attention written out
query by query in this file, token ownership and volumes written from DESIGN.md's sentences,
unmasked pairs counted by brute force, and the published formulas (Korthikanti Table 2, Liu et
al.'s c ≥ F/B, the α–β model of app/sim/collectives/cost.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.params import ParamsError, parse
from app.sim.collectives.cost import Links, collective_time_us, ring_time_us
from app.sim.context_parallel import cost, memory, wall
from app.sim.context_parallel.attention import reference_attention
from app.sim.context_parallel.inputs import make_inputs
from app.sim.context_parallel.layout import a2a_groups, owner, ring_groups, tokens_table
from app.sim.context_parallel.methods import heads_to_seq, seq_to_heads
from app.sim.context_parallel.params import MAX_SEQ, ContextParallelParams
from app.sim.context_parallel.simulate import simulate
from app.sim.context_parallel.volumes import elements_sent
from app.catalog.gpus import GPUS
from app.catalog.models import PRESETS

TOL = 1e-9
METHODS = ("ring", "all_gather", "ulysses", "hybrid")


def P(**kw) -> ContextParallelParams:
    return ContextParallelParams(**kw)


# --- references written here ------------------------------------------------------------------

def attention_by_rows(q, k, v, causal):
    """One query row at a time, softmax by hand: O[i, h] = Σ_j e^{s_ij} v_j / Σ_j e^{s_ij}."""
    seq, heads, d = q.shape
    per_kv = heads // k.shape[1]
    out = np.zeros_like(q)
    for i in range(seq):
        for h in range(heads):
            keys = range(i + 1) if causal else range(seq)
            s = np.array([q[i, h] @ k[j, h // per_kv] / math.sqrt(d) for j in keys])
            w = np.exp(s - s.max())
            out[i, h] = (w[:, None] * v[list(keys), h // per_kv]).sum(0) / w.sum()
    return out


def design_tokens(seq, cp, balance, r):
    """DESIGN.md: none — contiguous blocks of seq/cp; zigzag — 2·cp chunks, r and 2·cp−1−r."""
    if balance == "none":
        n = seq // cp
        return list(range(r * n, (r + 1) * n))
    c = seq // (2 * cp)
    return list(range(r * c, (r + 1) * c)) + list(range((2 * cp - 1 - r) * c, (2 * cp - r) * c))


def design_elements(method, cp, seq, heads, kv, d, u=1):
    n = seq // cp
    if method in ("ring", "all_gather"):
        return 2 * (cp - 1) * n * kv * d
    if method == "ulysses":
        return (cp - 1) * n * d * (2 * heads + 2 * kv) / cp
    return (u - 1) * n * d * (2 * heads + 2 * kv) / u + 2 * (cp // u - 1) * n * kv * d


CASES = [  # (method, cp, ulysses, seq, heads, kv_heads, head_dim)
    ("ring", 2, 1, 8, 2, 1, 3), ("ring", 3, 1, 12, 3, 3, 2), ("ring", 4, 1, 16, 4, 2, 4),
    ("ring", 8, 1, 32, 2, 2, 5), ("all_gather", 2, 1, 8, 4, 4, 2),
    ("all_gather", 3, 1, 18, 6, 2, 3), ("all_gather", 5, 1, 20, 2, 1, 4),
    ("ulysses", 2, 2, 8, 2, 2, 3), ("ulysses", 3, 3, 12, 6, 3, 2), ("ulysses", 4, 4, 16, 8, 4, 4),
    ("hybrid", 4, 2, 16, 4, 2, 3), ("hybrid", 6, 3, 24, 6, 3, 2), ("hybrid", 8, 2, 32, 4, 2, 2),
    ("hybrid", 8, 4, 16, 8, 4, 2), ("hybrid", 4, 1, 16, 4, 2, 2), ("hybrid", 4, 4, 16, 4, 4, 2),
]


def case_params(case, causal, balance, seed=0):
    method, cp, u, seq, heads, kv, d = case
    if balance == "zigzag" and seq % (2 * cp):
        seq *= 2
    return P(method=method, cp=cp, ulysses=u, seq=seq, heads=heads, kv_heads=kv, head_dim=d,
             causal=causal, balance=balance, seed=seed)


# --- the output ---------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-cp{c[1]}-u{c[2]}-s{c[3]}")
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("balance", ["none", "zigzag"])
def test_every_method_equals_plain_attention(case, causal, balance):
    p = case_params(case, causal, balance, seed=7)
    trace = simulate(p)
    q, k, v = make_inputs(p.seq, p.heads, p.kv_heads, p.head_dim, p.seed)
    want = attention_by_rows(q, k, v, causal)
    assert np.abs(trace.output - want).max() <= TOL
    assert trace.max_abs_error <= TOL
    assert np.abs(trace.reference - want).max() <= TOL


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(METHODS), st.sampled_from([2, 4, 8]), st.sampled_from([1, 2, 3]),
       st.sampled_from([1, 2, 4]), st.integers(1, 6), st.booleans(),
       st.sampled_from(["none", "zigzag"]), st.integers(0, 2**31 - 1))
def test_any_size_any_seed(method, cp, per_rank, kv, d, causal, balance, seed):
    heads = kv * 2 if cp <= kv * 2 else kv
    u = 2
    if method == "ulysses" and (heads % cp or kv % cp):
        heads = kv = cp
    if method == "hybrid" and (heads % u or kv % u):
        heads, kv = 2 * u, u
    seq = cp * per_rank * (2 if balance == "zigzag" else 1)
    p = P(method=method, cp=cp, ulysses=u, seq=seq, heads=heads, kv_heads=kv, head_dim=d,
          causal=causal, balance=balance, seed=seed)
    trace = simulate(p)
    assert trace.max_abs_error <= TOL
    assert [r.elements_sent for r in trace.ranks] == [design_elements(
        method, cp, seq, heads, kv, d, u)] * cp


def test_reference_is_torch_free_and_plain():
    q, k, v = make_inputs(5, 4, 2, 3, 1)
    for causal in (True, False):
        assert np.abs(reference_attention(q, k, v, causal)
                      - attention_by_rows(q, k, v, causal)).max() <= 1e-12


def test_inputs_are_seeded_and_rounded():
    a, b = make_inputs(8, 4, 2, 3, 5), make_inputs(8, 4, 2, 3, 5)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert a[0].shape == (8, 4, 3) and a[1].shape == a[2].shape == (8, 2, 3)
    assert np.array_equal(a[0], np.round(a[0], 2))
    assert not np.array_equal(make_inputs(8, 4, 2, 3, 6)[0], a[0])


def test_logsumexp_is_flash_attentions_statistic():
    p = P(method="ring", cp=4, seq=16, balance="zigzag")
    trace = simulate(p)
    q, k, _ = trace.q, trace.k, trace.v
    group = p.heads // p.kv_heads
    for i in range(p.seq):
        for h in range(p.heads):
            s = np.array([q[i, h] @ k[j, h // group] for j in range(i + 1)]) / math.sqrt(p.head_dim)
            assert trace.run.lse[i, h] == pytest.approx(np.log(np.exp(s).sum()), abs=1e-12)


# --- tokens, scores and volumes ---------------------------------------------------------------

@pytest.mark.parametrize("seq,cp", [(8, 2), (12, 3), (16, 4), (64, 8), (256, 64)])
@pytest.mark.parametrize("balance", ["none", "zigzag"])
def test_tokens_per_rank_follow_design(seq, cp, balance):
    if balance == "zigzag" and seq % (2 * cp):
        pytest.skip("zigzag needs seq divisible by 2·cp")
    table = tokens_table(seq, cp, balance)
    for r in range(cp):
        assert table[r].tolist() == design_tokens(seq, cp, balance, r)
    assert sorted(table.ravel().tolist()) == list(range(seq))      # every token once
    assert all(table[owner(seq, cp, balance)[t]].tolist().count(t) == 1 for t in range(seq))


def test_zigzag_example():
    assert tokens_table(16, 4, "zigzag").tolist() == [
        [0, 1, 14, 15], [2, 3, 12, 13], [4, 5, 10, 11], [6, 7, 8, 9]]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-cp{c[1]}-u{c[2]}")
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("balance", ["none", "zigzag"])
def test_unmasked_scores_are_the_pairs_of_the_ranks_queries(case, causal, balance):
    """Ring / all-gather: the rank's own tokens × all heads; Ulysses: every token × heads/cp;
    hybrid: its group's tokens × heads/ulysses. Causal: key ≤ query; else every key."""
    p = case_params(case, causal, balance)
    trace = simulate(p)
    u = {"ring": 1, "all_gather": 1, "ulysses": p.cp, "hybrid": p.ulysses}[p.method]
    for r, rank in enumerate(trace.ranks):
        assert list(rank.tokens) == design_tokens(p.seq, p.cp, balance, r)
        group = next(g for g in a2a_groups(p.cp, u) if r in g)
        queries = [t for m in group for t in design_tokens(p.seq, p.cp, balance, m)]
        per_head = sum(t + 1 for t in queries) if causal else len(queries) * p.seq
        assert rank.unmasked_scores == per_head * p.heads // u
    total = sum(r.unmasked_scores for r in trace.ranks)
    assert total == p.heads * (p.seq * (p.seq + 1) // 2 if causal else p.seq * p.seq)


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_zigzag_balances_the_causal_work_and_contiguous_does_not(cp):
    seq = 4 * cp
    flat = simulate(P(cp=cp, seq=seq, balance="none"))
    zig = simulate(P(cp=cp, seq=seq, balance="zigzag"))
    assert len({r.unmasked_scores for r in zig.ranks}) == 1
    work = [r.unmasked_scores for r in flat.ranks]
    assert work == sorted(work) and work[0] < work[-1]
    # every ring step of zigzag gives every rank the same work as well
    for frame in zig.frames:
        if frame.phase == "ring":
            assert len({r.unmasked_scores for r in frame.ranks}) == 1


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-cp{c[1]}-u{c[2]}")
@pytest.mark.parametrize("balance", ["none", "zigzag"])
def test_elements_sent_are_the_formula_and_the_sum_of_the_transfers(case, balance):
    p = case_params(case, True, balance)
    trace = simulate(p)
    want = design_elements(p.method, p.cp, p.seq, p.heads, p.kv_heads, p.head_dim, p.ulysses)
    assert elements_sent(p.method, p.cp, p.seq, p.heads, p.kv_heads, p.head_dim,
                         p.ulysses) == want
    moved = [0] * p.cp
    for frame in trace.frames:
        for t in frame.transfers:
            assert t.src != t.dst and t.elements > 0
            moved[t.src] += t.elements
    assert moved == [want] * p.cp == [r.elements_sent for r in trace.ranks]
    assert isinstance(trace.ranks[0].elements_sent, int)
    assert trace.elements_formula.endswith(f"= {int(want):,}")


def test_hybrid_at_its_ends_is_ring_and_ulysses():
    base = dict(cp=4, seq=16, heads=4, kv_heads=4, head_dim=2, seed=3, balance="zigzag")
    for u, other in ((1, "ring"), (4, "ulysses")):
        hybrid, plain = simulate(P(method="hybrid", ulysses=u, **base)), simulate(P(method=other,
                                                                                     **base))
        assert [r.elements_sent for r in hybrid.ranks] == [r.elements_sent for r in plain.ranks]
        assert [r.unmasked_scores for r in hybrid.ranks] == \
            [r.unmasked_scores for r in plain.ranks]
        assert np.array_equal(hybrid.output, plain.output)


def test_all_to_all_is_an_all_to_all():
    """seq_to_heads sends rank src's head slice dst to rank dst; heads_to_seq undoes it."""
    cp, n, h, d, u = 4, 2, 4, 3, 2
    x = np.arange(cp * n * h * d, dtype=float).reshape(cp, n, h, d)
    y = seq_to_heads(x, u)
    for dst in range(cp):
        g, i = divmod(dst, u)
        for j, src in enumerate(range(g * u, g * u + u)):
            assert np.array_equal(y[dst, j * n:(j + 1) * n], x[src, :, i * h // u:(i + 1) * h // u])
    assert np.array_equal(heads_to_seq(y, u), x)


def test_groups_come_from_the_mesh():
    assert a2a_groups(8, 2) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert ring_groups(8, 2) == [(0, 2, 4, 6), (1, 3, 5, 7)]
    assert ring_groups(4, 1) == [(0, 1, 2, 3)] and a2a_groups(4, 4) == [(0, 1, 2, 3)]


# --- frames ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("cp", [2, 4, 8])
@pytest.mark.parametrize("balance", ["none", "zigzag"])
def test_ring_frames(cp, balance):
    p = P(cp=cp, seq=4 * cp, balance=balance, heads=4, kv_heads=2, head_dim=2)
    trace = simulate(p)
    phases = [f.phase for f in trace.frames]
    assert phases == ["start"] + ["ring"] * cp + ["result"]
    assert [f.step for f in trace.frames] == list(range(cp + 2))
    n = p.seq // cp
    for s, frame in enumerate(f for f in trace.frames if f.phase == "ring"):
        for r, rf in enumerate(frame.ranks):
            assert rf.kv_block == (r - s) % cp
            assert rf.holds == ((r - s) % cp,)
            # contiguous and causal: a block from a later rank lies above the diagonal
            assert rf.skipped == (balance == "none" and (r - s) % cp > r)
            assert rf.computed == (not rf.skipped)
        want = [] if s == cp - 1 else [(r, (r + 1) % cp, 2 * n * p.kv_heads * p.head_dim)
                                       for r in range(cp)]
        assert [(t.src, t.dst, t.elements) for t in frame.transfers] == want
        assert frame.caption.startswith(f"Ring step {s + 1} of {cp}")
    assert all(not r.computed for r in trace.frames[0].ranks)
    assert "1e" in trace.frames[-1].caption or "e-" in trace.frames[-1].caption


def test_rows_show_the_online_softmax():
    """m only grows; l' = l·e^{m−m'} + (this block's Σ e^{S−m'}); after the last step
    m + log l is the row's logsumexp."""
    trace = simulate(P(cp=4, seq=16, balance="zigzag"))
    last = {}
    for frame in trace.frames:
        if frame.phase != "ring":
            continue
        for rf in frame.ranks:
            for row in rf.rows:
                before = -math.inf if row["m_before"] is None else row["m_before"]
                assert row["m_after"] >= before
                assert row["correction"] == pytest.approx(math.exp(before - row["m_after"]))
                assert row["l_rescaled"] == pytest.approx(row["l_before"] * row["correction"])
                assert row["l_after"] >= row["l_rescaled"] - 1e-12
                last[(rf.rank, row["token"])] = row
    for (rank, token), row in last.items():
        head = trace.run.q_heads[rank, 0]
        assert row["m_after"] + math.log(row["l_after"]) == pytest.approx(
            trace.run.lse[token, head], abs=1e-12)
    first = next(f for f in trace.frames if f.phase == "ring")
    assert all(row["m_before"] is None and row["l_before"] == 0
               for rf in first.ranks for row in rf.rows)


@pytest.mark.parametrize("method,cp,u,phases", [
    ("all_gather", 4, 2, ["start"] + ["all_gather"] * 3 + ["attend", "result"]),
    ("ulysses", 4, 2, ["start", "all_to_all", "attend", "all_to_all_back", "result"]),
    ("hybrid", 8, 2, ["start", "all_to_all"] + ["ring"] * 4 + ["all_to_all_back", "result"]),
])
def test_other_methods_frames(method, cp, u, phases):
    p = P(method=method, cp=cp, ulysses=u, seq=2 * cp, heads=8, kv_heads=4, head_dim=2)
    trace = simulate(p)
    assert [f.phase for f in trace.frames] == phases
    if method == "all_gather":
        holds = [[len(r.holds) for r in f.ranks] for f in trace.frames if f.phase == "all_gather"]
        assert holds == [[s + 2] * cp for s in range(cp - 1)]
    if method == "hybrid":
        ring = [f for f in trace.frames if f.phase == "ring"]
        for s, frame in enumerate(ring[:-1]):
            assert {(t.src, t.dst) for t in frame.transfers} == {(r, (r + u) % cp)
                                                                for r in range(cp)}
            assert [rf.kv_block for rf in frame.ranks] == [(r - s * u) % cp for r in range(cp)]


def test_step_work_at_scale_equals_the_simulated_counts():
    """cost.step_pairs counts pairs on ranges in closed form; on the worked example it must give
    what the simulated masks count, step by step and rank by rank."""
    for method, cp, u in (("ring", 4, 1), ("ring", 8, 1), ("hybrid", 8, 2), ("hybrid", 8, 4),
                          ("ulysses", 4, 4)):
        for balance in ("none", "zigzag"):
            for causal in (True, False):
                p = P(method=method, cp=cp, ulysses=u, seq=4 * cp, heads=8, kv_heads=4,
                      head_dim=2, balance=balance, causal=causal)
                trace = simulate(p)
                got = cost.step_pairs(p.seq, cp, u, balance, causal) * (p.heads // u)
                want = [[rf.unmasked_scores for rf in f.ranks]
                        for f in trace.frames if f.phase in ("ring", "attend")]
                assert got.tolist() == want, (method, cp, u, balance, causal)


def test_pairs_closed_form_against_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(200):
        q_lo, k_lo = rng.integers(0, 50, 2)
        q_hi, k_hi = q_lo + rng.integers(0, 30), k_lo + rng.integers(0, 30)
        brute = sum(1 for i in range(q_lo, q_hi) for j in range(k_lo, k_hi) if j <= i)
        assert cost.pairs(q_lo, q_hi, k_lo, k_hi, True) == brute
        assert cost.pairs(q_lo, q_hi, k_lo, k_hi, False) == (q_hi - q_lo) * (k_hi - k_lo)


# --- validation -----------------------------------------------------------------------------

@pytest.mark.parametrize("query,param,text", [
    ({"method": "ulysses", "cp": "3", "seq": "12"}, "cp",
     "cp (3) must divide heads (4) for ulysses"),
    ({"method": "ulysses", "cp": "4", "kv_heads": "2"}, "cp", "cp (4) must divide kv_heads (2)"),
    ({"cp": "3"}, "example_seq", "example_seq (16) must be divisible by cp (3)"),
    ({"cp": "3", "seq": "16"}, "seq", "seq (16) must be divisible by cp (3)"),
    ({"cp": "4", "balance": "zigzag", "seq": "12"}, "seq", "divisible by 2·cp (8)"),
    ({"kv_heads": "3"}, "kv_heads", "kv_heads (3) must divide heads (4)"),
    ({"kv_heads": "8"}, "kv_heads", "kv_heads (8) must not exceed heads (4)"),
    ({"method": "hybrid", "cp": "4", "ulysses": "3", "seq": "24"}, "ulysses",
     "ulysses (3) must divide cp (4)"),
    ({"method": "hybrid", "cp": "8", "ulysses": "4", "seq": "32", "kv_heads": "2"}, "ulysses",
     "ulysses (4) must divide kv_heads (2)"),
    ({"seq": "8192", "example_seq": str(MAX_SEQ + 1)}, "example_seq", f"1 to {MAX_SEQ}"),
    ({"heads": "32", "kv_heads": "32"}, "heads", "heads ≤ 16"),
    ({"head_dim": "17"}, "head_dim", "head_dim ≤ 16"),
    ({"cp": "65"}, "cp", "from 2 to 64"),
    ({"seq": "0"}, "seq", "from 1 to 1048576"),
    ({"context": "0"}, "seq", "from 1 to 1048576"),            # the old name, read as the new
    ({"method": "tree"}, "method", "ring, all_gather, ulysses, hybrid"),
])
def test_bad_input_names_the_parameter_and_the_numbers(query, param, text):
    with pytest.raises(ParamsError) as caught:
        parse(ContextParallelParams, query)
    problem = caught.value.problems[0]
    assert problem.param == param and text in problem.message, problem.message


def test_ulysses_is_ignored_unless_hybrid():
    assert P(method="ring", ulysses=3).ulysses == 3
    assert P(method="ulysses", cp=2, ulysses=64).a2a_size == 2
    assert P(method="hybrid", cp=4, ulysses=2).ring_size == 2


# --- the wall, memory, time ------------------------------------------------------------------

def test_wall_formulas():
    model = PRESETS["gpt3-175b"]
    w = wall.wall(model, 1, True, "a100-80", 2048)
    a, h, s = model.heads, model.hidden, 2048
    pt = w.at_context
    assert pt.score_bytes == 2 * a * s * s
    assert pt.flash_stats_bytes == 4 * a * s
    assert pt.attention_flops == 4 * s * s * h / 2
    # Korthikanti Table 2, no parallelism: sbh(34 + 5as/h) = 2736 MiB for GPT-3 at s = 2048
    assert pt.activations_bytes == s * h * (34 + 5 * a * s / h)
    assert pt.activations_bytes / 2**20 == pytest.approx(2736, abs=1)
    assert pt.activations_flash_bytes == 34 * s * h + 4 * a * s
    cap = GPUS["a100-80"].capacity
    assert 2 * a * w.scores_limit ** 2 <= cap < 2 * a * (w.scores_limit + 1) ** 2
    per_layer = lambda x: x * h * (34 + 5 * a * x / h)  # noqa: E731
    assert model.layers * per_layer(w.activations_limit) <= cap
    assert model.layers * per_layer(w.activations_limit + 1) > cap
    assert model.layers * (34 * h + 4 * a) * w.flash_limit <= cap
    assert w.activations_limit < w.flash_limit
    assert [x.context for x in w.points] == [2 ** k for k in range(10, 21)]


def test_attention_dominates_past_a_few_h():
    """Forward: attention 4bs²h (½ causal) against ≈ 24bsh² for GPT: they meet at s ≈ 6h (12h
    causal)."""
    model = PRESETS["gpt3-175b"]
    w = wall.wall(model, 1, False, "h100-80", 2048)
    assert w.attention_dominates_from == pytest.approx(6 * model.hidden, rel=0.01)
    assert wall.wall(model, 1, True, "h100-80", 2048).attention_dominates_from == \
        pytest.approx(12 * model.hidden, rel=0.01)


def test_memory_per_rank_as_cp_grows():
    model = PRESETS["llama3-8b"]
    ring = [memory.rank_memory(model, 131072, c, 1, "ring", 2, "selective", "h100-80").total_bytes
            for c in cost.CP_SWEEP]
    assert all(a > b for a, b in zip(ring, ring[1:]))
    assert ring[0] / ring[-1] == pytest.approx(64, rel=0.01)
    gathered = [memory.buffer_bytes(model, 131072, c, 1, "all_gather", 2) for c in (2, 8, 64)]
    assert len(set(gathered)) == 1 == len({gathered[0], 2 * 131072 * 8 * 128 * 2})
    # without FlashAttention a rank keeps c × context softmax rows: cp divides, never linear
    none = memory.activation_bytes(model, 131072, 8, 1, "none")
    flash = memory.activation_bytes(model, 131072, 8, 1, "selective")
    assert none - flash == pytest.approx(
        model.layers * (2 * model.heads * (131072 / 8) * 131072 - 4 * model.heads * 131072 / 8))


def test_cp_needed_is_the_first_power_of_two_that_fits():
    model = PRESETS["llama3-8b"]
    for context in (131072, 1048576):
        cp, _ = memory.cp_needed(model, context, 1, "ring", 2, "selective", "h100-80")
        fits = [c for c in (2 ** k for k in range(17))
                if memory.rank_memory(model, context, c, 1, "ring", 2, "selective",
                                      "h100-80").fits]
        assert cp == fits[0]
    cp, why = memory.cp_needed(model, 1048576, 1, "ulysses", 2, "selective", "h100-80")
    assert cp is None and "kv_heads (8)" in why


def test_overlap_crossover_is_f_over_b():
    """Liu et al. 2023: with multi-head attention the transfer hides when c ≥ F/B."""
    mha = PRESETS["gpt3-175b"]
    sc = cost.Scale(mha, 131072, 1, "none", False, 989.0, 0.0, 450.0, 50.0, 8)
    o = cost.overlap(sc, "ring", 8, 1)
    for link in o.links:
        assert link.crossover_tokens == pytest.approx(989e12 / (link.gbs * 1e9))
        assert link.crossover_alpha_tokens == pytest.approx(link.crossover_tokens)
    gqa = cost.overlap(cost.Scale(PRESETS["llama3-8b"], 131072, 1, "zigzag", True, 989.0, 5.0,
                                  450.0, 50.0, 8), "ring", 8, 1)
    nv = gqa.links[0]
    assert nv.crossover_tokens == pytest.approx(8 / 32 * 989e12 / 450e9)   # H_kv/H · F/B
    c = nv.crossover_alpha_tokens       # at the crossover the compute equals the transfer
    per_c2 = 4 * 32 * 128 / (989.0 * 1e6)
    assert per_c2 * c * c == pytest.approx(5.0 + 2 * 8 * 128 * 2 / (450 * 1e3) * c)
    assert nv.crossover_causal_tokens > c and gqa.half_block
    assert not cost.overlap(sc, "ulysses", 8, 8).applies


def test_layer_time_uses_the_alpha_beta_model():
    model = PRESETS["llama3-8b"]
    sc = cost.Scale(model, 131072, 1, "zigzag", True, 989.0, 5.0, 450.0, 50.0, 8)
    c, kv_bytes = 131072 / 8, 131072 / 8 * 8 * 128 * 2
    ag = cost.layer_time(sc, "all_gather", 8, 2, "placed")
    assert ag.comm_us == pytest.approx(ring_time_us("all_gather", 8, 2 * kv_bytes * 8,
                                                    sc.links("placed")))
    assert ag.total_us == pytest.approx(ag.compute_us + ag.comm_us)
    ring = cost.layer_time(sc, "ring", 8, 1, "infiniband")
    assert ring.step_comm_us == pytest.approx(5.0 + 2 * kv_bytes / 50e3)
    assert ring.comm_us == pytest.approx(7 * ring.step_comm_us)
    assert ring.compute_us <= ring.total_us <= ring.compute_us + ring.comm_us
    uly = cost.layer_time(sc, "ulysses", 8, 8, "placed")
    links = Links(5.0, 450.0, 50.0, 8)
    q_bytes = c * 32 * 128 * 2
    assert uly.comm_us == pytest.approx(sum(collective_time_us("all_to_all", 8, links, x, "direct")
                                            for x in (q_bytes, kv_bytes, kv_bytes, q_bytes)))
    nv, ib = (cost.layer_time(sc, "ring", 16, 1, pl) for pl in ("nvlink", "infiniband"))
    placed = cost.layer_time(sc, "ring", 16, 1, "placed")     # 16 ranks on nodes of 8
    assert nv.comm_us < ib.comm_us and placed.comm_us == pytest.approx(ib.comm_us)
    # zigzag halves the slowest rank's causal work against contiguous blocks
    flat = cost.Scale(model, 131072, 1, "none", True, 989.0, 5.0, 450.0, 50.0, 8)
    zig, con = cost.layer_time(sc, "ring", 8, 1, "nvlink"), cost.layer_time(flat, "ring", 8, 1,
                                                                            "nvlink")
    assert zig.compute_us / con.compute_us == pytest.approx(8 / 15, rel=0.01)
    one = cost.layer_time(sc, "ring", 1, 1, "placed")
    assert one.compute_us == pytest.approx(2 * 131072 * 131073 * 4096 / (989.0 * 1e6))


# --- the JSON and the budget ------------------------------------------------------------------

def test_json_contract():
    trace = simulate(P(method="hybrid", cp=4, ulysses=2, seq=16, balance="zigzag"))
    body = orjson.loads(orjson.dumps(trace.to_dict()))         # plain types only, no numpy
    assert np.array(body["q"]).shape == (16, 4, 4)
    assert np.array(body["k"]).shape == np.array(body["v"]).shape == (16, 2, 4)
    assert np.array(body["output"]).shape == (16, 4, 4)
    assert body["max_abs_error"] <= TOL
    assert [r["rank"] for r in body["ranks"]] == [0, 1, 2, 3]
    for r in body["ranks"]:
        assert {"rank", "tokens", "unmasked_scores", "elements_sent"} <= set(r)
        assert isinstance(r["elements_sent"], int) and isinstance(r["unmasked_scores"], int)
    frame = body["frames"][2]
    assert {"step", "caption", "transfers", "ranks"} <= set(frame)
    assert {"src", "dst", "elements"} <= set(frame["transfers"][0])
    assert {"kv_block", "computed", "unmasked_scores", "rows"} <= set(frame["ranks"][0])
    assert {"wall", "memory", "time", "overlap"} <= set(body["scale"])
    json.dumps(trace.to_dict(), allow_nan=False)               # no NaN or ∞ anywhere
    assert all(m["time"] is not None for m in body["scale"]["time"]["methods"])


def test_the_largest_worked_example_stays_small():
    """DESIGN's bounds: any accepted query answers under 5 MB (its time, < 500 ms, is a
    ``make bench`` row, not a test)."""
    for p in (P(method="ring", cp=64, seq=256, heads=16, kv_heads=16, head_dim=16,
                balance="zigzag"),
              P(method="hybrid", cp=64, ulysses=8, seq=256, heads=16, kv_heads=16, head_dim=16)):
        assert len(orjson.dumps(simulate(p).to_dict())) < 5 * 10**6
