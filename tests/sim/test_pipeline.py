"""Pipeline schedules against their references: torch.distributed.pipelining's own orders, the
papers' bubble and memory formulas (REFERENCES.md), and an independent check of every timed
dependency."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sim.pipeline.simulate import bubble_curves, formula, simulate
from app.sim.pipeline.passes import (Flat, InvalidSchedule, Times, communication, memory,
                                     timeline, validate, with_sends)
from app.sim.pipeline.orders import SCHEDULE_KINDS, build, infeasible, interleaved_warmup
from app.sim.pipeline.schedules import Action, Schedule, format_order, parse_action, parse_order
from app.sim.pipeline.params import PipelineParams

EQUAL = Times(1.0, 1.0, 1.0)


def first_backward(order) -> int:
    """How many forwards a rank runs before its first backward (its warm-up)."""
    return next(k for k, a in enumerate(order) if a.kind != "F")


# --- the IR -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, action", [("2F0", Action(2, "F", 0)), ("0B13", Action(0, "B", 13)),
                                          ("17I5", Action(17, "I", 5)), ("63W1023", Action(63, "W", 1023))])
def test_action_round_trip(text, action):
    assert parse_action(text) == action
    assert str(action) == text


@pytest.mark.parametrize("bad", ["F0", "2X0", "2F", "", "2 F 0x", "-1F0"])
def test_parse_action_refuses(bad):
    with pytest.raises(ValueError):
        parse_action(bad)


def test_order_round_trip_with_idle_slots():
    text = "0F0 0F1 _ 0B0 _ 0B1"
    order = parse_order(text)
    assert order[2] is None and order[3] == Action(0, "B", 0)
    assert format_order(order) == text


@pytest.mark.parametrize("name", list(SCHEDULE_KINDS))
def test_schedule_ids_decode_to_their_actions(name):
    v = 3 if name == "interleaved_1f1b" else 1
    s = build(name, 3, 6, v)
    again = Schedule.from_orders(s.name, s.ranks, s.microbatches, s.chunks, s.style, s.orders)
    assert all(np.array_equal(a, b) for a, b in zip(again.ids, s.ids))


# --- orders against torch.distributed.pipelining -------------------------------------------------

def torch_orders(name: str, p: int, m: int, v: int | None):
    visualizer = pytest.importorskip("torch.distributed.pipelining._schedule_visualizer")
    kinds = {"FORWARD": "F", "FULL_BACKWARD": "B", "BACKWARD_INPUT": "I", "BACKWARD_WEIGHT": "W"}
    out = []
    for rank in visualizer.get_schedule_ops(name, p, m, v):
        order = []
        for a in rank:
            if a is None:
                continue
            for sub in a.sub_actions or (a,):   # DualPipeV's overlapped F&B run in order
                if sub.computation_type.name not in kinds:   # REDUCE_GRAD: not a pass
                    continue
                order.append(Action(sub.stage_index, kinds[sub.computation_type.name],
                                    sub.microbatch_index))
        out.append(order)
    return out


MULTI = [("interleaved_1f1b", "Interleaved1F1B", v) for v in (2, 3, 4)] + [
    ("zbv", "ZBVZeroBubble", 2), ("dualpipev", "DualPipeV", 2)]


@pytest.mark.parametrize("name, torch_name, v", MULTI)
@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 8])
def test_multi_stage_orders_equal_torch(name, torch_name, v, p):
    """Every m from 1 to 3p + 1 (odd ones included): the same orders, or both refuse."""
    for m in range(1, 3 * p + 2):
        try:
            expected = torch_orders(torch_name, p, m, v)
        except ValueError:
            assert infeasible(name, p, m, v) is not None, (p, m)
            with pytest.raises(ValueError):
                build(name, p, m, v)
            continue
        assert infeasible(name, p, m, v) is None, (p, m)
        assert [list(o) for o in build(name, p, m, v).orders] == expected, (p, m)


@pytest.mark.parametrize("p, m", [(1, 1), (2, 3), (3, 7), (4, 8), (5, 5), (8, 13)])
def test_gpipe_equals_torch(p, m):
    assert [list(o) for o in build("gpipe", p, m).orders] == torch_orders("GPipe", p, m, None)


@pytest.mark.parametrize("p, m", [(2, 2), (3, 7), (4, 8), (4, 9), (6, 11), (8, 8)])
def test_1f1b_equals_torch_except_its_last_rank(p, m):
    """torch's visualizer gets 1F1B's last rank wrong (it starts at F1 and reaches F8); the
    other ranks must agree, and the last rank alternates F, B from micro-batch 0 (Megatron)."""
    ours = [list(o) for o in build("1f1b", p, m).orders]
    theirs = torch_orders("1F1B", p, m, None)
    assert ours[:-1] == theirs[:-1]
    last = p - 1
    assert ours[-1] == [Action(last, k, i) for i in range(m) for k in "FB"]


@pytest.mark.parametrize("p, m", [(1, 1), (2, 1), (4, 2), (4, 8), (5, 3), (8, 5), (8, 16), (3, 9)])
def test_1f1b_warmup_is_megatrons(p, m):
    """Rank r: min(p − r − 1, m) warm-up forwards, then F and B alternate until the forwards
    run out, then the remaining backwards (REFERENCES.md)."""
    for r, order in enumerate(build("1f1b", p, m).orders):
        warmup = min(p - r - 1, m)
        kinds = "".join(a.kind for a in order)
        assert kinds == "F" * warmup + "FB" * (m - warmup) + "B" * warmup


def test_megatron_interleaved_warmups():
    """PTD-P / Megatron: v = 2, p = 4, m = 8 → 10, 8, 6, 4 warm-up forwards (REFERENCES.md)."""
    orders = build("interleaved_1f1b", 4, 8, 2).orders
    assert [interleaved_warmup(r, 4, 8, 2) for r in range(4)] == [10, 8, 6, 4]
    # the order runs those warm-ups, then one more forward opens the steady 1F1B phase
    assert [first_backward(o) - 1 for o in orders] == [10, 8, 6, 4]


@pytest.mark.parametrize("name", list(SCHEDULE_KINDS))
def test_stage_placement_follows_torch(name):
    p, v = 4, (3 if name == "interleaved_1f1b" else 1)
    s = build(name, p, 8, v)
    for r, order in enumerate(s.orders):
        stages = sorted({a.stage for a in order})
        if s.style == "v":
            assert stages == [r, 2 * p - 1 - r]
        else:
            assert stages == [r + k * p for k in range(s.chunks)]


# --- the papers' numbers --------------------------------------------------------------------------

SIZES = [(1, 1), (1, 5), (2, 1), (2, 3), (3, 7), (4, 4), (4, 8), (4, 9), (5, 2), (6, 13), (8, 8),
         (8, 31), (16, 5), (16, 64)]
TIMES = [EQUAL, Times(1.0, 2.0, 0.0), Times(0.7, 1.3, 0.45), Times(2.0, 1.0, 3.0)]


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p, m", SIZES)
@pytest.mark.parametrize("times", TIMES)
def test_gpipe_and_1f1b_bubble(name, p, m, times):
    """GPipe and PTD-P: (p − 1)/(m + p − 1) of the total, for any pass times."""
    line = timeline(build(name, p, m), times)
    assert line.bubble_fraction == pytest.approx((p - 1) / (m + p - 1), abs=1e-12)
    assert line.makespan == pytest.approx((m + p - 1) * (times.t_f + times.t_b + times.t_w))


@pytest.mark.parametrize("p, rounds, v", [(1, 3, 2), (2, 1, 2), (2, 3, 3), (4, 2, 2), (4, 1, 4),
                                          (3, 5, 2), (8, 2, 2), (8, 4, 3)])
@pytest.mark.parametrize("times", TIMES)
def test_interleaved_bubble(p, rounds, v, times):
    """PTD-P §2.2.2: (p − 1)/(v·m + p − 1) when p divides m."""
    m = p * rounds
    line = timeline(build("interleaved_1f1b", p, m, v), times)
    assert line.bubble_fraction == pytest.approx((p - 1) / (v * m + p - 1), abs=1e-12)


@pytest.mark.parametrize("p, m", [(p, m) for p, m in SIZES if m >= p] + [(4, 5), (6, 7)])
@pytest.mark.parametrize("times", [EQUAL, Times(2.0, 2.0, 2.0), Times(1.5, 1.0, 0.5),
                                   Times(1.0, 3.0, 1.0)])
def test_zb_h1_bubble(p, m, times):
    """Zero Bubble, Table 2: ZB-H1 idles (p − 1)(T_F + T_B − T_W) per rank (m ≥ p, T_W ≤ T_F, T_B)."""
    line = timeline(build("zb_h1", p, m), times)
    idle = line.makespan - m * (times.t_f + times.t_b + times.t_w)
    assert idle == pytest.approx((p - 1) * (times.t_f + times.t_b - times.t_w), abs=1e-9)


@pytest.mark.parametrize("p, m", [(1, 3), (2, 3), (4, 8), (4, 2), (8, 5), (8, 20)])
def test_peak_activations(p, m):
    """GPipe holds all m; 1F1B rank r holds min(p − r, m) (PipeDream-Flush / PTD-P); ZB-H1 keeps
    p in flight on every rank (Zero Bubble, Table 2: pM_B)."""
    gpipe = memory(Flat.of(s := build("gpipe", p, m)), timeline(s, EQUAL))
    assert gpipe.peak == (m,) * p
    one = memory(Flat.of(s := build("1f1b", p, m)), timeline(s, EQUAL))
    assert one.peak == tuple(min(p - r, m) for r in range(p))
    if m >= p:
        zb = memory(Flat.of(s := build("zb_h1", p, m)), timeline(s, EQUAL))
        assert zb.peak == (p,) * p


@pytest.mark.parametrize("p, v", [(2, 2), (4, 2), (4, 3), (8, 2)])
def test_interleaved_first_rank_memory(p, v):
    """Korthikanti et al. 2022: interleaving multiplies the first stage's activations by
    1 + (p − 1)/(p·v) — rank 0 holds its warm-up plus one chunk, each 1/v of its layers."""
    m = 4 * p
    s = build("interleaved_1f1b", p, m, v)
    peak = memory(Flat.of(s), timeline(s, EQUAL)).peak[0]
    assert peak == 2 * (p - 1) + (v - 1) * p + 1
    assert peak / v == pytest.approx(p * (1 + (p - 1) / (p * v)))


def test_formula_says_when_it_applies():
    def params(**kw):
        return PipelineParams(**kw)
    assert formula(params(schedule="1f1b", t_comm=0)).applies
    assert not formula(params(schedule="1f1b", t_comm=0.1)).applies
    assert not formula(params(schedule="interleaved_1f1b", stages=4, microbatches=6)).applies
    assert formula(params(schedule="interleaved_1f1b", stages=4, microbatches=8)).applies
    assert not formula(params(schedule="zb_h1", stages=4, microbatches=3)).applies
    assert not formula(params(schedule="zb_h1", t_w=2.0)).applies
    assert formula(params(schedule="zbv")) is None


# --- dependencies, overlap, validation ------------------------------------------------------------

def check_timeline(schedule: Schedule, times: Times) -> None:
    """An independent check: every input ended (and arrived) before its reader started, no two
    passes overlap on a rank, each rank runs its list in order, and each pass lasts its time."""
    flat = Flat.of(schedule)
    line = timeline(schedule, times, flat)
    m, S, v = schedule.microbatches, schedule.stages, schedule.chunks
    index = {(a.stage, a.kind, a.microbatch): k
             for k, a in enumerate(a for order in schedule.orders for a in order)}
    length = {"F": times.t_f, "B": times.t_b + times.t_w, "I": times.t_b, "W": times.t_w}
    for (stage, kind, mb), k in index.items():
        assert line.end[k] - line.start[k] == pytest.approx(length[kind] / v)
        needs = []
        if kind == "F" and stage > 0:
            needs.append((stage - 1, "F", mb))
        if kind in "BI":
            needs.append((stage, "F", mb))
            if stage < S - 1:
                needs.append((stage + 1, "B", mb) if (stage + 1, "B", mb) in index
                             else (stage + 1, "I", mb))
        if kind == "W":
            needs.append((stage, "I", mb))
        for need in needs:
            j = index[need]
            remote = schedule.rank_of(need[0]) != schedule.rank_of(stage)
            assert line.start[k] >= line.end[j] + (times.t_comm if remote else 0) - 1e-9, (
                f"{stage}{kind}{mb} starts before {need} arrives")
    for a, b in zip(flat.offsets[:-1], flat.offsets[1:]):
        assert np.all(line.start[a + 1:b] >= line.end[a:b - 1] - 1e-9)   # in order, no overlap
        assert np.all(line.start[a:b] >= 0)


CASES = ([("gpipe", p, m, 1) for p, m in [(1, 1), (3, 5), (4, 8)]]
         + [("1f1b", p, m, 1) for p, m in [(1, 4), (2, 1), (4, 3), (4, 9), (7, 12)]]
         + [("interleaved_1f1b", p, m, v) for p, m, v in [(1, 3, 2), (2, 4, 3), (4, 8, 2), (4, 5, 2),
                                                          (3, 9, 4), (5, 3, 2)]]
         + [("zb_h1", p, m, 1) for p, m in [(1, 2), (3, 2), (4, 8), (5, 11)]]
         + [("zbv", p, m, 2) for p, m in [(1, 1), (2, 3), (4, 8), (4, 5), (6, 17)]]
         + [("dualpipev", p, m, 2) for p, m in [(1, 2), (2, 4), (4, 8), (4, 11), (5, 13)]])


@pytest.mark.parametrize("name, p, m, v", CASES)
@pytest.mark.parametrize("times", [EQUAL, Times(1.3, 0.6, 0.9, 0.25), Times(0.2, 2.5, 0.0, 1.0)])
def test_dependencies_and_no_overlap(name, p, m, v, times):
    schedule = build(name, p, m, v)
    validate(schedule)
    check_timeline(schedule, times)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(list(SCHEDULE_KINDS)), p=st.integers(1, 9), m=st.integers(1, 24),
       v=st.integers(2, 4), tf=st.floats(0.05, 4), tb=st.floats(0.05, 4), tw=st.floats(0, 4),
       tc=st.floats(0, 2))
def test_both_timing_methods_agree(name, p, m, v, tf, tb, tw, tc):
    v = SCHEDULE_KINDS[name].chunks or v
    if infeasible(name, p, m, v):
        return
    schedule = build(name, p, m, v)
    times = Times(tf, tb, tw, tc)
    a = timeline(schedule, times, method="worklist")
    b = timeline(schedule, times, method="lockstep")
    np.testing.assert_allclose(a.start, b.start, rtol=0, atol=1e-9)
    np.testing.assert_allclose(a.end, b.end, rtol=0, atol=1e-9)


def orders_of(texts):
    return [parse_order(t) for t in texts]


@pytest.mark.parametrize("texts, message", [
    (["0F0 0B0", "1F0"], "neither B nor both I and W"),
    (["0F0 0F0 0B0 0B0", "1F0 1B0"], "runs 2 times"),
    (["0F0 1F0 0B0", "1B0"], "lives on rank 1"),
    (["0B0 0F0", "1F0 1B0"], "backward before its forward"),
    (["0F0 0I0 0W0", "1F0 1W0 1I0"], "W0 before"),
    (["0F0 0B0", "1B0"], "has no forward"),
])
def test_validate_refuses_broken_schedules(texts, message):
    schedule = Schedule.from_orders("custom", 2, 1, 1, "loop", orders_of(texts))
    with pytest.raises(InvalidSchedule, match=message):
        validate(schedule)


@pytest.mark.parametrize("method", ["worklist", "lockstep"])
def test_timeline_finds_a_deadlock(method):
    """Rank 1 wants micro-batch 1 first; rank 0 sends it only after 0B0, which needs 1B0."""
    schedule = Schedule.from_orders("custom", 2, 2, 1, "loop", orders_of(
        ["0F0 0B0 0F1 0B1", "1F1 1F0 1B0 1B1"]))
    validate(schedule)
    with pytest.raises(InvalidSchedule, match="deadlock"):
        timeline(schedule, EQUAL, method=method)


def test_communication_only_crosses_ranks_when_stages_do():
    s = build("zbv", 3, 4)
    flat = Flat.of(s)
    links = communication(s, flat)
    for k in np.flatnonzero(links.source >= 0):
        src = links.source[k]
        assert links.remote[k] == (flat.rank[k] != flat.rank[src])
    # the V turns on the last rank without a send: stage p − 1 → p lives on rank p − 1
    turn = [k for k in range(flat.ids.size) if flat.stage[k] == 3 and flat.kind[k] == 0]
    assert not links.remote[turn].any()


@pytest.mark.parametrize("name, torch_name, v", MULTI[:1] + MULTI[3:])
@pytest.mark.parametrize("p, m", [(2, 3), (3, 6), (4, 8)])
def test_sends_and_receives_equal_torchs(name, torch_name, v, p, m):
    """The communication pass against torch's _add_send_recv: the same SEND right after each
    pass, and the same RECVs (torch posts them earlier, to overlap them)."""
    visualizer = pytest.importorskip("torch.distributed.pipelining._schedule_visualizer")
    if infeasible(name, p, m, v):
        return
    theirs = visualizer.get_schedule_ops(torch_name, p, m, v, with_comms=True)
    schedule = build(name, p, m, v)
    flat = Flat.of(schedule)
    links = communication(schedule, flat)
    for r in range(p):
        tokens = [str(a) for a in theirs[r]]
        for sub in (a for a in theirs[r] if a.sub_actions):    # DualPipeV's F&B pairs
            i = tokens.index(str(sub))
            tokens[i:i + 1] = [str(x) for x in sub.sub_actions]
        ours = with_sends(schedule, flat, links, r)
        keep = re.compile(r"\d+([FBIW]|SEND_[FB])\d+$")
        assert [t for t in ours if keep.match(t)] == [t for t in tokens if keep.match(t)]
        assert sorted(t for t in ours if "RECV" in t) == sorted(t for t in tokens if "RECV" in t)


# --- the trace, its JSON, bounded work -------------------------------------------------------------

JSON_CASES = [
    dict(), dict(schedule="1f1b", stages=64, microbatches=1024),
    dict(schedule="1f1b", stages=7, microbatches=3, t_f=0.1, t_b=0.2, t_w=0.3, t_comm=0.05),
    dict(schedule="gpipe", stages=5, microbatches=12, t_f=3e-05, t_b=7e-05, t_w=0),
    dict(schedule="gpipe", stages=16, microbatches=256, t_f=1.7, t_comm=999),
    dict(schedule="interleaved_1f1b", stages=4, microbatches=8, chunks=3),
    dict(schedule="interleaved_1f1b", stages=8, microbatches=64, chunks=8, t_comm=0.25,
         t_f=1 / 3),
    dict(schedule="zb_h1", stages=1, microbatches=1),
    dict(schedule="zb_h1", stages=6, microbatches=4, t_w=0.5, t_comm=0.1),
    dict(schedule="zbv", stages=3, microbatches=5, t_comm=0.3),
    dict(schedule="zbv", stages=48, microbatches=300, t_w=0, t_comm=1e-06),
    dict(schedule="dualpipev", stages=2, microbatches=4),
    dict(schedule="dualpipev", stages=64, microbatches=512, t_f=123.456, t_b=0.001, t_w=1000),
]
"""Small and large, every schedule, tiny and huge times (exponent notation), t_comm and t_w 0."""


@pytest.mark.parametrize("query", JSON_CASES)
def test_fast_json_equals_the_dicts(query):
    """The fast writer (app/sim/pipeline/to_json.py) against plain dicts through json: the same
    document, every number the same float."""
    trace = simulate(PipelineParams(**query))
    assert json.loads(trace.to_json()) == trace.to_dict()


def test_frames_cover_every_pass_once():
    trace = simulate(PipelineParams(schedule="zb_h1", stages=5, microbatches=9, t_comm=0.2))
    covered = np.concatenate([trace.by_start[f.lo:f.hi] for f in trace.frames])
    assert sorted(covered.tolist()) == list(range(trace.flat.ids.size))
    times = [f.time for f in trace.frames]
    assert times == sorted(times) and times[-1] == trace.makespan
    assert "✓ equal" not in trace.frames[-1].caption   # t_comm > 0: the formula is not exact
    exact = simulate(PipelineParams(schedule="zb_h1", stages=5, microbatches=9))
    assert "✓ equal" in exact.frames[-1].caption


def test_large_schedule_is_summarised_into_bounded_frames():
    """Issue 6's scale case; its < 200 ms budget is measured by make bench."""
    trace = simulate(PipelineParams(schedule="1f1b", stages=64, microbatches=1024))
    trace.to_json()
    assert len(trace.frames) <= 202
    assert trace.bubble_fraction == pytest.approx(63 / (1024 + 63))


def test_bubble_curves_match_the_formula_where_it_applies():
    curves = {c.schedule: c for c in bubble_curves(4, 2, EQUAL)}
    for m, b in zip(curves["1f1b"].microbatches, curves["1f1b"].bubble):
        assert b == pytest.approx(3 / (m + 3))
    for m, b in zip(curves["interleaved_1f1b"].microbatches, curves["interleaved_1f1b"].bubble):
        if m % 4 == 0:
            assert b == pytest.approx(3 / (2 * m + 3))
    assert min(curves["dualpipev"].microbatches) >= 8
    assert all(len(c.microbatches) >= 4 for c in curves.values())


def test_every_feasible_small_case_runs():
    for name, p, m, v in itertools.product(SCHEDULE_KINDS, range(1, 6), range(1, 12), (2, 3)):
        v = SCHEDULE_KINDS[name].chunks or v
        if infeasible(name, p, m, v) is None:
            s = build(name, p, m, v)
            validate(s)
            timeline(s, Times(1, 1, 1, 0.5))
