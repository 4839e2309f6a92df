"""Chapter 11, putting it together: a rank's coordinates in a 5D layout and back, its groups,
whether a group crosses nodes, the MFU of a run, and how long a training run takes.

Answers call :class:`app.sim.parallelism.layout.Layout` (Megatron-LM's RankGenerator over
``order``, the first name fastest) and :func:`app.sim.flops.dense_flops_per_token` /
:func:`app.sim.flops.mfu` (PaLM's 6N) — what /parallelism and /planner compute with.
"""

from __future__ import annotations

from app.exercises.common import PEAK_TFLOPS, count_text, params, psi_text
from app.exercises.model import Mistake, Step, Worked, exercise
from app.exercises.units import num
from app.sim.flops import dense_flops_per_token, mfu
from app.sim.parallelism.layout import DENSE_AXES, Layout

ORDERS = ("tp-cp-ep-dp-pp", "tp-dp-cp-ep-pp", "cp-tp-ep-dp-pp", "dp-tp-cp-ep-pp")
"""Megatron-LM orders, fastest-varying first (the default first; pp last, as Megatron-LM
requires when the expert layers share the mesh)."""
SIZES = {"tp": (1, 2, 4, 8), "cp": (1, 2, 4), "dp": (1, 2, 4, 8), "pp": (1, 2, 4, 8)}


def layout_of(g) -> Layout:
    return Layout(tuple(g["order"].split("-")),
                  tuple((n, g[n]) for n in DENSE_AXES) + (("ep", 1),), g.get("gpus_per_node", 8))


def _draw_layout(d, least: int = 8) -> dict:
    while True:
        g = {n: d.choice(SIZES[n]) for n in DENSE_AXES}
        g["order"] = d.choice(ORDERS) if d.integer(0, 2) else ORDERS[0]
        world = g["tp"] * g["cp"] * g["dp"] * g["pp"]
        if least <= world <= 512 and sum(g[n] > 1 for n in DENSE_AXES) >= 3:
            g["rank"] = d.integer(1, world - 1)
            return g


def _sizes_text(g) -> str:
    return ", ".join(f"{n} = {g[n]}" for n in DENSE_AXES)


def _layout_scene(g) -> dict:
    return {n: g[n] for n in DENSE_AXES} | {"ep": 1, "experts": 1, "order": g["order"],
                                            "gpus_per_node": g.get("gpus_per_node", 8)}


@exercise("layout-rank-coords", chapter=11, scene="parallelism", kind="coords",
          title="A rank's coordinates in a 5D layout",
          source="Megatron-LM parallel_state.RankGenerator: ranks numbered over order, the first "
                 "name fastest",
          ranges={"tp": (1, 8), "cp": (1, 4), "dp": (1, 8), "pp": (1, 8), "order": ORDERS,
                  "rank": (0, 511)},
          keys=("tp", "cp", "dp", "pp"),
          draw=_draw_layout, query=_layout_scene)
class LayoutRankCoords:
    def prompt(g):
        return (f"Megatron-LM lays out tp × cp × dp × pp ranks ({_sizes_text(g)}, ep = 1) in the "
                f"order \"{g['order']}\" — the first name varies fastest. What are rank "
                f"{g['rank']}'s tp, cp, dp and pp coordinates?")

    def solve(g):
        coords = layout_of(g).coords(g["rank"])
        answer = {n: coords[n] for n in DENSE_AXES}
        names = [n for n in g["order"].split("-") if n != "ep"]
        steps, stride = [], 1
        for n in names:
            steps.append(Step(f"{n}: the digit of base {g[n]} (stride {stride})",
                              f"⌊r / {stride}⌋ mod {g[n]}", f"⌊{g['rank']} / {stride}⌋ mod {g[n]}",
                              answer[n], ""))
            stride *= g[n]
        reversed_ = Layout(tuple(reversed(g["order"].split("-"))), layout_of(g).sizes, 8).coords(
            g["rank"])
        return Worked(answer, tuple(steps), (
            Mistake({n: reversed_[n] for n in DENSE_AXES},
                    "The first name in Megatron's order varies fastest (torch's "
                    "init_device_mesh is the other way round: its last dimension is fastest)."),
        ))


@exercise("layout-rank-of-coords", chapter=11, scene="parallelism", kind="integer",
          unit="ranks", title="The rank at given coordinates",
          source="Megatron-LM RankGenerator: rank = tp_i + tp·(cp_i + cp·(dp_i + dp·pp_i)) for "
                 "tp-cp-ep-dp-pp",
          ranges={"tp": (1, 8), "cp": (1, 4), "dp": (1, 8), "pp": (1, 8), "order": ORDERS},
          query=_layout_scene)
