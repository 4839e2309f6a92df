"""Chapter 6, tensor parallelism: what one layer sends with tensor parallelism and with sequence
parallelism added, the activation memory SP saves, the shard of a column- or row-parallel
weight, how long the layer's collectives take, its FLOPs on one GPU, and how many collectives
a layer calls.

Answers call :mod:`app.sim.tensor_parallel.scale` (its per-layer tables of collectives, the
ring shares and the α–β times; Shoeybi et al. 2019 §3, Korthikanti et al. 2022 §4.2.2),
:func:`app.sim.tensor_parallel.ops.split` (how the blocks cut their weights) and
:mod:`app.sim.flops` — what /tensor-parallel computes.
"""

from __future__ import annotations

import numpy as np

from app.exercises.common import plural
from app.exercises.model import Mistake, Step, Worked, exercise
from app.exercises.units import num
from app.sim.collectives.cost import Links
from app.sim.flops import layer_forward_flops
from app.sim.memory import activations
from app.catalog.models import ModelShape
from app.sim.tensor_parallel import scale as tp_scale
from app.sim.tensor_parallel.ops import split

TP = (2, 4, 8)
SHAPES = ((2048, 16), (4096, 32), (5120, 40), (6144, 48), (8192, 64), (12288, 96))
"""(hidden, heads) of GPT-3-family layers."""


def _draw_layer(d) -> dict:
    hidden, heads = d.choice(SHAPES)
    return {"seq": d.choice((1024, 2048, 4096, 8192)), "micro_batch": d.choice((1, 2, 4)),
            "hidden": hidden, "heads": heads, "tp": d.choice(TP)}


LAYER_RANGES = {"seq": (1024, 8192), "micro_batch": (1, 4), "hidden": (2048, 12288), "tp": TP}
"""What _draw_layer draws."""


def _model(g) -> ModelShape:
    return ModelShape("exercise", "gpt", 1, g["hidden"], g["heads"], g["heads"], 4 * g["hidden"],
                      50257, g["seq"])


def _sent(g, sp: bool = False) -> tuple[list[str], float]:
    """The layer's collectives (the scene's table) and what one rank sends in them: each
    ring collective's share of the s·b·h 16-bit activation (tp_scale.RING_SHARE)."""
    table = tp_scale.SP_LAYER if sp else tp_scale.TP_LAYER
    size = g["seq"] * g["micro_batch"] * g["hidden"] * tp_scale.BYTES_PER_ACTIVATION
    ops = [op for op, _, _ in table]
    return ops, sum(tp_scale.RING_SHARE[op](g["tp"]) * size for op in ops)


def _activations(g, sp: bool) -> float:
    shape = tp_scale.layer_shape(_model(g), g["seq"], g["micro_batch"])
    return activations.per_layer_bytes(shape, g["tp"], sp)


def _activation_step(g) -> Step:
    """The worked step every collective of a layer starts from: one micro-batch's s·b·h
    16-bit activation."""
    size = g["seq"] * g["micro_batch"] * g["hidden"] * 2
    return Step("Activation of one micro-batch", "s·b·h × 2 bytes",
                f"{g['seq']} × {g['micro_batch']} × {g['hidden']} × 2", size, "bytes")


def _layer_words(g) -> str:
    return (f"a GPT layer (h = {g['hidden']}, a = {g['heads']} heads, MLP 4h) on micro-batches "
            f"of b = {plural(g['micro_batch'], 'sequence')} of s = {g['seq']} tokens, 16-bit "
            f"activations")


def _scene(g, sp: bool = False) -> dict:
    return {"tp": g["tp"], "tokens": 16, "preset": "gpt3-175b", "seq": g["seq"],
            "micro_batch": g["micro_batch"], "sequence_parallel": sp}


@exercise("tp-allreduce-bytes", chapter=6, scene="tensor-parallel", kind="number",
          unit="bytes", title="What one tensor-parallel layer sends",
          source="Shoeybi et al. 2019 (Megatron-LM) §3: 2 all-reduces forward, 2 backward per "
                 "layer",
          ranges=LAYER_RANGES,
          draw=_draw_layer, query=_scene)
