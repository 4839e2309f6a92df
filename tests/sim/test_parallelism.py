"""/parallelism: the 5D layout against torch's own DeviceMesh and Megatron-LM's RankGenerator
semantics; params, traffic, torchrun lines, the DDP script and the contract."""

from __future__ import annotations

import itertools
from math import prod

import pytest
from pydantic import ValidationError

from app.sim.parallelism import ParallelismParams, simulate
from app.sim.parallelism.ddp_script import SCRIPT
from app.sim.parallelism.ddp_script import steps as ddp_steps
from app.sim.parallelism.layout import GROUP_KINDS, Layout
from app.sim.parallelism.torchrun import processes
from app.sim.parallelism.traffic import flows, order_loads

# (tp, cp, dp, pp, ep, gpus_per_node, order): odd sizes, every order position of tp, cp > 1
# with ep > 1 (EP carved out of dp·cp), ep = dp·cp, non-default orders Megatron tests.
LAYOUTS = [
    (2, 1, 2, 2, 1, 4, "tp-cp-ep-dp-pp"),
    (2, 1, 2, 2, 2, 4, "tp-cp-ep-dp-pp"),
    (2, 2, 2, 1, 4, 8, "tp-cp-ep-dp-pp"),
    (1, 2, 3, 2, 3, 4, "tp-cp-ep-dp-pp"),
    (3, 1, 2, 2, 2, 6, "tp-cp-ep-dp-pp"),
    (2, 2, 3, 2, 2, 8, "tp-cp-ep-dp-pp"),
    (2, 1, 4, 2, 2, 8, "tp-cp-pp-ep-dp"),
    (2, 2, 2, 2, 2, 4, "cp-tp-ep-dp-pp"),
    (2, 1, 2, 2, 2, 2, "dp-cp-ep-tp-pp"),
    (2, 3, 1, 2, 1, 4, "pp-tp-cp-ep-dp"),
    (1, 1, 5, 1, 5, 8, "tp-cp-ep-dp-pp"),
]


def params_of(tp, cp, dp, pp, ep, gpn, order, **kw) -> ParallelismParams:
    experts = max(ep, 1) * 2
    # tp must divide the model's heads and kv_heads: tp 3 counts GPT-2's 12 heads
    kw.setdefault("preset", "gpt2" if 32 % tp else "llama3-8b")
    return ParallelismParams(tp=tp, cp=cp, dp=dp, pp=pp, ep=ep, gpus_per_node=gpn, order=order,
                             experts=experts, seq=6144, **kw)


# -- reference 1: Megatron-LM's RankGenerator semantics, written out independently ----------

def generator_groups(order: list[str], sizes: dict[str, int], masked: list[str]) -> list[list[int]]:
    """Megatron's rule, by enumeration: rank = Σ coordᵢ·strideᵢ with strides the running
    product of the sizes in ``order`` (first name fastest); a group fixes every unmasked
    coordinate and lists the ranks over the masked ones; groups sorted, ranks ascending."""
    dims = [sizes[n] for n in order]
    strides = [prod(dims[:i]) for i in range(len(dims))]
    groups: dict[tuple, list[int]] = {}
    for coord in itertools.product(*(range(d) for d in dims)):
        rank = sum(c * s for c, s in zip(coord, strides))
        key = tuple(c for c, n in zip(coord, order) if n not in masked)
        groups.setdefault(key, []).append(rank)
    return sorted(sorted(g) for g in groups.values())