class LayoutRankOfCoords:
    def draw(d):
        g = _draw_layout(d)
        coords = layout_of(g).coords(g.pop("rank"))
        return {**g, "at": {n: coords[n] for n in DENSE_AXES}}

    def prompt(g):
        at = ", ".join(f"{n} = {g['at'][n]}" for n in DENSE_AXES)
        return (f"Ranks are laid out with {_sizes_text(g)} (ep = 1) in Megatron-LM's order "
                f"\"{g['order']}\", the first name fastest. Which rank has coordinates {at}?")

    def solve(g):
        layout = layout_of(g)
        rank = next(r for r in range(layout.world)
                    if {n: layout.coords(r)[n] for n in DENSE_AXES} == g["at"])
        names = [n for n in g["order"].split("-") if n != "ep"]
        terms, stride = [], 1
        for n in names:
            terms.append(f"{g['at'][n]} × {stride}")
            stride *= g[n]
        steps = (Step("Strides, fastest first", " · ".join(names), "", ", ".join(
                     f"{n}: {s}" for n, s in zip(names, _strides(g, names))), ""),
                 Step("Rank", "Σ coordinate × stride", " + ".join(terms), rank, "ranks"))
        flipped = sum(g["at"][n] * s for n, s in zip(reversed(names),
                                                       _strides(g, list(reversed(names)))))
        return Worked(rank, steps, (
            Mistake(flipped, "The first name of the order varies fastest: its stride is 1."),
        ))


def _strides(g, names) -> list[int]:
    out, stride = [], 1
    for n in names:
        out.append(stride)
        stride *= g[n]
    return out


@exercise("layout-group", chapter=11, scene="parallelism", kind="ranks",
          title="The ranks of a rank's group",
          source="Megatron-LM RankGenerator.get_ranks: a group is a line of the mesh along its "
                 "axis",
          ranges={"tp": (1, 8), "cp": (1, 4), "dp": (1, 8), "pp": (1, 8), "order": ORDERS,
                  "axis": DENSE_AXES},
          query=_layout_scene)
class LayoutGroup:
    def draw(d):
        g = _draw_layout(d)
        g["axis"] = d.choice(tuple(n for n in DENSE_AXES if g[n] > 1))
        return g

    def prompt(g):
        return (f"Ranks are laid out with {_sizes_text(g)} (ep = 1) in Megatron-LM's order "
                f"\"{g['order']}\", the first name fastest. Which ranks form rank {g['rank']}'s "
                f"{g['axis']} group (the ranks that differ from it only in the {g['axis']} "
                f"coordinate)?")

    def solve(g):
        layout = layout_of(g)
        group = list(layout.group_of(g["rank"], g["axis"]))
        names = [n for n in g["order"].split("-") if n != "ep"]
        stride = _strides(g, names)[names.index(g["axis"])]
        steps = (
            Step(f"Stride of {g['axis']}", "product of the sizes before it in the order",
                 " × ".join(str(g[n]) for n in names[:names.index(g["axis"])]) or "1", stride,
                 ""),
            Step("The first member", "the rank with its own coordinate set to 0",
                 f"{g['rank']} - {layout.coords(g['rank'])[g['axis']]} × {stride}", group[0], ""),
            Step("The group", f"first + i·stride, i = 0 … {g['axis']} − 1", "",
                 ", ".join(map(str, group)), ""),
        )
        mistakes = tuple(Mistake(list(layout.group_of(g["rank"], other)),
                                 f"Those are rank {g['rank']}'s {other} group; the {g['axis']} "
                                 f"group varies the {g['axis']} coordinate.")
                         for other in DENSE_AXES if other != g["axis"] and g[other] > 1)
        return Worked(group, steps, mistakes)


@exercise("layout-crosses-nodes", chapter=11, scene="parallelism", kind="choice",
          title="Does the group leave the node?",
          source="torchrun fills nodes in order: rank r on node r // gpus_per_node",
          ranges={"tp": (1, 8), "cp": (1, 4), "dp": (1, 8), "pp": (1, 8), "order": ORDERS,
                  "axis": DENSE_AXES, "gpus_per_node": (4, 8)},
          query=_layout_scene)
