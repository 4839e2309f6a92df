"""/train's simulation against independent numbers: its 422 rules, the α–β time of a collective
(Thakur et al. 2005; nccl-tests' factors), Megatron's 1F1B warm-up (min(p − r − 1, m) forwards
before the first backward), GPipe's bubble (p − 1)/(m + p − 1) when messages are free, the
parameters per rank counted by hand, ZeRO-1's division of AdamW's states, the step split and
the frames."""

from __future__ import annotations

from collections import defaultdict

import pytest
from pydantic import ValidationError

from app.params import ParamsError, parse
from app.sim.train import TrainParams, simulate
from app.sim.train.proof import TABLE as PROOF_TABLE

DENSE = {"experts": 1, "top_k": 1, "ep": 1}


@pytest.mark.parametrize("query,param,words", [
    ({"tp": "4", "hidden": "48", "heads": "6", "kv_heads": "2"}, "tp", "tp (4) must divide heads (6)"),
    ({"tp": "4", "heads": "8", "kv_heads": "2"}, "tp", "tp (4) must divide kv_heads (2)"),
    ({"layers": "3", "pp": "2"}, "pp", "pp (2) must divide layers (3)"),
    ({"cp": "4", "seq": "20", "tp": "1", "pp": "1"}, "cp", "2·cp (8) must divide seq (20)"),
    ({"experts": "4", "ep": "8", "dp": "8", "tp": "1", "pp": "1"}, "ep", "ep (8) must divide experts"),
    ({"ep": "4", "dp": "2", "cp": "1"}, "ep", "ep (4) must divide dp·cp (2)"),
    ({"tp": "2", "pp": "2", "dp": "8"}, "dp", "at most 16 ranks"),
    ({"order": "tp-tp-ep-dp-pp"}, "order", "repeats tp"),
    ({"top_k": "3", "experts": "2", "ep": "1"}, "top_k", "top_k (3) must be at most experts (2)"),
    ({"zero": "2"}, "zero", "stages 2 and 3 are on /zero"),
    ({"nodes": "2", "tp": "1", "pp": "1", "dp": "3", "ep": "1"}, "nodes", "must be even"),
    ({"sequence_parallel": "true", "tp": "4", "cp": "4", "seq": "24", "pp": "1", "dp": "1"},
     "sequence_parallel", "seq/cp = 6 tokens over tp (4)"),
    ({"hidden": "512"}, "hidden", "hidden (512) is more than the tiny model trains"),
    ({"microbatches": "16", "layers": "16", "pp": "1", "dp": "4", "ep": "4"}, "microbatches",
     "one step draws at most"),
])
def test_bad_layouts_name_the_parameter_and_the_rule(query, param, words):
    with pytest.raises(ParamsError) as error:
        parse(TrainParams, query)
    problem = error.value.problems[0]
    assert problem.param == param and words in problem.message, problem


def test_the_real_run_is_limited_to_8_ranks_by_the_runner_not_the_page():
    assert TrainParams(tp=2, pp=2, dp=4, ep=1, experts=1).world == 16   # drawn, not run here


def _events(trace, **match):
    return [e for e in trace.events if all(e.get(k) == v for k, v in match.items())]


@pytest.mark.parametrize("tp,sp", [(2, False), (4, False), (2, True)])
def test_a_tp_collective_takes_the_alpha_beta_time(tp, sp):
    p = TrainParams(tp=tp, pp=1, dp=1, cp=1, sequence_parallel=sp, heads=8, kv_heads=4,
                    alpha_us=40.0, link_gbs=2.0, **DENSE)
    trace = simulate(p)
    first = _events(trace, rank=0, lane="tp")[0]
    n, alpha, beta = tp, 40e-6, 2e9
    size = p.seq * p.hidden * 8                                      # float64 activations
    if sp:    # the embedding's reduce-scatter: n − 1 steps, each (S/n)/β
        expected = (n - 1) * alpha + (n - 1) / n * size / beta
        assert first["kind"] == "reduce_scatter"
    else:     # ring all-reduce: 2(n − 1) steps
        expected = 2 * (n - 1) * alpha + 2 * (n - 1) / n * size / beta
        assert first["kind"] == "all_reduce"
    assert first["dur_s"] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("pp,m", [(2, 4), (4, 4), (4, 2), (3, 6)])
