"""Chapter 1, the overview: the training memory ledger (model states over tp·pp, a GPT's
parameter count, a whole model's activations), the five parallelisms, and the ranks torchrun
hands out (RANK, LOCAL_RANK, WORLD_SIZE, the data-parallel size a layout leaves).

Answers call :mod:`app.sim.memory.model_states`, :class:`app.sim.models.ModelShape`,
:mod:`app.sim.memory.activations`, :mod:`app.sim.parallelism.layout`, ``.torchrun`` and
``.strategies`` — what /memory and /parallelism compute with.
"""

from __future__ import annotations

from app.exercises.common import params, plural, psi_text
from app.exercises.model import Mistake, Step, Worked, exercise
from app.exercises.units import num
from app.sim.memory import activations, model_states
from app.catalog.models import ModelShape
from app.param_groups import AXES
from app.sim.parallelism import strategies as five
from app.sim.parallelism.layout import Layout
from app.sim.parallelism.params import ParallelismParams
from app.sim.parallelism.torchrun import processes

GPT_SHAPES = ((12, 768, 12), (24, 1024, 16), (24, 2048, 16), (32, 2560, 32), (32, 4096, 32),
              (40, 5120, 40), (48, 6144, 48), (64, 8192, 64), (80, 10240, 80),
              (96, 12288, 96))
"""(layers, hidden, heads) of GPT-2/GPT-3-family models (Brown et al. 2020, Table 2.1; PTD-P)."""