class LayoutCrossesNodes:
    def draw(d):
        g = _draw_layout(d, least=16)
        g.pop("rank")
        g["gpus_per_node"] = d.choice((4, 8))
        g["axis"] = d.choice(tuple(n for n in DENSE_AXES if g[n] > 1))
        return g

    def prompt(g):
        return (f"{_sizes_text(g)} (ep = 1) are laid out in Megatron-LM's order "
                f"\"{g['order']}\" on nodes of {g['gpus_per_node']} GPUs, ranks filling nodes "
                f"in order. Does any {g['axis']} group span more than one node — must its "
                f"traffic cross InfiniBand? Answer yes or no.")

    def choices(g):
        return ("yes", "no")

    def solve(g):
        layout = layout_of(g)
        crosses = layout.crosses_nodes(g["axis"])
        names = [n for n in g["order"].split("-") if n != "ep"]
        stride = _strides(g, names)[names.index(g["axis"])]
        span = stride * (g[g["axis"]] - 1) + 1
        steps = (
            Step(f"Stride of {g['axis']}", "product of the sizes before it", "", stride, ""),
            Step("Ranks a group spans, first to last", "stride·(size − 1) + 1",
                 f"{stride} × ({g[g['axis']]} - 1) + 1", span, "ranks"),
            Step("Crosses a node boundary?", f"some group's ranks lie on two nodes of "
                                             f"{g['gpus_per_node']}", "",
                 "yes" if crosses else "no", ""),
        )
        answer = "yes" if crosses else "no"
        return Worked(answer, steps, (
            Mistake("no" if crosses else "yes",
                    f"Its members are {stride} ranks apart: {span} ranks from first to last, "
                    f"on nodes of {g['gpus_per_node']}." if crosses else
                    f"Its members are {stride} ranks apart and every group starts at a multiple "
                    f"of its span: each fits inside one node."),
        ))


@exercise("mfu", chapter=11, scene="planner", kind="number", unit="fraction",
          title="Model FLOPs utilisation",
          source="Chowdhery et al. 2022 (PaLM), Appendix B: MFU = 6N · tokens/s / peak",
          ranges={"params": (1e8, 2e12), "tokens_per_s": (1, 1e6), "peak_tflops": PEAK_TFLOPS})
class Mfu:
    def draw(d):
        n, peak = params(d), d.choice(PEAK_TFLOPS)
        target = d.uniform(0.25, 0.6)
        rate = target * peak * 1e12 / dense_flops_per_token(n)
        return {"params": n, "tokens_per_s": float(f"{rate:.3g}"), "peak_tflops": peak}

    def prompt(g):
        return (f"A dense model of {psi_text(g['params'])} parameters trains at "
                f"{g['tokens_per_s']:g} tokens per second per GPU on GPUs whose dense 16-bit "
                f"peak is {g['peak_tflops']:g} TFLOP/s. Counting 6N FLOPs per token (forward "
                f"and backward, attention left out), what is its MFU?")

    def solve(g):
        per_token = dense_flops_per_token(g["params"])
        u = mfu(per_token, g["tokens_per_s"], g["peak_tflops"])
        steps = (
            Step("FLOPs per token", "6N", f"6 × {num(g['params'])}", per_token, "FLOP"),
            Step("Achieved FLOP/s per GPU", "6N × tokens/s",
                 f"{num(per_token)} × {num(g['tokens_per_s'])}", per_token * g["tokens_per_s"],
                 ""),
            Step("MFU", "achieved / peak", f"{num(per_token * g['tokens_per_s'])} / "
                                           f"({g['peak_tflops']:g} × 10¹²)", u, "fraction"),
        )
        return Worked(u, steps, (
            Mistake(u / 3, "Training costs 6N per token: 2N forward and 4N backward, not 2N."),
            Mistake(u * 4 / 3, "6N, not 8N: recomputation is not model FLOPs (MFU counts the "
                               "model's, HFU the hardware's)."),
        ))

    def scene(g):
        return {"preset": "llama3-70b"}


@exercise("step-mfu", chapter=11, scene="planner", kind="number", unit="fraction",
          title="MFU from a step time",
          source="Chowdhery et al. 2022 (PaLM) App. B; tokens per step = global batch × sequence",
          ranges={"params": (5e8, 1e12), "global_batch": (256, 4096), "seq": (2048, 8192),
                  "gpus": (64, 16384), "step_s": (0.5, 60), "peak_tflops": PEAK_TFLOPS})
