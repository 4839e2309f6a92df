"""Chapter 10, mixture of experts: Megatron's expert capacity, the assignments it drops, the
load-balancing and z losses, where a token and an expert live, and the all-to-all that moves
tokens to their experts (bytes and time).

Answers call :mod:`app.sim.moe` — ``capacity.get_capacity`` and ``apply_capacity`` (Megatron-LM
moe_utils), ``losses.aux_loss`` and ``z_loss`` (Switch Transformer; ST-MoE),
``dispatch.dispatch_matrix`` and ``all_to_all_cost`` — the code /moe routes with.
"""

from __future__ import annotations

import numpy as np

from app.exercises.model import Mistake, Step, Worked, exercise
from app.exercises.units import num
from app.sim.collectives.cost import Links
from app.sim.moe.capacity import apply_capacity, get_capacity
from app.sim.moe.dispatch import all_to_all_cost, dispatch_matrix
from app.sim.moe.losses import aux_loss, z_loss

EXPERTS = (8, 16, 32, 64, 128, 256)
TOP_K = (1, 2, 4, 8)
FACTORS = (1.0, 1.1, 1.25, 1.5, 2.0)


def _moe_scene(tokens: int, experts: int, top_k: int, cf: float = 1.25, ep: int = 1) -> dict:
    """/moe at the problem's routing, within the scene's worked-example bounds."""
    t = min(tokens, 512)
    e = min(experts, 64)
    ep = ep if e % ep == 0 and t % ep == 0 else 1
    return {"tokens": t, "experts": e, "top_k": min(top_k, e), "capacity_factor": cf, "ep": ep}


@exercise("moe-capacity", chapter=10, scene="moe", kind="integer", unit="tokens",
          title="Expert capacity",
          source="Megatron-LM moe_utils.get_capacity: ⌈T·k/E · cf⌉ on each rank's own tokens; "
                 "get_capacity(4096, 64, 1.25) = 80",
          ranges={"tokens": (256, 16384), "experts": (8, 256), "top_k": (1, 8),
                  "capacity_factor": (1.0, 2.0)})
class MoeCapacity:
    def draw(d):
        experts = d.choice(EXPERTS)
        return {"tokens": d.choice((512, 1024, 2048, 4096, 8192, 3000, 6000)),
                "experts": experts, "top_k": d.choice(tuple(k for k in TOP_K if k < experts)),
                "capacity_factor": d.choice(FACTORS)}

    def prompt(g):
        return (f"A rank routes its T = {g['tokens']} tokens to the top k = {g['top_k']} of "
                f"E = {g['experts']} experts, with capacity factor {g['capacity_factor']:g}. "
                f"How many of this rank's assignments may each expert take (Megatron-LM's "
                f"capacity)?")

    def solve(g):
        T, E, k, cf = g["tokens"], g["experts"], g["top_k"], g["capacity_factor"]
        cap = get_capacity(T * k, E, cf)
        steps = (
            Step("Assignments on the rank", "T·k", f"{T} × {k}", T * k, "assignments"),
            Step("Even share per expert", "T·k/E", f"{T * k} / {E}", T * k / E, "assignments"),
            Step("Capacity", "⌈T·k/E · cf⌉", f"⌈{num(T * k / E)} × {cf:g}⌉", cap, "tokens"),
        )
        return Worked(cap, steps, (
            Mistake(get_capacity(T, E, cf), "Each token makes k assignments: T·k of them."),
            Mistake(int(T * k / E * cf), "Round up (ceil): a capacity is a whole number of "
                                         "slots, and Megatron rounds up."),
            Mistake(get_capacity(T * k, E, 1.0), "Multiply by the capacity factor."),
        ))

    def scene(g):
        return _moe_scene(g["tokens"], g["experts"], g["top_k"], g["capacity_factor"])