class TpAllReduceBytes:
    def prompt(g):
        return (f"Megatron-LM's tensor parallelism over tp = {g['tp']} GPUs runs "
                f"{_layer_words(g)}. With ring all-reduces, how many bytes does each GPU send "
                f"for one layer and one micro-batch, forward and backward together (no "
                f"sequence parallelism)?")

    def solve(g):
        activation = _activation_step(g)
        t, size = g["tp"], activation.value
        ops, sent = _sent(g)
        count = len(ops)
        steps = (
            activation,
            Step("All-reduces per layer", "2 forward (after attention and MLP) + 2 backward",
                 "2 + 2", count, "collectives"),
            Step("Each rank sends per all-reduce", "2(t−1)/t × size",
                 f"2 × ({t} - 1) / {t} × {num(size)}", 2 * (t - 1) / t * size, "bytes"),
            Step("Per layer", "4 × 2(t−1)/t × size", f"{count} × {num(2 * (t - 1) / t * size)}",
                 sent, "bytes"),
        )
        return Worked(sent, steps, (
            Mistake(sent / 2, "Backward all-reduces as much as forward: f in forward is an "
                              "all-reduce in backward — 4 per layer."),
            Mistake(4 * (t - 1) / t * size, "Each all-reduce sends 2(t−1)/t of the tensor: "
                                           "the 2 of ring all-reduce."),
            Mistake(4.0 * size, "A ring all-reduce sends 2(t−1)/t of the tensor per rank."),
        ))


@exercise("tp-sp-comm-bytes", chapter=6, scene="tensor-parallel", kind="number", unit="bytes",
          title="What a layer sends with sequence parallelism",
          source="Korthikanti et al. 2022 §4.2.2: each all-reduce becomes a reduce-scatter and "
                 "an all-gather; backward re-gathers the inputs",
          ranges=LAYER_RANGES,
          draw=_draw_layer)
class TpSpCommBytes:
    def prompt(g):
        return (f"Tensor parallelism over tp = {g['tp']} GPUs with sequence parallelism runs "
                f"{_layer_words(g)}. Forward, each of attention and MLP all-gathers its input "
                f"and reduce-scatters its output; backward all-gathers the output gradient and "
                f"re-gathers the input (only its sequence shard was kept) and reduce-scatters "
                f"the input gradient. How many bytes does each GPU send for one layer and one "
                f"micro-batch?")

    def solve(g):
        activation = _activation_step(g)
        t, size = g["tp"], activation.value
        ops, sent = _sent(g, sp=True)
        steps = (
            activation,
            Step("All-gathers per layer", "2 forward + 4 backward", "2 + 4",
                 ops.count("all_gather"), "collectives"),
            Step("Reduce-scatters per layer", "2 forward + 2 backward", "2 + 2",
                 ops.count("reduce_scatter"), "collectives"),
            Step("Each sends", "(t−1)/t × size", f"({t} - 1) / {t} × {num(size)}",
                 (t - 1) / t * size, "bytes"),
            Step("Per layer", "10 × (t−1)/t × size", f"{len(ops)} × {num((t - 1) / t * size)}",
                 sent, "bytes"),
        )
        tp_only = _sent(g)[1]
        return Worked(sent, steps, (
            Mistake(tp_only, "Same bytes as plain TP's all-reduces — but backward also "
                             "re-gathers each sublayer's input for the weight gradient, since "
                             "only the sequence shard was kept."),
            Mistake(sent * 2, "An all-gather or reduce-scatter sends (t−1)/t of the tensor, "
                              "half an all-reduce."),
        ))

    def scene(g):
        return _scene(g, sp=True)