class StepMfu:
    def draw(d):
        while True:
            n, peak = params(d), d.choice(PEAK_TFLOPS)
            gpus = d.choice((64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384))
            batch, seq = d.choice((256, 512, 1024, 2048, 4096)), d.choice((2048, 4096, 8192))
            target = d.uniform(0.3, 0.55)
            step = dense_flops_per_token(n) * batch * seq / (gpus * peak * 1e12 * target)
            if 0.5 <= step <= 60:
                return {"params": n, "global_batch": batch, "seq": seq, "gpus": gpus,
                        "step_s": float(f"{step:.3g}"), "peak_tflops": peak}

    def prompt(g):
        return (f"A dense model of {psi_text(g['params'])} parameters trains on {g['gpus']} "
                f"GPUs (peak {g['peak_tflops']:g} TFLOP/s each); a step of {g['global_batch']} "
                f"sequences of {g['seq']} tokens takes {g['step_s']:g} s. Counting 6N FLOPs per "
                f"token, what is its MFU?")

    def solve(g):
        tokens = g["global_batch"] * g["seq"]
        rate = tokens / g["step_s"] / g["gpus"]
        u = mfu(dense_flops_per_token(g["params"]), rate, g["peak_tflops"])
        steps = (
            Step("Tokens per step", "global batch × sequence",
                 f"{g['global_batch']} × {g['seq']}", tokens, "tokens"),
            Step("Tokens per second per GPU", "tokens / step time / GPUs",
                 f"{tokens} / {g['step_s']:g} / {g['gpus']}", rate, "tokens/s"),
            Step("MFU", "6N × tokens/s / peak",
                 f"6 × {num(g['params'])} × {num(rate)} / ({g['peak_tflops']:g} × 10¹²)", u,
                 "fraction"),
        )
        return Worked(u, steps, (
            Mistake(u * g["gpus"], "Divide by the number of GPUs: MFU is per GPU."),
            Mistake(u / g["seq"], "A sequence is seq tokens: count tokens, not sequences."),
        ))

    def scene(g):
        return {"preset": "llama3-70b", "seq": g["seq"], "global_batch": g["global_batch"]}


@exercise("train-days", chapter=11, scene="planner", kind="number", unit="days",
          title="How long a training run takes",
          source="Kaplan et al. 2020 / PaLM: training FLOPs = 6·N·D; time = 6ND / (GPUs · peak "
                 "· MFU)",
          ranges={"params": (5e8, 1e12), "tokens": (1e11, 2e13), "gpus": (256, 16384),
                  "peak_tflops": PEAK_TFLOPS, "mfu": (0.25, 0.6)})
class TrainDays:
    def draw(d):
        return {"params": params(d), "tokens": int(d.nice(2e11, 1.5e13, 2)),
                "gpus": d.choice((512, 1024, 2048, 4096, 8192, 16384)),
                "peak_tflops": d.choice(PEAK_TFLOPS), "mfu": d.choice((0.3, 0.35, 0.4, 0.45,
                                                                       0.5))}

    def prompt(g):
        return (f"A dense model of {psi_text(g['params'])} parameters trains on "
                f"{count_text(g['tokens'])} tokens ({num(g['tokens'])}) on {g['gpus']} GPUs of "
                f"{g['peak_tflops']:g} TFLOP/s peak at {g['mfu'] * 100:g} % MFU (6N FLOPs per "
                f"token). How many days does it take?")

    def solve(g):
        per_token = dense_flops_per_token(g["params"])
        # tokens/s per GPU at this MFU: mfu() is linear in the rate
        rate = g["mfu"] / mfu(per_token, 1.0, g["peak_tflops"])
        seconds = g["tokens"] / (rate * g["gpus"])
        steps = (
            Step("Training FLOPs", "6·N·D", f"6 × {num(g['params'])} × {num(g['tokens'])}",
                 per_token * g["tokens"], "FLOP"),
            Step("Cluster FLOP/s achieved", "GPUs × peak × MFU",
                 f"{g['gpus']} × {g['peak_tflops']:g}×10¹² × {g['mfu']:g}",
                 g["gpus"] * g["peak_tflops"] * 1e12 * g["mfu"], ""),
            Step("Days", "FLOPs / FLOP/s / 86,400",
                 f"{num(per_token * g['tokens'])} / {num(g['gpus'] * g['peak_tflops'] * 1e12 * g['mfu'])} / 86400",
                 seconds / 86400, "days"),
        )
        return Worked(seconds / 86400, steps, (
            Mistake(seconds / 86400 * g["mfu"], "Divide by the MFU: the GPUs achieve only that "
                                                "share of their peak."),
            Mistake(seconds / 86400 / 3, "6N FLOPs per token for training (forward 2N, backward "
                                         "4N)."),
            Mistake(seconds / 3600, "That is hours."),
        ))

    def scene(g):
        return {"preset": "llama3-70b", "gpus": min(g["gpus"], 16384)}