def test_1f1b_warms_up_with_min_p_minus_r_minus_1_m_forwards(pp, m):
    p = TrainParams(tp=1, dp=1, cp=1, pp=pp, layers=pp * 2 if pp != 3 else 6,
                    microbatches=m, schedule="1f1b", **DENSE)
    trace = simulate(p)
    for r in range(pp):                                             # rank r is stage r here
        passes = []
        for e in sorted(_events(trace, rank=r, lane="compute"), key=lambda e: e["start_s"]):
            key = (e["kind"], e.get("microbatch"))
            if e["kind"] in ("F", "B") and (not passes or passes[-1] != key):
                passes.append(key)
        first_b = next(i for i, (kind, _) in enumerate(passes) if kind == "B")
        warmup = min(pp - r - 1, m)                                 # then one F before a B
        assert first_b == warmup + (1 if m > warmup else 0), (r, passes)


@pytest.mark.parametrize("pp,m", [(2, 2), (4, 8), (4, 4)])
def test_gpipe_idles_p_minus_1_over_m_plus_p_minus_1_when_messages_are_free(pp, m):
    """Nearly equal stages (four blocks each; the embedding and head add a few ops to the ends)
    and α = 0, β = 10 TB/s: the GPipe schedule alone sets the bubble (Huang et al. 2019)."""
    p = TrainParams(tp=1, dp=1, cp=1, pp=pp, layers=4 * pp, microbatches=m, schedule="gpipe",
                    alpha_us=0, link_gbs=10000, **DENSE)
    trace = simulate(p)
    span = max(e["start_s"] for e in _events(trace, kind="optimizer"))   # the passes' end
    f = [sum(e["dur_s"] for e in _events(trace, rank=r, lane="compute", kind="F")) / m
         for r in range(pp)]
    b = [sum(e["dur_s"] for e in _events(trace, rank=r, lane="compute", kind="B")) / m
         for r in range(pp)]
    # a flow shop of m identical jobs: Σ t_s + (m − 1)·max t_s, forwards then backwards
    makespan = sum(f) + (m - 1) * max(f) + sum(b) + (m - 1) * max(b)
    assert span == pytest.approx(makespan, rel=1e-6)
    idle = 1 - m * (sum(f) + sum(b)) / (pp * span)
    assert idle == pytest.approx((pp - 1) / (m + pp - 1), abs=0.04)


def test_each_rank_splits_its_step_exactly_and_lanes_do_one_thing_at_a_time():
    trace = simulate(TrainParams(tp=2, cp=2, pp=2, dp=2, ep=2, zero=1))
    for row in trace.rank_split:
        total = row["compute_s"] + row["comm_exposed_s"] + row["bubble_s"]
        assert total == pytest.approx(trace.step_s, rel=1e-9)
        assert min(row["compute_s"], row["comm_exposed_s"], row["bubble_s"]) >= 0
    lanes = defaultdict(list)
    for e in trace.events:
        lanes[(e["rank"], e["lane"])].append(e)
    for events in lanes.values():
        events.sort(key=lambda e: e["start_s"])
        for a, b in zip(events, events[1:]):
            if a["lane"] in ("compute", "tp", "ep", "pp"):             # FIFO lanes
                assert b["start_s"] >= a["start_s"] + a["dur_s"] - 1e-12, (a, b)
    kinds = {e["lane"] for e in trace.events}
    assert kinds == {"compute", "tp", "cp", "pp", "ep", "dp"}


def test_collective_members_start_together():
    trace = simulate(TrainParams(tp=2, cp=1, pp=1, dp=2, ep=2))
    starts = defaultdict(set)
    for e in trace.events:
        if e["lane"] == "tp":
            starts[e["start_s"]].add(e["rank"])
    # every TP all-reduce starts at the same moment on both members of its group
    assert all(len(ranks) % 2 == 0 for ranks in starts.values())


def _stage_params(p: TrainParams, first: bool, last: bool) -> int:
    """Parameters one rank holds, counted by hand from the model's shapes."""
    h, a, kv, f, V, d = p.hidden, p.heads, p.kv_heads, p.ffn, p.vocab, p.head_dim
    attention = h * a * d / p.tp + 2 * h * kv * d / p.tp + a * d * h / p.tp
    if p.experts > 1:
        mlp = h * p.experts + 3 * h * f / p.tp * p.experts / p.ep
    else:
        mlp = 3 * h * f / p.tp
    block = attention + mlp + 2 * h
    return int(block * p.layers / p.pp + (V * h / p.tp if first else 0)
               + (h + h * V / p.tp if last else 0))


@pytest.mark.parametrize("query", [dict(tp=2, pp=2, dp=2, ep=2), dict(tp=1, pp=4, dp=2, ep=1),
                                   dict(tp=4, pp=1, dp=2, ep=2, zero=1, **{"experts": 4})])