def _loads(d, assignments: int, experts: int) -> list[int]:
    """How a skewed router spreads ``assignments`` over ``experts``: a few favourites."""
    weights = [d.integer(1, 4) ** 2 for _ in range(experts)]
    total = sum(weights)
    loads = [assignments * w // total for w in weights]
    loads[0] += assignments - sum(loads)
    return loads


@exercise("moe-drops", chapter=10, scene="moe", kind="integer", unit="assignments",
          title="How many assignments capacity drops",
          source="Megatron-LM token dropping (--moe-token-drop-policy): each expert keeps at "
                 "most capacity assignments of a rank",
          ranges={"tokens": (16, 64), "experts": (4, 8), "top_k": (1, 2),
                  "capacity_factor": (1.0, 1.5)})
class MoeDrops:
    def draw(d):
        while True:
            experts, top_k = d.choice((4, 6, 8)), d.choice((1, 2))
            tokens = d.choice((16, 24, 32, 48, 64))
            g = {"tokens": tokens, "experts": experts, "top_k": top_k,
                 "capacity_factor": d.choice((1.0, 1.25, 1.5)),
                 "loads": _loads(d, tokens * top_k, experts)}
            if MoeDrops.solve(g).answer > 0:
                return g

    def prompt(g):
        loads = ", ".join(f"expert {i}: {n}" for i, n in enumerate(g["loads"]))
        return (f"A rank routes T = {g['tokens']} tokens to the top k = {g['top_k']} of "
                f"E = {g['experts']} experts with capacity factor {g['capacity_factor']:g}. The "
                f"router sent the assignments: {loads}. Each expert keeps at most its capacity "
                f"⌈T·k/E · cf⌉ and drops the rest. How many assignments are dropped in all?")

    def solve(g):
        T, E, k = g["tokens"], g["experts"], g["top_k"]
        cap = get_capacity(T * k, E, g["capacity_factor"])
        experts = np.repeat(np.arange(E), g["loads"]).reshape(T, k)
        drops = apply_capacity(experts, np.ones(experts.shape), E, 1, cap, "position")
        dropped = len(drops.dropped)
        over = [max(0, n - cap) for n in g["loads"]]
        steps = (
            Step("Capacity", "⌈T·k/E · cf⌉", f"⌈{T} × {k} / {E} × {g['capacity_factor']:g}⌉", cap,
                 "tokens"),
            Step("Over capacity, expert by expert", "max(0, load − capacity)",
                 " + ".join(f"max(0, {n} - {cap})" for n in g["loads"]), sum(over),
                 "assignments"),
            Step("Dropped", "the sum", " + ".join(map(str, over)), dropped, "assignments"),
        )
        return Worked(dropped, steps, (
            Mistake(sum(max(0, n - get_capacity(T, E, g["capacity_factor"])) for n in g["loads"]),
                    "The capacity counts assignments: T·k of them, not T."),
            Mistake(sum(n for n in g["loads"] if n > cap), "An expert over capacity still keeps "
                                                           "its first capacity assignments."),
        ))

    def scene(g):
        return _moe_scene(g["tokens"], g["experts"], g["top_k"], g["capacity_factor"])


@exercise("moe-aux-loss", chapter=10, scene="moe", kind="number", unit="",
          title="The load-balancing loss",
          source="Fedus et al. 2021 (Switch Transformer) eq. 4; Megatron-LM "
                 "switch_load_balancing_loss_func: α·E·Σ fᵢ·Pᵢ",
          ranges={"experts": (4, 4), "coeff": (0.001, 0.1)})
class MoeAuxLoss:
    def draw(d):
        E = 4
        counts = [d.integer(1, 20) for _ in range(E)]
        cuts = sorted(d.sample(range(50, 950, 10), E - 1))
        probs = [b - a for a, b in zip([0] + cuts, cuts + [1000])]
        return {"experts": E, "counts": counts, "probs": [p / 1000 for p in probs],
                "coeff": d.choice((0.001, 0.01, 0.02, 0.1))}

    def prompt(g):
        counts = ", ".join(map(str, g["counts"]))
        probs = ", ".join(f"{p:g}" for p in g["probs"])
        return (f"A router with E = {g['experts']} experts made assignments per expert "
                f"{counts} (before any dropping) and its mean softmax probabilities per expert "
                f"over the tokens are {probs}. With α = {g['coeff']:g}, what is the "
                f"load-balancing loss α·E·Σᵢ fᵢ·Pᵢ (fᵢ the share of the assignments expert i "
                f"got)?")

    def solve(g):
        E, counts, probs, a = g["experts"], g["counts"], g["probs"], g["coeff"]
        experts = np.repeat(np.arange(E), counts)
        loss = aux_loss(np.log(np.asarray(probs))[None, :], experts, a)
        total = sum(counts)
        f = [c / total for c in counts]
        steps = (
            Step("Assignments", "Σ counts", " + ".join(map(str, counts)), total, ""),
            Step("Σ fᵢ·Pᵢ", "Σ (countᵢ/total)·Pᵢ",
                 " + ".join(f"{c} / {total} × {p:g}" for c, p in zip(counts, probs)),
                 sum(x * p for x, p in zip(f, probs)), ""),
            Step("Loss", "α·E·Σ fᵢPᵢ", f"{a:g} × {E} × {num(sum(x * p for x, p in zip(f, probs)))}",
                 loss, ""),
        )
        return Worked(loss, steps, (
            Mistake(loss / E, "Multiply by E: a uniform router then scores exactly α."),
            Mistake(loss / a, "Multiply by the coefficient α."),
        ))

    def scene(g):
        return {"tokens": 64, "experts": 4, "top_k": 1, "aux_loss_coeff": g["coeff"]}


@exercise("moe-z-loss", chapter=10, scene="moe", kind="number", unit="",
          title="The router z-loss",
          source="Zoph et al. 2022 (ST-MoE) eq. 5: β · mean over tokens of logsumexp(logits)²",
          ranges={"coeff": (1e-3, 1e-2)})
class MoeZLoss:
    def draw(d):
        logits = [[d.integer(-20, 20) / 10 for _ in range(4)] for _ in range(2)]
        return {"logits": logits, "coeff": d.choice((0.001, 0.002, 0.01))}

    def prompt(g):
        rows = "; ".join("token " + str(t) + ": " + ", ".join(f"{x:g}" for x in row)
                         for t, row in enumerate(g["logits"]))
        return (f"A router gives two tokens these logits over 4 experts — {rows}. With "
                f"β = {g['coeff']:g}, what is the router z-loss, β · mean over tokens of "
                f"(log Σⱼ e^logit_j)²?")

    def solve(g):
        logits = np.asarray(g["logits"], dtype=float)
        loss = z_loss(logits, g["coeff"])
        lse = [float(np.log(np.exp(row).sum())) for row in logits]
        steps = tuple(Step(f"logsumexp, token {t}", "log Σ e^logit",
                           "log(" + " + ".join(f"exp({x:g})" for x in row) + ")", lse[t], "")
                      for t, row in enumerate(g["logits"]))
        steps += (Step("Loss", "β · mean(lse²)",
                       f"{g['coeff']:g} × ({num(lse[0])}^2 + {num(lse[1])}^2) / 2", loss, ""),)
        return Worked(loss, steps, (
            Mistake(g["coeff"] * sum(lse) / 2, "Square each token's logsumexp before "
                                               "averaging."),
            Mistake(g["coeff"] * float(np.mean(np.max(logits, axis=1) ** 2)),
                    "logsumexp is more than the largest logit: log Σ e^x, every expert counts."),
        ))

    def scene(g):
        return {"tokens": 64, "experts": 4, "top_k": 1, "z_loss_coeff": g["coeff"]}


@exercise("moe-placement", chapter=10, scene="moe", kind="coords",
          title="Where a token and its expert live",
          source="DESIGN.md /api/moe: token t lives on rank t // (T/ep), expert e on rank "
                 "e // (E/ep)",
          ranges={"tokens": (128, 16384), "experts": (8, 256), "ep": (2, 64)},
          keys=("token_rank", "expert_rank"))
class MoePlacement:
    def draw(d):
        experts = d.choice(EXPERTS)
        ep = d.choice(tuple(e for e in (2, 4, 8, 16, 32, 64) if e <= experts))
        tokens = ep * d.choice((64, 128, 256))
        return {"tokens": tokens, "experts": experts, "ep": ep,
                "token": d.integer(0, tokens - 1), "expert": d.integer(0, experts - 1)}

    def prompt(g):
        return (f"T = {g['tokens']} tokens are spread evenly over ep = {g['ep']} "
                f"expert-parallel ranks (in order), and so are E = {g['experts']} experts. "
                f"Token {g['token']} is routed to expert {g['expert']}: on which rank does the "
                f"token live, and on which rank does its expert run?")

    def solve(g):
        T, E, ep = g["tokens"], g["experts"], g["ep"]
        experts = np.full((T, 1), g["expert"])
        kept = np.zeros((T, 1), dtype=bool)
        kept[g["token"], 0] = True
        src, dst = map(int, np.argwhere(dispatch_matrix(experts, kept, E, ep))[0])
        steps = (
            Step("Tokens per rank", "T/ep", f"{T} / {ep}", T // ep, "tokens"),
            Step("The token's rank", "t // (T/ep)", f"floor({g['token']} / {T // ep})", src, ""),
            Step("Experts per rank", "E/ep", f"{E} / {ep}", E // ep, ""),
            Step("The expert's rank", "e // (E/ep)", f"floor({g['expert']} / {E // ep})", dst,
                 ""),
        )
        return Worked({"token_rank": src, "expert_rank": dst}, steps, (
            Mistake({"token_rank": g["token"] % ep, "expert_rank": g["expert"] % ep},
                    "Ranks hold contiguous ranges (t // (T/ep)), not every ep-th one."),
        ))

    def scene(g):
        return _moe_scene(g["tokens"], g["experts"], 2, ep=g["ep"])


def _uniform(tokens: int, top_k: int, ep: int) -> np.ndarray:
    """Assignments rank i sends rank j when the router spreads them evenly."""
    return np.full((ep, ep), tokens * top_k // ep)


@exercise("moe-a2a-bytes", chapter=10, scene="moe", kind="number", unit="bytes",
          title="What the dispatch all-to-all sends",
          source="Lepikhin et al. 2020 (GShard): each rank sends its tokens × k to the experts' "
                 "ranks; (ep−1)/ep of them leave",
          ranges={"tokens": (512, 65536), "top_k": (1, 8), "hidden": (2048, 8192),
                  "ep": (2, 64)})
class MoeAllToAllBytes:
    def draw(d):
        ep = d.choice((2, 4, 8, 16, 32, 64))
        return {"tokens": ep * d.choice((64, 128, 256)) * 4, "top_k": d.choice(TOP_K),
                "hidden": d.choice((2048, 4096, 7168, 8192)), "ep": ep,
                "bytes_per_element": d.choice((2, 1))}

    def prompt(g):
        dtype = "BF16" if g["bytes_per_element"] == 2 else "FP8"
        return (f"An expert-parallel group of ep = {g['ep']} ranks; each rank holds "
                f"{g['tokens']} tokens of hidden size {g['hidden']} ({dtype}, "
                f"{g['bytes_per_element']} byte{'s' if g['bytes_per_element'] > 1 else ''} a "
                f"number) and sends each to its top k = {g['top_k']} experts. With a perfectly "
                f"balanced router, how many bytes does each rank send to other ranks in one "
                f"dispatch all-to-all?")

    def solve(g):
        T, k, h, ep, e = g["tokens"], g["top_k"], g["hidden"], g["ep"], g["bytes_per_element"]
        matrix = _uniform(T, k, ep)
        sent = float(all_to_all_cost(matrix, h * e, Links(5.0, 450.0, 50.0, 8)).bytes_sent[0])
        steps = (
            Step("Assignments on the rank", "T·k", f"{T} × {k}", T * k, "assignments"),
            Step("… that go to other ranks", "T·k·(ep−1)/ep", f"{T * k} × ({ep} - 1) / {ep}",
                 T * k * (ep - 1) / ep, "assignments"),
            Step("Bytes", "× h × bytes per number", f"{num(T * k * (ep - 1) / ep)} × {h} × {e}",
                 sent, "bytes"),
        )
        return Worked(sent, steps, (
            Mistake(float(T * k * h * e), "The assignments for the rank's own experts stay: "
                                          "(ep−1)/ep leave."),
            Mistake(sent / k, "Each token goes to k experts: k copies of it."),
        ))

    def scene(g):
        return {**_moe_scene(512, 64, g["top_k"], ep=min(g["ep"], 64)),
                "cost_hidden": g["hidden"], "cost_tokens": g["tokens"]}


@exercise("moe-a2a-time", chapter=10, scene="moe", kind="number", unit="µs",
          title="How long the dispatch takes across nodes",
          source="α–β model of a direct all-to-all (app/sim/collectives/cost.py): a rank's "
                 "messages go one after another",
          ranges={"tokens": (1024, 16384), "top_k": (1, 8), "hidden": (2048, 8192),
                  "ep": (2, 16), "inter_gbs": (25, 50), "alpha_us": (5, 10)})
class MoeAllToAllTime:
    def draw(d):
        ep = d.choice((2, 4, 8, 16))
        return {"tokens": ep * d.choice((128, 256)) * 4, "top_k": d.choice(TOP_K),
                "hidden": d.choice((2048, 4096, 7168)), "ep": ep,
                "inter_gbs": d.choice((25.0, 50.0)), "alpha_us": d.choice((5.0, 10.0))}

    def prompt(g):
        return (f"ep = {g['ep']} expert-parallel ranks sit on different nodes, linked at "
                f"{g['inter_gbs']:g} GB/s (α = {g['alpha_us']:g} µs a message). Each rank holds "
                f"{g['tokens']} tokens of hidden size {g['hidden']} in BF16 and sends each to "
                f"k = {g['top_k']} experts, the router perfectly balanced; a rank sends its "
                f"messages to the other ranks one after another. How long does one dispatch "
                f"all-to-all take, in µs?")

    def solve(g):
        T, k, h, ep = g["tokens"], g["top_k"], g["hidden"], g["ep"]
        matrix = _uniform(T, k, ep)
        links = Links(g["alpha_us"], 450.0, g["inter_gbs"], 1)
        us = all_to_all_cost(matrix, h * 2, links).time_us
        per = T * k // ep * h * 2
        steps = (
            Step("One message (to one other rank)", "(T·k/ep) × h × 2 bytes",
                 f"{T * k // ep} × {h} × 2", per, "bytes"),
            Step("Its time", "α + bytes/β", f"{g['alpha_us']:g} + {num(per)} / ({g['inter_gbs']:g}"
                                           f" × 10³)", g["alpha_us"] + per / (g["inter_gbs"] * 1e3),
                 "µs"),
            Step("All-to-all: ep − 1 messages", "(ep − 1)(α + bytes/β)",
                 f"({ep} - 1) × {num(g['alpha_us'] + per / (g['inter_gbs'] * 1e3))}", us, "µs"),
        )
        return Worked(us, steps, (
            Mistake(us * ep / (ep - 1), "The message to itself never leaves: ep − 1 of them."),
            Mistake(us - (ep - 1) * g["alpha_us"], "Add α for each message."),
        ))

    def scene(g):
        return {**_moe_scene(512, 64, g["top_k"], ep=min(g["ep"], 64)),
                "cost_hidden": g["hidden"], "cost_tokens": g["tokens"], "dtype": "bf16",
                "alpha_us": g["alpha_us"], "inter_node_gbs": g["inter_gbs"], "gpus_per_node": 1}