@pytest.mark.parametrize("case", LAYOUTS, ids=lambda c: "x".join(map(str, c[:5])) + c[6])
def test_groups_match_megatron_rank_generator_semantics(case):
    p = params_of(*case)
    layout = Layout.of(p)
    order = p.order.split("-")
    dense = {"tp": p.tp, "cp": p.cp, "ep": 1, "dp": p.dp, "pp": p.pp}
    expert = {"tp": p.tp, "cp": 1, "ep": p.ep, "dp": p.dp * p.cp // p.ep, "pp": p.pp}
    expected = {k: generator_groups(order, dense, [k]) for k in ("tp", "cp", "dp", "pp")}
    expected["dp_cp"] = generator_groups(order, dense, ["dp", "cp"])
    expected["ep"] = generator_groups(order, expert, ["ep"])
    expected["edp"] = generator_groups(order, expert, ["dp"])
    for kind in GROUP_KINDS:
        assert [list(g) for g in layout.groups(kind)] == expected[kind], kind
    # coordinates: a rank's index inside each of its groups
    for r in range(layout.world):
        coords = layout.coords(r)
        for kind in ("tp", "cp", "dp", "pp", "ep", "edp"):
            assert layout.group_of(r, kind).index(r) == coords[kind]


def test_megatron_docstring_examples():
    """initialize_model_parallel's docstring: 16 GPUs, tp 2, pp 4 → these groups; and its
    context_parallel_size example: 8 GPUs, tp 4, cp 2 → cp groups [0, 4], [1, 5], …"""
    layout = Layout.of(ParallelismParams(tp=2, pp=4, dp=2, ep=1, gpus_per_node=8))
    assert layout.groups("dp") == ((0, 2), (1, 3), (4, 6), (5, 7), (8, 10), (9, 11), (12, 14),
                                   (13, 15))
    assert layout.groups("tp") == tuple((2 * i, 2 * i + 1) for i in range(8))
    assert layout.groups("pp") == ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15))
    cp = Layout.of(ParallelismParams(tp=4, cp=2, dp=1, pp=1, ep=1, gpus_per_node=8))
    assert cp.groups("cp") == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert cp.groups("tp") == ((0, 1, 2, 3), (4, 5, 6, 7))


# -- reference 2: torch's own DeviceMesh, one fake process group per rank -----------------

@pytest.fixture(scope="module")
def torch_mesh_groups():
    torch = pytest.importorskip("torch")
    dist = torch.distributed
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    def build(world, shape, names, rank):
        dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())
        try:
            mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
            return ({n: tuple(dist.get_process_group_ranks(mesh.get_group(n))) for n in names},
                    dict(zip(names, mesh.get_coordinate())))
        finally:
            dist.destroy_process_group()
    return build


@pytest.mark.parametrize("case", LAYOUTS, ids=lambda c: "x".join(map(str, c[:5])) + c[6])
def test_groups_match_torch_device_mesh(case, torch_mesh_groups):
    p = params_of(*case)
    layout = Layout.of(p)
    for expert in (False, True):
        shape, names = layout.torch_mesh(expert)
        for r in range(layout.world):
            groups, coordinate = torch_mesh_groups(layout.world, shape, names, r)
            coords = layout.coords(r)
            for name in names:
                if name in ("tp", "pp") and expert:
                    continue  # the expert mesh's tp and pp are checked on the dense mesh
                assert tuple(sorted(groups[name])) == layout.group_of(r, name), (r, name)
                assert coordinate[name] == coords[name], (r, name)


# -- params ------------------------------------------------------------------------------

@pytest.mark.parametrize("query, param, words", [
    ({"order": "tp-cp-tp-dp-pp"}, "order", 'order "tp-cp-tp-dp-pp" repeats tp and misses ep'),
    ({"order": "tp-xx-ep-dp-pp"}, "order", "has unknown xx"),
    ({"ep": 3}, "ep", "ep (3) must divide dp·cp (2)"),
    ({"dp": 4, "ep": 4, "experts": 6}, "ep", "ep (4) must divide experts (6)"),
    ({"tp": 8, "dp": 512, "pp": 2}, "dp", "8·1·512·2 = 8,192 must be at most 4,096"),
    ({"gpus_per_node": 3}, "gpus_per_node", "world (8) spans several nodes"),
    ({"cp": 3, "seq": 1000, "ep": 1}, "seq", "seq (1000) must be divisible by cp (3)"),
    ({"order": "tp-dp-pp-cp-ep", "cp": 2, "ep": 4}, "order", "put pp last"),
])
def test_invalid_params_say_which_and_why(query, param, words):
    with pytest.raises(ValidationError) as error:
        ParallelismParams(**query)
    cause = error.value.errors()[0]["ctx"]["error"]
    assert cause.param == param and words in cause.message, cause.message


def test_defaults_are_valid_and_world_is_the_product():
    p = ParallelismParams()
    assert p.world == p.tp * p.cp * p.dp * p.pp == 8
    assert p.order == "tp-cp-ep-dp-pp"


# -- the contract ------------------------------------------------------------------------