@exercise("tp-sp-activation-saving", chapter=6, scene="tensor-parallel", kind="number",
          unit="bytes", title="The activation memory sequence parallelism saves",
          source="Korthikanti et al. 2022, Table 2: sbh(10 + 24/t + 5as/(ht)) vs "
                 "sbh/t·(34 + 5as/h)",
          ranges=LAYER_RANGES,
          draw=_draw_layer)
class TpSpActivationSaving:
    def prompt(g):
        return (f"With tensor parallelism over tp = {g['tp']}, {_layer_words(g)} keeps "
                f"sbh(10 + 24/t + 5as/(ht)) bytes of activations per layer: the 10sbh of "
                f"LayerNorms, dropouts and inputs are replicated on every rank. How many bytes "
                f"per layer does each GPU save by adding sequence parallelism?")

    def solve(g):
        tp_bytes, sp_bytes = _activations(g, False), _activations(g, True)
        sbh, t = g["seq"] * g["micro_batch"] * g["hidden"], g["tp"]
        a, s, h = g["heads"], g["seq"], g["hidden"]
        steps = (
            Step("With TP", "sbh(10 + 24/t + 5as/(ht))",
                 f"{num(sbh)} × (10 + 24 / {t} + 5 × {a} × {s} / ({h} × {t}))", tp_bytes,
                 "bytes"),
            Step("With TP + SP", "sbh/t · (34 + 5as/h)",
                 f"{num(sbh)} / {t} × (34 + 5 × {a} × {s} / {h})", sp_bytes, "bytes"),
            Step("Saved", "10sbh(1 − 1/t)", f"{num(tp_bytes, 10)} - {num(sp_bytes, 10)}",
                 tp_bytes - sp_bytes, "bytes"),
        )
        return Worked(tp_bytes - sp_bytes, steps, (
            Mistake(10.0 * sbh, "SP splits the replicated 10sbh over t ranks: each keeps 1/t of "
                                "it, so it saves 10sbh(1 − 1/t)."),
            Mistake(tp_bytes, "That is all of it; SP keeps sbh/t·(34 + 5as/h)."),
        ))

    def scene(g):
        return _scene(g, sp=True)


@exercise("tp-weight-shard", chapter=6, scene="tensor-parallel", kind="coords",
          title="The shard a tensor-parallel rank holds",
          source="Shoeybi et al. 2019 (Megatron-LM) §3: column-parallel splits the output "
                 "features, row-parallel the input features",
          ranges={"block": ("column", "row"), "in_features": (1024, 49152),
                  "out_features": (1024, 49152), "tp": TP, "rank": (0, 7)},
          keys=("rows", "cols", "first"))