def test_memory_counts_the_tensors_each_rank_holds(query):
    p = TrainParams(**query)
    trace = simulate(p)
    for m in trace.memory:
        c = trace.layout.coords(m.rank)
        held = _stage_params(p, c["pp"] == 0, c["pp"] == p.pp - 1)
        assert m.params == held * 8 and m.grads == held * 8
        if not p.zero:
            assert m.optimizer == 2 * 8 * held                        # AdamW: two moments
        else:
            assert m.optimizer < 2 * 8 * held
        assert m.in_flight == min(p.pp - c["pp"], p.microbatches)    # 1F1B (PTD-P §2.2)


def test_zero1_divides_adamws_states_over_the_replicas():
    dense = dict(tp=1, pp=1, cp=1, ep=1, experts=1, top_k=1)
    one, four = (simulate(TrainParams(dp=dp, zero=1, **dense)).memory[0] for dp in (1, 4))
    assert four.optimizer == pytest.approx(one.optimizer / 4)
    assert four.params == one.params


def test_frames_walk_the_step_and_say_what_begins():
    trace = simulate(TrainParams())
    times = [f.time_s for f in trace.frames]
    assert times == sorted(times) and times[0] == 0 and times[-1] == trace.step_s
    assert trace.frames[0].phase == "before" and trace.frames[-1].phase == "done"
    assert trace.frames[-2].phase == "optimizer"
    assert all("starts the" in f.caption for f in trace.frames if f.phase == "passes")
    assert 5 < len(trace.frames) <= 40


def test_a_gpu_node_is_far_faster_than_the_cpu_default():
    trace = simulate(TrainParams())
    assert trace.gpu_step_s < trace.step_s / 2


def test_params_are_frozen_with_a_comment_on_every_field():
    from app.params import field_comments
    p = TrainParams()
    with pytest.raises(ValidationError):
        p.tp = 4
    assert set(field_comments(TrainParams)) >= set(TrainParams.model_fields)


SYMMETRY_LAYOUTS = [row for _, row in PROOF_TABLE] + [
    {},                                                     # the scene's default: tp 2 pp 2 dp 2 ep 2
    {"microbatches": 16, "recompute": "full", "sequence_parallel": True},
    {"tp": 2, "cp": 2, "pp": 2, "dp": 2, "ep": 2, "zero": 1, "schedule": "gpipe"},
    {"tp": 1, "cp": 1, "pp": 4, "dp": 2, "ep": 1, "experts": 1, "top_k": 1, "microbatches": 8},
    {"tp": 1, "cp": 1, "pp": 2, "dp": 4, "ep": 4, "order": "tp-dp-cp-ep-pp", "nodes": 2},
    {"tp": 1, "cp": 2, "pp": 2, "dp": 2, "ep": 2, "aux_loss_coeff": 0.01},
]


def test_the_load_balancing_loss_costs_one_cp_all_reduce_of_the_counts_per_moe_forward():
    """α > 0 adds, per MoE layer's forward on each rank, an all-reduce of the E int64 counts
    over cp (workers/train/expert.load_balancing_loss) and nothing when cp is 1."""
    base = {"tp": 1, "cp": 2, "pp": 2, "dp": 2, "ep": 2}
    for cp in (1, 2):
        q = {**base, "cp": cp, "dp": 4 // cp}
        off, on = simulate(TrainParams(**q)), simulate(TrainParams(**q, aux_loss_coeff=0.01))
        counts = [e for e in on.events if e["lane"] == "cp" and e["kind"] == "all_reduce"]
        p = on.params
        forwards = p.layers // p.pp * p.microbatches * p.world if cp > 1 else 0
        assert len(counts) == forwards
        assert all(e["bytes"] == p.experts * 8 for e in counts)
        assert on.step_s >= off.step_s


@pytest.mark.parametrize("query", SYMMETRY_LAYOUTS,
                         ids=lambda q: ",".join(f"{k}={v}" for k, v in q.items()) or "default")
def test_the_stages_one_timeline_equals_every_rank_timed_on_its_own(query):
    """program_step times only rank 0's pipeline and gives a stage's other ranks its timeline;
    the step written and timed for every rank must give the same events (every field, every
    rank, the same order) and the same step time on both machines."""
    from app.sim.train.cost import Machine
    from app.sim.train.params import GPU
    from app.sim.train.program import _program_step, program_step
    from app.sim.train.simulate import events_of
    p = TrainParams(**query)
    machines = (Machine.of(p), Machine(**GPU))
    fast, full = program_step(p, machines), _program_step(p, machines, every_rank=True)
    assert len(full[0].spans) == len(fast[0].spans) * (p.world // p.pp)
    for a, b in zip(fast, full):
        assert a.makespan == b.makespan
        assert events_of(a) == events_of(b)