def test_contract_fields():
    d = simulate(ParallelismParams(gpus_per_node=4)).to_dict()
    assert d["world"] == 8
    assert set(d["groups"]) >= {"tp", "cp", "dp", "pp", "ep"}
    for row in d["ranks"]:
        assert set(row) >= {"rank", "node", "local_rank", "tp", "cp", "dp", "pp", "ep"}
        assert row["node"] == row["rank"] // 4 and row["local_rank"] == row["rank"] % 4
    assert [r["rank"] for r in d["ranks"]] == list(range(8))
    for t in d["traffic"]:
        assert set(t) >= {"group", "collective", "bytes_per_step", "crosses_nodes", "link"}
        assert t["link"] == ("infiniband" if t["crosses_nodes"] else "nvlink")
    assert all(f["caption"] for f in d["frames"])
    # every rank is in exactly one group of each kind
    for kind, groups in d["groups"].items():
        assert sorted(r for g in groups for r in g) == list(range(8)), kind


def test_frames_step_through_mesh_axes_nodes_traffic_orders_torchrun():
    trace = simulate(ParallelismParams())
    phases = [f.phase for f in trace.frames]
    assert phases == ["mesh"] + ["groups"] * 5 + ["nodes"] + ["traffic"] * len(trace.flows) \
        + ["orders", "torchrun"]
    assert [f.axis for f in trace.frames[1:6]] == ["tp", "cp", "ep", "dp", "pp"]
    assert [f.step for f in trace.frames] == list(range(len(trace.frames)))


# -- traffic -----------------------------------------------------------------------------

def test_tp_traffic_by_hand_for_gpt2():
    """gpt2, tp 2, one micro-batch of one 1024-token sequence: A = 1024·768·2 bytes; 12 layers ×
    4 all-reduces × 2(t−1)/t·A = 48·A = 75,497,472 bytes — the same with sequence parallelism."""
    for sp in (False, True):
        p = ParallelismParams(preset="gpt2", tp=2, dp=1, pp=1, ep=1, experts=1, seq=1024,
                              microbatches=1, sequence_parallel=sp, gpus_per_node=8)
        (tp,) = [f for f in flows(p) if f.group == "tp"]
        assert tp.bytes_per_step == 48 * 1024 * 768 * 2 == 75_497_472
        assert tp.link == "nvlink" and tp.group_size == 2


def test_dp_traffic_is_a_ring_all_reduce_of_the_gradient_shard():
    p = ParallelismParams(preset="gpt2", tp=1, dp=4, pp=1, ep=1, experts=1, gpus_per_node=8)
    (dp,) = [f for f in flows(p) if f.group == "dp"]
    from app.catalog.models import PRESETS
    assert dp.bytes_per_step == round(2 * 3 / 4 * PRESETS["gpt2"].param_count() * 2)


def test_tp_across_nodes_goes_over_infiniband():
    p = ParallelismParams(tp=8, dp=1, pp=1, ep=1, gpus_per_node=4)
    (tp,) = [f for f in flows(p) if f.group == "tp"]
    assert tp.crosses_nodes and tp.link == "infiniband"


def test_tp_first_loads_infiniband_least():
    p = ParallelismParams(tp=4, dp=4, pp=2, ep=2, gpus_per_node=8)
    loads = {o.order: o for o in order_loads(p)}
    default, tp_last = loads["tp-cp-ep-dp-pp"], loads["pp-dp-ep-cp-tp"]
    assert "tp" not in default.crossing and "tp" in tp_last.crossing
    assert default.inter_node_bytes < tp_last.inter_node_bytes


# -- torchrun and the DDP script ---------------------------------------------------------

def test_torchrun_env_and_lines():
    trace = simulate(ParallelismParams(gpus_per_node=4))
    run = trace.launch
    assert len(run.commands) == 2
    assert "--nnodes 2 --nproc-per-node 4 --node-rank 1 --rdzv-backend c10d" in run.commands[1]
    for proc in processes(trace.layout):
        assert proc.rank == proc.node * 4 + proc.local_rank and proc.device == f"cuda:{proc.local_rank}"
    assert run.device_mesh[0] == ('mesh = init_device_mesh("cuda", (2, 2, 1, 2), '
                                  "mesh_dim_names=('pp', 'dp', 'cp', 'tp'))")
    assert any("NCCL_SOCKET_IFNAME" in line for line in run.nccl)


def test_ddp_script_lines_are_the_worker_s():
    text = SCRIPT.read_text()
    found = ddp_steps(4, 4)
    assert next(s.phase for s in found) == "env" and found[-1].phase == "destroy"
    for step in found:
        for line in step.code:
            assert line.strip() in text
        assert len(step.holds) == 4 and step.caption