class TpWeightShard:
    def draw(d):
        h = d.choice((1024, 2048, 4096, 5120, 8192))
        block = d.choice(("column", "row"))
        sizes = (h, 4 * h) if block == "column" else (4 * h, h)
        tp = d.choice(TP)
        return {"block": block, "in_features": sizes[0], "out_features": sizes[1], "tp": tp,
                "rank": d.integer(0, tp - 1)}

    def prompt(g):
        cut = ("column-parallel (Megatron's first MLP linear: it splits the output features)"
               if g["block"] == "column" else
               "row-parallel (Megatron's second MLP linear: it splits the input features)")
        return (f"A linear layer's weight W is stored as in × out = {g['in_features']} × "
                f"{g['out_features']} (y = x·W). It is {cut} over tp = {g['tp']} GPUs. What "
                f"shape (rows × cols) does rank {g['rank']}'s shard of W have, and which is "
                f"the first {'column' if g['block'] == 'column' else 'row'} of W it holds "
                f"(counting from 0)?")

    def solve(g):
        axis = 1 if g["block"] == "column" else 0
        n = g["out_features"] if axis == 1 else g["in_features"]
        # the block's own cut (ops.split) of the split dimension's indices
        piece = split(np.arange(n), g["tp"], 0)[g["rank"]]
        first = int(piece[0])
        rows, cols = ((g["in_features"], piece.size) if axis == 1
                      else (piece.size, g["out_features"]))
        steps = (
            Step("Split dimension", "out (column-parallel)" if axis else "in (row-parallel)",
                 str(n), n, ""),
            Step("Shard size along it", f"{'out' if axis else 'in'}/t", f"{n} / {g['tp']}",
                 n // g["tp"], ""),
            Step("Shard shape", "in × out/t" if axis else "in/t × out", "", f"{rows} × {cols}",
                 ""),
            Step("First index", "rank × size/t", f"{g['rank']} × {n // g['tp']}", first, ""),
        )
        answer = {"rows": int(rows), "cols": int(cols), "first": first}
        swapped = {"rows": int(cols), "cols": int(rows), "first": first}
        other = ({"rows": g["in_features"] // g["tp"], "cols": g["out_features"],
                  "first": first} if axis else
                 {"rows": g["in_features"], "cols": g["out_features"] // g["tp"], "first": first})
        return Worked(answer, steps, (
            Mistake(other, "That is the other kind of split: column-parallel cuts the output "
                           "features (the columns of W stored in × out), row-parallel the "
                           "input features (its rows)."),
            Mistake(swapped, "W is stored in × out here: rows are input features."),
        ))

    def scene(g):
        return {"block": g["block"], "tp": g["tp"]}


@exercise("tp-comm-time", chapter=6, scene="tensor-parallel", kind="number", unit="µs",
          title="How long a layer's tensor-parallel collectives take",
          source="Shoeybi et al. 2019 §3; α–β ring times (app/sim/collectives/cost.py)",
          ranges={"seq": (1024, 8192), "micro_batch": (1, 4), "hidden": (2048, 12288),
                  "tp": TP, "alpha_us": (2, 10), "link_gbs": (100, 900)})
class TpCommTime:
    def draw(d):
        return {**_draw_layer(d), "alpha_us": d.choice((2.0, 5.0, 10.0)),
                "link_gbs": d.choice((150.0, 300.0, 450.0, 900.0))}

    def prompt(g):
        return (f"Tensor parallelism over tp = {g['tp']} GPUs of one node (NVLink "
                f"{g['link_gbs']:g} GB/s per link, α = {g['alpha_us']:g} µs a message) runs "
                f"{_layer_words(g)}. Its 4 ring all-reduces per layer (2 forward, 2 backward) "
                f"run one after another. How long do they take per layer and micro-batch, in "
                f"µs?")

    def solve(g):
        t, size = g["tp"], g["seq"] * g["micro_batch"] * g["hidden"] * 2
        links = Links(g["alpha_us"], g["link_gbs"], g["link_gbs"], 64)
        us = tp_scale.comm_time_us(tp_scale.TP_LAYER, t, links, size)
        one = us / len(tp_scale.TP_LAYER)
        per_step = g["alpha_us"] + size / t / (g["link_gbs"] * 1e3)
        steps = (
            Step("Activation", "2sbh bytes", f"2 × {g['seq']} × {g['micro_batch']} × "
                                             f"{g['hidden']}", size, "bytes"),
            Step("One ring step", "α + (size/t)/β",
                 f"{g['alpha_us']:g} + {num(size)} / {t} / ({g['link_gbs']:g} × 10³)",
                 per_step, "µs"),
            Step("One all-reduce", "2(t−1) steps", f"2 × ({t} - 1) × {num(per_step)}", one,
                 "µs"),
            Step("Four all-reduces", "4 × one", f"4 × {num(one)}", us, "µs"),
        )
        return Worked(us, steps, (
            Mistake(us / 2, "Backward has its 2 all-reduces too: 4 per layer."),
            Mistake(4 * 2 * (t - 1) * size / t / (g["link_gbs"] * 1e3),
                    "Add α for every one of the 2(t−1) steps of each all-reduce."),
        ))

    def scene(g):
        return {**_scene(g), "alpha_us": g["alpha_us"], "intra_node_gbs": g["link_gbs"]}


@exercise("tp-layer-flops", chapter=6, scene="tensor-parallel", kind="number", unit="FLOP",
          title="A layer's forward FLOPs on one tensor-parallel GPU",
          source="Korthikanti et al. 2022 §6 / Narayanan et al. 2021: 24bsh²(1 + s/(6h)) per "
                 "layer forward",
          ranges=LAYER_RANGES,
          draw=_draw_layer, query=_scene)
class TpLayerFlops:
    def prompt(g):
        return (f"How many FLOPs does one GPU of a tp = {g['tp']} tensor-parallel group "
                f"compute in the forward pass of {_layer_words(g)} (matrix products only: "
                f"QKV, QKᵀ, ×V, the output projection and the MLP; 2 FLOPs per "
                f"multiply-add)?")

    def solve(g):
        b, s, h, t = g["micro_batch"], g["seq"], g["hidden"], g["tp"]
        whole = layer_forward_flops(_model(g), s, b)
        steps = (
            Step("Projections and MLP", "24bsh²", f"24 × {b} × {s} × {h}^2", 24.0 * b * s * h * h,
                 "FLOP"),
            Step("Attention scores and ×V", "4bs²h", f"4 × {b} × {s}^2 × {h}", 4.0 * b * s * s * h,
                 "FLOP"),
            Step("The layer", "24bsh² + 4bs²h", f"{num(24.0 * b * s * h * h)} + "
                                                f"{num(4.0 * b * s * s * h)}", whole, "FLOP"),
            Step("One GPU", "÷ t", f"{num(whole)} / {t}", whole / t, "FLOP"),
        )
        return Worked(whole / t, steps, (
            Mistake(whole, "Each GPU computes 1/t of every matrix product."),
            Mistake(24.0 * b * s * h * h / t, "Add attention's two batched products, 4bs²h: "
                                              "they grow with s²."),
            Mistake(3 * whole / t, "Forward only: backward is the other 2×."),
        ))


@exercise("tp-collectives-per-layer", chapter=6, scene="tensor-parallel", kind="integer",
          unit="collectives", title="How many collectives a layer calls",
          source="Shoeybi et al. 2019 §3 (f and g); Korthikanti et al. 2022 §4.2.2",
          ranges={"sequence_parallel": (False, True), "pass": ("forward", "backward")})
class TpCollectivesPerLayer:
    def draw(d):
        return {"sequence_parallel": bool(d.integer(0, 1)),
                "pass": d.choice(("forward", "backward")), "tp": d.choice(TP)}

    def prompt(g):
        how = ("with sequence parallelism (LayerNorms and dropouts split along the sequence)"
               if g["sequence_parallel"] else "without sequence parallelism")
        return (f"A transformer layer (attention and MLP) runs Megatron-LM tensor parallelism "
                f"over tp = {g['tp']} GPUs {how}. How many collectives (all-reduces, "
                f"all-gathers and reduce-scatters together) does one layer call in the "
                f"{g['pass']} pass of one micro-batch?")

    def solve(g):
        table = tp_scale.SP_LAYER if g["sequence_parallel"] else tp_scale.TP_LAYER
        calls = [(op, why) for op, pass_, why in table if pass_ == g["pass"]]
        steps = tuple(Step(why[0].upper() + why[1:], op.replace("_", "-"), "1", 1, "collectives")
                      for op, why in calls)
        steps += (Step("Collectives", "count", " + ".join("1" for _ in calls), len(calls),
                       "collectives"),)
        total = len([1 for _, p, _ in table])
        return Worked(len(calls), steps, (
            Mistake(total, f"That counts both passes; the question asks for the {g['pass']} "
                           f"pass."),
            Mistake(2 if g["sequence_parallel"] else 4,
                    "With sequence parallelism each all-reduce becomes an all-gather and a "
                    "reduce-scatter, and backward re-gathers inputs." if g["sequence_parallel"]
                    else "f is the identity forward and an all-reduce backward; g the other "
                         "way round: 2 per pass."),
        ))

    def scene(g):
        return {"block": "mlp", "tp": g["tp"], "tokens": 16,
                "sequence_parallel": g["sequence_parallel"]}