def flat_layout(world: int, gpus_per_node: int, tp: int = 1, pp: int = 1) -> Layout:
    return Layout(AXES,
                  (("tp", tp), ("cp", 1), ("dp", world // (tp * pp)), ("pp", pp), ("ep", 1)),
                  gpus_per_node)


@exercise("model-states-per-gpu", chapter=1, scene="memory", kind="number", unit="bytes",
          title="Model states on one GPU of a tensor- and pipeline-parallel model",
          source="Rajbhandari et al. 2019 (ZeRO) §3.1: 16Ψ for mixed-precision Adam; split "
                 "evenly over tp·pp",
          ranges={"params": (1e8, 2e12), "tp": (1, 2, 4, 8), "pp": (1, 2, 4, 8)})
class ModelStatesPerGpu:
    def draw(d):
        return {"params": params(d), "tp": d.choice((1, 2, 4, 8)), "pp": d.choice((1, 2, 4, 8))}

    def prompt(g):
        return (f"A model of {psi_text(g['params'])} parameters trains with mixed-precision "
                f"Adam (fp16 parameters and gradients; fp32 master weights, momentum and "
                f"variance), tensor-parallel over tp = {g['tp']} and pipeline-parallel over "
                f"pp = {g['pp']} GPUs, with no ZeRO. How many bytes of model states does each "
                f"GPU hold (assume the split is even)?")

    def solve(g):
        psi, tp, pp = g["params"], g["tp"], g["pp"]
        s = model_states.per_gpu(psi, tp=tp, pp=pp)
        per = model_states.per_gpu(1)
        steps = (
            Step("Bytes per parameter", "2 (fp16 weights) + 2 (fp16 grads) + 4 + 4 + 4 (fp32 "
                 "master, m, v)", "2 + 2 + 4 + 4 + 4", per.total, "bytes per parameter"),
            Step("Parameters one GPU holds", "Ψ/(tp·pp)", f"{num(psi)} / ({tp} × {pp})",
                 psi / (tp * pp), "parameters"),
            Step("Model states per GPU", "16 · Ψ/(tp·pp)", f"16 × {num(psi / (tp * pp))}",
                 s.total, "bytes"),
        )
        return Worked(s.total, steps, (
            Mistake(s.total * 12 / 16, "The fp32 master copy of the weights (4 bytes a "
                                       "parameter) is part of the optimizer's state too."),
            Mistake(16.0 * psi, "Tensor and pipeline parallelism each hold only their share: "
                                "divide by tp·pp."),
            Mistake(s.total / 4, "Keep the fp16 parameters and gradients beside the 12 bytes "
                                 "of optimizer state — 16 bytes in all."),
        ))

    def scene(g):
        return {"preset": "gpt3-175b", "param_count": g["params"], "tp": g["tp"],
                "pp": g["pp"]}


@exercise("param-count-gpt", chapter=1, scene="memory", kind="number", unit="parameters",
          title="Parameters of a GPT",
          source="Narayanan et al. 2021 (PTD-P) §5.1: 12lh²(1 + 13/(12h) + (V + s)/(12lh))",
          ranges={"layers": (12, 96), "hidden": (768, 12288), "vocab": (32000, 51200),
                  "seq": (1024, 2048, 4096)})
class ParamCountGpt:
    def draw(d):
        layers, hidden, heads = d.choice(GPT_SHAPES)
        return {"layers": layers, "hidden": hidden, "heads": heads,
                "vocab": d.choice((50257, 51200, 32000)), "seq": d.choice((1024, 2048, 4096))}

    def prompt(g):
        return (f"A GPT has L = {g['layers']} layers of hidden size h = {g['hidden']} "
                f"(MLP 4h, biases, two LayerNorms a layer), learned position embeddings for "
                f"s = {g['seq']} positions, a vocabulary of V = {g['vocab']} tied with the "
                f"output head, and a final LayerNorm. How many parameters does it have?")

    def solve(g):
        L, h, V, s = g["layers"], g["hidden"], g["vocab"], g["seq"]
        model = ModelShape("exercise", "gpt", L, h, g["heads"], g["heads"], 4 * h, V, s)
        per_layer = model.layer_params()
        steps = (
            Step("One layer: QKV and output projections, MLP, biases, LayerNorms",
                 "12h² + 13h", f"12 × {h}^2 + 13 × {h}", per_layer, "parameters"),
            Step("All layers", "L · (12h² + 13h)", f"{L} × {num(per_layer)}", L * per_layer,
                 "parameters"),
            Step("Embeddings and final LayerNorm", "Vh + sh + 2h",
                 f"{V} × {h} + {s} × {h} + 2 × {h}", model.embedding_params(), "parameters"),
            Step("Parameters", "layers + embeddings",
                 f"{num(L * per_layer)} + {num(model.embedding_params())}",
                 model.param_count(), "parameters"),
        )
        return Worked(model.param_count(), steps, (
            Mistake(L * per_layer + 2 * V * h + s * h + 2 * h,
                    "GPT ties the embedding with the output head: count V·h once."),
            Mistake(model.param_count() + L * 4 * h * h, "An MLP of 4h has 2 · h · 4h = 8h² "
                                                        "weights; attention 4h²: 12h² a layer."),
        ))

    def scene(g):
        return {"preset": "gpt2", "layers": g["layers"], "hidden": g["hidden"],
                "heads": g["heads"], "vocab": g["vocab"], "seq": g["seq"]}


@exercise("activations-whole-model", chapter=1, scene="memory", kind="number", unit="bytes",
          title="Activations a whole model keeps for backward",
          source="Korthikanti et al. 2022, Table 2: sbh(34 + 5as/h) per layer, no parallelism",
          ranges={"layers": (12, 96), "hidden": (768, 12288), "heads": (12, 96),
                  "seq": (512, 4096), "micro_batch": (1, 8)})
class ActivationsWholeModel:
    def draw(d):
        layers, hidden, heads = d.choice(GPT_SHAPES)
        return {"layers": layers, "hidden": hidden, "heads": heads,
                "seq": d.choice((512, 1024, 2048, 4096)), "micro_batch": d.choice((1, 2, 4, 8))}

    def prompt(g):
        return (f"A GPT with L = {g['layers']} layers, h = {g['hidden']}, a = {g['heads']} "
                f"heads trains on micro-batches of b = {plural(g['micro_batch'], 'sequence')} of "
                f"s = {g['seq']} tokens on one GPU (no parallelism, no recomputation; 16-bit "
                f"activations, 1-byte dropout masks). How many bytes of activations does the "
                f"forward pass keep for the backward pass, over all layers?")

    def solve(g):
        L, h, a, s, b = g["layers"], g["hidden"], g["heads"], g["seq"], g["micro_batch"]
        shape = activations.LayerShape(s, b, h, a)
        per = activations.per_layer_bytes(shape)
        steps = (
            Step("sbh", "s·b·h", f"{s} × {b} × {h}", s * b * h, "elements"),
            Step("Attention scores' share", "5as/h", f"5 × {a} × {s} / {h}", 5 * a * s / h, ""),
            Step("One layer", "sbh(34 + 5as/h)", f"{num(s * b * h)} × (34 + {num(5 * a * s / h)})",
                 per, "bytes"),
            Step("All layers", "L × one layer", f"{L} × {num(per)}", L * per, "bytes"),
        )
        return Worked(L * per, steps, (
            Mistake(L * 34.0 * s * b * h, "Add the attention scores: softmax output, dropout "
                                          "mask and dropout output, 5as²b bytes a layer — "
                                          "quadratic in s."),
            Mistake(per, "That is one layer; the model has L of them."),
        ))

    def scene(g):
        return {"preset": "gpt3-175b", "layers": g["layers"], "hidden": g["hidden"],
                "heads": g["heads"], "seq": g["seq"], "micro_batch": g["micro_batch"]}


@exercise("world-dp-size", chapter=1, scene="parallelism", kind="integer", unit="GPUs",
          title="The data-parallel size a cluster leaves",
          source="Megatron-LM: world = tp · cp · dp · pp",
          ranges={"nodes": (1, 128), "gpus_per_node": (4, 8), "tp": (1, 8), "pp": (1, 16)},
          scene_hides=("dp",))
class WorldDpSize:
    def draw(d):
        while True:
            g = {"nodes": d.choice((1, 2, 4, 8, 16, 32, 64, 128)),
                 "gpus_per_node": d.choice((4, 8)), "tp": d.choice((1, 2, 4, 8)),
                 "pp": d.choice((1, 2, 4, 8, 16))}
            world = g["nodes"] * g["gpus_per_node"]
            if world % (g["tp"] * g["pp"]) == 0 and world // (g["tp"] * g["pp"]) >= 2:
                return g

    def prompt(g):
        return (f"A job runs on {g['nodes']} node{'s' if g['nodes'] > 1 else ''} of "
                f"{g['gpus_per_node']} GPUs with tensor parallelism tp = {g['tp']} and "
                f"pipeline parallelism pp = {g['pp']} (no context parallelism). How many "
                f"data-parallel replicas (dp) does that leave?")

    def solve(g):
        world = g["nodes"] * g["gpus_per_node"]
        layout = flat_layout(world, g["gpus_per_node"], g["tp"], g["pp"])
        dp = layout.size["dp"]
        assert layout.world == world
        steps = (
            Step("World size", "nodes × GPUs per node", f"{g['nodes']} × {g['gpus_per_node']}",
                 world, "GPUs"),
            Step("GPUs one model replica spans", "tp · pp", f"{g['tp']} × {g['pp']}",
                 g["tp"] * g["pp"], "GPUs"),
            Step("Data-parallel size", "dp = world / (tp · pp)",
                 f"{world} / ({g['tp']} × {g['pp']})", dp, "GPUs"),
        )
        return Worked(dp, steps, (
            Mistake(world // g["tp"], "Pipeline stages are GPUs of the same replica too: "
                                      "divide by pp as well."),
            Mistake(world // g["pp"], "A replica spans tp GPUs in each stage: divide by tp too."),
            Mistake(world, "dp counts replicas, each of which spans tp · pp GPUs."),
        ))

    def scene(g):
        world = g["nodes"] * g["gpus_per_node"]
        return {"tp": g["tp"], "pp": g["pp"], "dp": world // (g["tp"] * g["pp"]),
                "gpus_per_node": g["gpus_per_node"]}


@exercise("torchrun-rank", chapter=1, scene="parallelism", kind="coords",
          title="What torchrun tells a process",
          source="torchrun (torch.distributed.run): RANK = node_rank · nproc_per_node + "
                 "LOCAL_RANK, WORLD_SIZE = nnodes · nproc_per_node",
          ranges={"nnodes": (2, 64), "nproc_per_node": (2, 4, 8), "node_rank": (0, 63),
                  "local_rank": (0, 7)},
          keys=("RANK", "WORLD_SIZE"))
class TorchrunRank:
    def draw(d):
        nnodes, n = d.choice((2, 4, 8, 16, 32, 64)), d.choice((2, 4, 8))
        return {"nnodes": nnodes, "nproc_per_node": n, "node_rank": d.integer(0, nnodes - 1),
                "local_rank": d.integer(0, n - 1)}

    def prompt(g):
        return (f"`torchrun --nnodes {g['nnodes']} --nproc-per-node {g['nproc_per_node']} "
                f"--node-rank {g['node_rank']} …` starts a process with LOCAL_RANK = "
                f"{g['local_rank']}. What are its RANK and WORLD_SIZE?")

    def solve(g):
        world = g["nnodes"] * g["nproc_per_node"]
        proc = next(p for p in processes(flat_layout(world, g["nproc_per_node"]))
                    if p.node == g["node_rank"] and p.local_rank == g["local_rank"])
        answer = {"RANK": proc.rank, "WORLD_SIZE": proc.world_size}
        steps = (
            Step("WORLD_SIZE", "nnodes × nproc_per_node",
                 f"{g['nnodes']} × {g['nproc_per_node']}", proc.world_size, "ranks"),
            Step("RANK", "node_rank × nproc_per_node + LOCAL_RANK",
                 f"{g['node_rank']} × {g['nproc_per_node']} + {g['local_rank']}", proc.rank,
                 ""),
        )
        return Worked(answer, steps, (
            Mistake({"RANK": g["local_rank"], "WORLD_SIZE": proc.world_size},
                    "LOCAL_RANK counts inside one node; RANK counts across all of them."),
            Mistake({"RANK": proc.rank, "WORLD_SIZE": g["nproc_per_node"]},
                    "WORLD_SIZE counts every process of the job, on every node "
                    "(LOCAL_WORLD_SIZE is the per-node count)."),
        ))

    def scene(g):
        world = g["nnodes"] * g["nproc_per_node"]
        return {"tp": 1, "dp": world, "pp": 1, "gpus_per_node": g["nproc_per_node"]}


@exercise("rank-node-local", chapter=1, scene="parallelism", kind="coords",
          title="Which node, which GPU",
          source="torchrun fills nodes in order: node = RANK // nproc_per_node, LOCAL_RANK = "
                 "RANK mod nproc_per_node",
          ranges={"rank": (0, 1023), "gpus_per_node": (4, 8), "world": (8, 1024)},
          keys=("node", "local_rank"))
class RankNodeLocal:
    def draw(d):
        world = d.choice((16, 32, 64, 128, 256, 512, 1024))
        return {"world": world, "gpus_per_node": d.choice((4, 8)),
                "rank": d.integer(1, world - 1)}

    def prompt(g):
        return (f"A job of WORLD_SIZE = {g['world']} runs {g['gpus_per_node']} processes per "
                f"node, ranks filling the nodes in order. On which node (GROUP_RANK, from 0) "
                f"does RANK {g['rank']} run, and which GPU of that node (LOCAL_RANK, "
                f"cuda:LOCAL_RANK) does it use?")

    def solve(g):
        proc = processes(flat_layout(g["world"], g["gpus_per_node"]))[g["rank"]]
        n = g["gpus_per_node"]
        steps = (
            Step("Node", "RANK // nproc_per_node", f"floor({g['rank']} / {n})", proc.node, ""),
            Step("Local rank", "RANK − node × nproc_per_node",
                 f"{g['rank']} - {proc.node} × {n}", proc.local_rank, ""),
        )
        return Worked({"node": proc.node, "local_rank": proc.local_rank}, steps, (
            Mistake({"node": proc.node + 1, "local_rank": proc.local_rank},
                    "Nodes are numbered from 0."),
        ))

    def scene(g):
        return {"tp": 1, "dp": g["world"], "pp": 1, "gpus_per_node": g["gpus_per_node"]}


STRATEGY_NAMES = ("dp", "tp", "pp", "cp", "ep")


@exercise("strategy-splits", chapter=1, scene="parallelism", kind="choice",
          title="Which parallelism is it?",
          source="Li et al. 2020 (DDP); Shoeybi et al. 2019; Huang et al. 2019; Liu et al. "
                 "2023; Lepikhin et al. 2020",
          ranges={"strategy": STRATEGY_NAMES, "clue": ("splits", "communicates")})
class StrategySplits:
    def draw(d):
        return {"strategy": d.choice(STRATEGY_NAMES), "clue": d.choice(("splits",
                                                                        "communicates"))}

    def _card(g):
        p = ParallelismParams(tp=2, cp=2, dp=2, pp=2, ep=2, experts=8, model="llama3-8b",
                              gpus_per_node=8, order="tp-cp-ep-dp-pp")
        return next(s for s in five.strategies(p, ()) if s.name == g["strategy"])

    def prompt(g):
        card = StrategySplits._card(g)
        text = card.splits if g["clue"] == "splits" else f"{card.communicates}, {card.when}"
        verb = "splits" if g["clue"] == "splits" else "communicates by"
        return (f"Llama-3 8B trains with dp = tp = pp = cp = 2 and 8 experts over ep = 2. One "
                f"of the five parallelisms {verb}: “{text}”. Which one — dp, tp, pp, cp or ep?")

    def choices(g):
        return STRATEGY_NAMES

    def solve(g):
        card = StrategySplits._card(g)
        steps = (Step("What it splits", card.title, "", card.splits, ""),
                 Step("What it sends, and when", card.communicates, "", card.when, ""),
                 Step("The strategy", card.title, "", card.name, ""))
        wrong = {"dp": ("cp", "DP splits the batch, whole sequences; CP splits one sequence."),
                 "cp": ("dp", "CP cuts one sequence into pieces; DP hands out whole "
                              "sequences."),
                 "tp": ("ep", "TP cuts every weight matrix; EP places whole expert MLPs."),
                 "ep": ("tp", "EP keeps each expert whole on one rank; TP would cut it."),
                 "pp": ("tp", "PP cuts the model by depth (layers); TP within each layer.")}
        other, hint = wrong[card.name]
        return Worked(card.name, steps, (Mistake(other, hint),))

    def scene(g):
        return {"tp": 2, "cp": 2, "dp": 2, "pp": 2, "ep": 2, "experts": 8, "model": "llama3-8b"}


