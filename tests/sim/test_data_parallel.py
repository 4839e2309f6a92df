"""Data parallelism at scale against references: DDP's buckets against torch's own bucketing,
the closed-form ring times against the chapter-2 schedules, and the timelines' physics."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from app.sim.data_parallel import buckets as ddp_buckets

from app.sim.data_parallel import fsdp_timeline

from app.sim.data_parallel import step_timeline

from app.sim import timeline
from app.sim.collectives.cost import Links, ring_time_us, step_costs, time_us
from app.sim.collectives.schedules import build
from app.sim.data_parallel.simulate import simulate, tiny_buckets
from app.catalog.models import PRESETS
from app.sim.tiny_mlp import TinyMLP
from app.sim.timeline import Task

# --- DDP's buckets ---------------------------------------------------------------------------

BUCKET_CASES = [  # (tensor bytes in ready order, limits, expected buckets)
    ([400, 40, 1_200_000, 20, 280_000], (400,), [[0], [1, 2], [3, 4]]),
    ([10, 10, 10], (1_000,), [[0, 1, 2]]),
    ([500, 500, 500, 500], (100, 1000), [[0], [1, 2], [3]]),
    ([1, 1, 1, 1], (1,), [[0], [1], [2], [3]]),
]


@pytest.mark.parametrize("sizes,limits,expected", BUCKET_CASES)
def test_bucket_filling(sizes, limits, expected):
    assert ddp_buckets.assign(sizes, list(range(len(sizes))), limits) == expected


def test_buckets_are_torchs():
    torch = pytest.importorskip("torch")
    import torch.distributed as dist
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 25)
        sizes = [rng.choice([1, 3, 100, 1000, 10**5, 3 * 10**6]) for _ in range(n)]
        cap = rng.choice([1, 8, 400, 4096, 10**6, 25 * 2**20])
        order = list(range(n - 1, -1, -1))
        tensors = [torch.empty(sizes[t], device="meta") for t in order]
        for limits in ([cap], [2**20, cap] if 2**20 < cap else [cap]):
            groups, _ = dist._compute_bucket_assignment_by_size(tensors, limits, [False] * n,
                                                                list(range(n)))
            theirs = [[order[i] for i in g] for g in groups]
            assert ddp_buckets.assign([s * 4 for s in sizes], order, tuple(limits)) == theirs


def test_ddp_default_first_bucket_is_one_mib():
    sizes = (300_000,) * 40                        # 1.2 MB each in fp32
    default = ddp_buckets.buckets(sizes, 4, None)
    assert default[0].limit_bytes == 2**20 and default[1].limit_bytes == 25 * 2**20
    assert len(default[0].tensors) == 1
    assert ddp_buckets.buckets(sizes, 4, 25)[0].limit_bytes == 25 * 2**20


def test_tiny_buckets_first_step_is_one_bucket_in_model_order():
    model = TinyMLP(3, 2)
    steps = tiny_buckets(model, 3, 25.0)
    assert steps[0] == ((0, 1, 2, 3, 4, 5),)
    assert steps[1] == steps[2] == ((5, 4, 3, 2, 1, 0),)          # ready order: bias first
    small = tiny_buckets(model, 2, 40 / 2**20)                      # 40-byte cap: per layer
    assert small[1] == ((5, 4), (3, 2), (1, 0))


@pytest.mark.parametrize("name", list(PRESETS))
def test_tensor_lists_add_up(name):
    model = PRESETS[name]
    assert sum(n for _, n in model.parameters()) == model.param_count()


# --- costs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"])
@pytest.mark.parametrize("world", [2, 3, 5, 8, 13])
@pytest.mark.parametrize("gpn", [1, 2, 4, 8, 16])
def test_ring_time_is_the_schedules_time(op, world, gpn):
    for intra, inter in ((300.0, 50.0), (50.0, 300.0)):
        links = Links(5.0, intra, inter, gpn)
        for root in ((0, world - 1) if op in ("broadcast", "reduce") else (0,)):
            costs = step_costs(build(op, "ring", world, world * 4, root), links)
            for size in (1.0, 1e6, 3e9):
                assert ring_time_us(op, world, size, links, root) == pytest.approx(
                    time_us(costs, 5.0, size), rel=1e-12)


def test_timeline_scheduler():
    spans = timeline.schedule([
        Task("a", "x", 5), Task("b", "y", 2, ("a",)), Task("c", "x", 1),
        Task("d", "y", 1, earliest_us=10), Task("e", "x", 3, ("d",))])
    at = {s.name: (s.start_us, s.end_us) for s in spans}
    assert at == {"a": (0, 5), "b": (5, 7), "c": (5, 6), "d": (10, 11), "e": (11, 14)}
    assert [s.name for s in timeline.critical_path(spans)] == ["d", "e"]
    assert timeline.exposed_us(spans, "y", "x") == pytest.approx(2.0)   # b: 6–7, d: 10–11
    with pytest.raises(ValueError):
        timeline.schedule([Task("a", "x", 1, ("later",))])


def workload(preset="gpt2", dp=8, alpha=5.0, gpn=8, micro_batch=4):
    return step_timeline.Workload(PRESETS[preset], micro_batch, 150.0, dp,
                                  Links(alpha, 300.0, 50.0, gpn), 4)


def test_ddp_overlaps_and_the_summary_agrees():
    w = workload()
    for mb in (0.5, 4, 25, 4096):
        t = step_timeline.ddp(w, mb)
        assert (t.step_us, t.exposed_comm_us) == pytest.approx(step_timeline.ddp_summary(w, mb))
        backward_end = max(s.end_us for s in t.spans if s.kind == "backward")
        assert all(s.start_us >= t.ready_us[max(b.tensors, key=t.ready_us.__getitem__)] - 1e-9
                   for s, b in zip([s for s in t.spans if s.kind == "all_reduce"], t.buckets))
        assert backward_end <= t.step_us
    one = step_timeline.ddp(w, 4096)                    # a single bucket: nothing to overlap
    assert len(one.buckets) == 1 and one.hidden_fraction == pytest.approx(0.0, abs=1e-9)
    default = step_timeline.ddp(w, 25)
    assert default.exposed_comm_us < one.exposed_comm_us and default.hidden_fraction > 0.3


def test_tiny_buckets_pay_latency():
    """Across nodes every all-reduce pays 2(n−1)·α: many small buckets lose."""
    w = workload(dp=64, alpha=20.0)
    small, default = step_timeline.ddp_summary(w, 0.5), step_timeline.ddp_summary(w, 25)
    assert small[0] > default[0]


def test_fsdp_prefetch_hides_communication_and_costs_memory():
    w = workload("llama3-8b", dp=8)
    on, off = fsdp_timeline.fsdp(w, True), fsdp_timeline.fsdp(w, False)
    assert on.step_us < off.step_us and on.exposed_comm_us < off.exposed_comm_us
    assert on.peak_gathered_elements > off.peak_gathered_elements
    layer = PRESETS["llama3-8b"].layer_params()
    assert on.peak_gathered_elements - off.peak_gathered_elements == pytest.approx(
        layer * 7 / 8, rel=0.01)
    # 3 collectives of every unit: all-gather, all-gather again, reduce-scatter
    assert sum(1 for s in on.spans if s.kind == "all_gather") == 2 * 32 + 1


def test_data_parallel_is_slower_and_gpu0_works_most():
    w = workload(dp=4)
    dp, ddp = step_timeline.data_parallel(w, 8), step_timeline.ddp(w, 25)
    assert dp.step_us > ddp.step_us and dp.exposed_comm_us == pytest.approx(dp.comm_us)
    busy = {g: timeline.busy_us(dp.spans, f"GPU {g}") for g in range(4)}
    assert busy[0] > busy[1] == busy[2] == busy[3]


def params(**overrides):
    base = dict(mode="ddp", dp=4, bucket_mb=25.0, prefetch=True, preset="gpt2", micro_batch=4,
                dtype="fp32", gpu_tflops=150.0, alpha_us=5.0, intra_node_gbs=300.0,
                inter_node_gbs=50.0, gpus_per_node=8, steps=3, seed=0, mlp_layers=2, mlp_width=2)
    return SimpleNamespace(**{**base, **overrides})


@pytest.mark.parametrize("mode", ["dp", "ddp", "fsdp"])
def test_frames_cover_the_step(mode):
    trace = simulate(params(mode=mode))
    times = [m.t_us for m in trace.moments]
    assert times[0] == 0 and times == sorted(times) and len(times) <= 24
    assert times[-1] == pytest.approx(trace.timeline.step_us)
    assert all(f.caption for f in trace.frames)
    assert "hidden" in trace.frames[-1].caption


def test_three_generations_agree_on_the_tiny_model():
    d = simulate(params(dp=5)).to_dict()
    assert all(v < 1e-13 for v in d["max_difference_from_ddp"].values())
    assert d["tiny_buckets"][0] == [[0, 1, 2, 3]]


@pytest.mark.parametrize("dp,gpn,nodes,per_node", [(4, 8, 1, 4), (16, 8, 2, 8), (12, 8, 2, 8),
                                                    (1, 8, 1, 1), (64, 4, 16, 4)])
def test_torchrun_ranks(dp, gpn, nodes, per_node):
    info = simulate(params(dp=dp, gpus_per_node=gpn, mode="ddp")).torchrun()
    assert (info["nodes"], info["nproc_per_node"]) == (nodes, per_node)
    for entry in info["ranks"]:
        assert entry["rank"] == entry["node"] * per_node + entry["local_rank"]
    assert info["uneven"] == (dp % per_node != 0)


def test_plain_ddp_default_is_drawn_and_named():
    """Issue 12 item 11: DDP(model) leaves bucket_cap_mb unset — a first bucket of 1 MiB
    (torch's _DEFAULT_FIRST_BUCKET_BYTES), then 25 MiB; passing 25 makes the first 25 MiB too.
    The scene's default is the former, and its caption says which one is drawn."""
    from app.sim.data_parallel.params import DataParallelParams
    from app.sim.data_parallel.simulate import simulate
    default, explicit = simulate(DataParallelParams()), simulate(
        DataParallelParams(explicit_cap=True))
    assert [b.limit_bytes for b in default.timeline.buckets[:2]] == [2 ** 20, 25 * 2 ** 20]
    assert {b.limit_bytes for b in explicit.timeline.buckets} == {25 * 2 ** 20}
    assert "a first bucket of 1 MiB, then 25 MiB" in default.frames[0].caption
    assert "bucket_cap_mb=25: every bucket" in explicit.frames[0].caption
    other = simulate(DataParallelParams(bucket_mb=4))      # any other size is passed
    assert {b.limit_bytes for b in other.timeline.buckets} == {4 * 2 ** 20}


def test_layer_norm_weight_before_bias():
    """torch's gradient-ready order (measured in tests/workers/test_ddp_buckets.py): GPT-2's
    final LayerNorm gives ln_f.weight (146) before ln_f.bias (147), then h.11.mlp.proj's bias
    (145) before its weight (144)."""
    from app.sim.data_parallel.params import DataParallelParams
    from app.sim.data_parallel.simulate import simulate
    t = simulate(DataParallelParams(preset="gpt2", bucket_mb=25, dp=4))
    assert t.timeline.buckets[0].tensors[:4] == (146, 147, 145, 144)
    tiny = simulate(DataParallelParams(preset="gpt2", bucket_mb=0.001, dp=4)).timeline.buckets
    assert len(tiny) == 148 and [b.tensors[0] for b in tiny[:4]] == [146, 147, 145, 144]


@pytest.mark.parametrize("query", [{"mode": "ddp"}, {"mode": "ddp", "bucket_mb": 1},
                                   {"mode": "fsdp"}, {"mode": "fsdp", "prefetch": False},
                                   {"mode": "dp"}])
def test_every_task_ends_in_one_moment_and_every_caption_says_what(query):
    """Issue 13: a moment's caption read "16.2 ms → 16.7 ms: ." — the task that ended then had
    been counted in the next moment (times rounded to 1e-6 µs). Each task with a length ends in
    exactly one moment (the last whose time is ≥ its end, within rounding), and every caption
    after the first says something after its time range."""
    from app.sim.data_parallel.params import DataParallelParams
    trace = simulate(DataParallelParams(**query))
    times = [m.t_us for m in trace.moments]
    for s in trace.timeline.spans:
        if s.end_us <= s.start_us or s.end_us > times[-1] + 1e-6:
            continue
        owners = [k for k, m in enumerate(trace.moments) if s in m.ended]
        expected = next(k for k, t in enumerate(times) if k and t >= round(s.end_us, 6))
        assert owners == [expected], (s.name, owners, expected)
    for f in trace.frames[1:]:
        text = f.caption.split(": ", 1)[1]
        assert len(text) > 5 and not text.startswith("."), f.caption
