"""Chapter 2, collective communication: what each rank sends in a ring all-reduce, all-gather
and all-to-all, the α–β time of a ring, nccl-tests' bus bandwidth, where latency and
bandwidth cost the same, and how many steps an all-reduce takes.

Volumes are read off the schedules the /collective scene animates
(:func:`app.sim.collectives.schedules.build` and :func:`elements_sent`), times from its α–β
model (:mod:`app.sim.collectives.cost`; Thakur et al. 2005; nccl-tests doc/PERFORMANCE.md).
"""

from __future__ import annotations


from app.exercises.model import Mistake, Step, Worked, exercise
from app.exercises.units import bytes_text, num
from app.sim.collectives import cost
from app.sim.collectives.schedules import build, elements_sent, step_count

RING_RANKS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
OP_WORDS = {"all_reduce": "all-reduce", "all_gather": "all-gather",
            "reduce_scatter": "reduce-scatter", "all_to_all": "all-to-all"}


def sent_share(op: str, algorithm: str, ranks: int) -> float:
    """What the busiest rank sends, as a share of the whole tensor, on the built schedule."""
    count = 2 * ranks
    return float(elements_sent(build(op, algorithm, ranks, count)).max()) / count


def one_node(ranks: int, alpha_us: float, link_gbs: float) -> cost.Links:
    """Every rank on one node with links of ``link_gbs``: the textbook's single β."""
    return cost.Links(alpha_us, link_gbs, link_gbs, max(ranks, 1))


def buffer_bytes(d) -> int:
    """A message a training step really sends: a 25 MiB DDP bucket, a layer's gradients, a
    model's, from 1 MB to 60 GB (the scene's cost panel goes to 2³⁶ bytes)."""
    if d.integer(0, 2) == 0:
        return d.choice((25 * 2**20, 64 * 2**20, 256 * 2**20, 2**30, 4 * 2**30))
    return int(d.nice(1e6, 6e10, 2))


def draw_buffer(d) -> dict:
    """N ranks and the buffer M each of them holds."""
    return {"ranks": d.choice(RING_RANKS), "bytes": buffer_bytes(d)}


BUFFER_RANGES = {"ranks": (2, 64), "bytes": (1e6, 7e10)}
"""What draw_buffer draws."""


def collective_scene(op: str, ranks: int, size: int, alpha_us: float = 5.0,
                     link_gbs: float = 300.0, algorithm: str = "ring") -> dict:
    return {"op": op, "algorithm": algorithm, "world": ranks,
            "count": 2 * ranks if op in ("reduce_scatter", "all_gather", "all_to_all") else 8,
            "alpha_us": alpha_us, "intra_node_gbs": link_gbs, "gpus_per_node": 64,
            "cost_bytes": size}


@exercise("ring-allreduce-bytes", chapter=2, scene="collective", kind="number", unit="bytes",
          title="Bytes each rank sends in a ring all-reduce",
          source="Thakur et al. 2005; nccl-tests PERFORMANCE.md: a ring all-reduce sends "
                 "2(N−1)/N · M per rank",
          ranges=BUFFER_RANGES, draw=draw_buffer)
class RingAllReduceBytes:
    def prompt(g):
        return (f"N = {g['ranks']} GPUs all-reduce a buffer of M = {bytes_text(g['bytes'])} — "
                f"{num(g['bytes'], 12)} bytes — that each of them holds, with the ring algorithm. "
                f"How many bytes does each GPU send?")

    def solve(g):
        n, m = g["ranks"], g["bytes"]
        share = sent_share("all_reduce", "ring", n)
        steps = (
            Step("Steps of the ring", "reduce-scatter N−1, then all-gather N−1: 2(N−1)",
                 f"2 × ({n} − 1)", step_count("all_reduce", "ring", n, 2 * n), "steps"),
            Step("Bytes sent per step: one chunk", "M/N", f"{num(m)} / {n}", m / n, "bytes"),
            Step("Bytes each rank sends", "2(N−1) · M/N",
                 f"2 × ({n} − 1) × {num(m / n)}", share * m, "bytes"),
        )
        return Worked(share * m, steps, (
            Mistake(m * (n - 1) / n, "That is one half of it: a ring all-reduce is a "
                                     "reduce-scatter followed by an all-gather, each sending "
                                     "(N−1)/N · M — the 2 of ring all-reduce."),
            Mistake(2 * m, "Each step sends one chunk of M/N, and a rank never sends its own "
                           "chunk to itself: (N−1)/N, not 1."),
            Mistake(2 * (n - 1) * m, "A step sends one chunk (M/N), not the whole buffer."),
            Mistake(m, "Count both phases: reduce-scatter, then all-gather."),
        ))

    def scene(g):
        return collective_scene("all_reduce", g["ranks"], g["bytes"])


@exercise("ring-allreduce-time", chapter=2, scene="collective", kind="number", unit="s",
          title="α–β time of a ring all-reduce",
          source="Thakur et al. 2005 (Hockney's α–β model): 2(N−1)·α + 2(N−1)/N · M/β",
          ranges={"ranks": (2, 64), "bytes": (1e6, 7e10), "alpha_us": (1, 50),
                  "link_gbs": (10, 900)})
class RingAllReduceTime:
    def draw(d):
        return {"ranks": d.choice(RING_RANKS), "bytes": buffer_bytes(d),
                "alpha_us": d.choice((2.0, 3.0, 5.0, 8.0, 10.0, 20.0)),
                "link_gbs": d.choice((25.0, 50.0, 100.0, 200.0, 300.0, 450.0, 900.0))}

    def prompt(g):
        return (f"N = {g['ranks']} GPUs all-reduce M = {bytes_text(g['bytes'])} — "
                f"{num(g['bytes'], 12)} bytes — each with the ring algorithm. Every message "
                f"costs α = {g['alpha_us']:g} µs plus its bytes over β = {g['link_gbs']:g} GB/s "
                f"(10⁹ bytes/s) per link, and all ranks send at once. How long does the "
                f"all-reduce take, in seconds?")

    def solve(g):
        n, m, a, b = g["ranks"], g["bytes"], g["alpha_us"], g["link_gbs"]
        seconds = cost.ring_time_us("all_reduce", n, m, one_node(n, a, b)) / 1e6
        k = step_count("all_reduce", "ring", n, 2 * n)
        per_step = a * 1e-6 + m / n / (b * 1e9)
        steps = (
            Step("Steps", "2(N−1)", f"2 × ({n} − 1)", k, "steps"),
            Step("Latency", "2(N−1)·α", f"{k} × {a:g}×10⁻⁶", k * a * 1e-6, "s"),
            Step("Time to push one chunk", "(M/N)/β", f"{num(m)} / {n} / ({b:g} × 10⁹)",
                 m / n / (b * 1e9), "s"),
            Step("One step", "α + (M/N)/β", f"{num(a * 1e-6)} + {num(m / n / (b * 1e9))}",
                 per_step, "s"),
            Step("All-reduce", "2(N−1)·(α + M/(Nβ))", f"{k} × {num(per_step)}", seconds, "s"),
        )
        band = 2 * (n - 1) / n * m / (b * 1e9)
        return Worked(seconds, steps, (
            Mistake(band, "Add the latency: every one of the 2(N−1) steps pays α."),
            Mistake(k * a * 1e-6, "Add the bandwidth term: 2(N−1)/N · M/β."),
            Mistake(k * a * 1e-6 + band / 2, "The bandwidth term has the 2 of ring all-reduce "
                                            "too: 2(N−1)/N · M/β."),
            Mistake(k * a * 1e-6 + m / (b * 2**30) * 2 * (n - 1) / n,
                    "β is in GB/s = 10⁹ bytes/s, not GiB/s."),
        ))

    def scene(g):
        return collective_scene("all_reduce", g["ranks"], g["bytes"], g["alpha_us"],
                                g["link_gbs"])


@exercise("busbw", chapter=2, scene="collective", kind="number", unit="GB/s",
          title="nccl-tests' bus bandwidth",
          source="nccl-tests doc/PERFORMANCE.md: algbw = S/t, busbw = algbw · 2(n−1)/n "
                 "(all-reduce) or (n−1)/n",
          ranges={"op": tuple(OP_WORDS), "ranks": (2, 64), "bytes": (1e6, 7e10),
                  "time_us": (1, 1e7)})
class BusBandwidth:
    def draw(d):
        op = d.choice(tuple(OP_WORDS))
        n, size = d.choice(RING_RANKS), buffer_bytes(d)
        ideal = size / (d.choice((80.0, 150.0, 200.0, 350.0)) * 1e3)     # µs at a plausible rate
        return {"op": op, "ranks": n, "bytes": size, "time_us": float(f"{ideal:.3g}")}

    def prompt(g):
        whole = (" (S is the whole gathered or scattered array, count × n, as nccl-tests "
                 "reports it)" if g["op"] in ("all_gather", "reduce_scatter") else "")
        return (f"nccl-tests times an {OP_WORDS[g['op']]} of S = {num(g['bytes'])} bytes"
                f"{whole} on n = {g['ranks']} GPUs at {g['time_us']:g} µs. What bus "
                f"bandwidth (busbw) does it report, in GB/s?")

    def solve(g):
        op, n, size, t = g["op"], g["ranks"], g["bytes"], g["time_us"]
        algbw, busbw = cost.bandwidths(op, n, size, t)
        factor = cost.busbw_factor(op, n)
        steps = (
            Step("Algorithm bandwidth", "algbw = S/t", f"{num(size)} / ({t:g} × 10³)", algbw,
                 "GB/s"),
            Step("Bus factor", "2(n−1)/n" if op == "all_reduce" else "(n−1)/n",
                 f"2 × ({n} − 1) / {n}" if op == "all_reduce" else f"({n} − 1) / {n}", factor,
                 ""),
            Step("Bus bandwidth", "busbw = algbw × factor", f"{num(algbw)} × {num(factor)}",
                 busbw, "GB/s"),
        )
        other = 2 * (n - 1) / n if op != "all_reduce" else (n - 1) / n
        return Worked(busbw, steps, (
            Mistake(algbw, "That is algbw; busbw multiplies it by the op's factor so that it "
                           "compares with the link speed."),
            Mistake(algbw * other, "The factor depends on the op: 2(n−1)/n for all-reduce, "
                                   "(n−1)/n for all-gather, reduce-scatter and all-to-all."),
        ))

    def scene(g):
        return collective_scene(g["op"], g["ranks"], g["bytes"])


@exercise("allgather-bytes", chapter=2, scene="collective", kind="number", unit="bytes",
          title="Bytes each rank sends in a ring all-gather",
          source="nccl-tests PERFORMANCE.md: all-gather sends (n−1)/n · S per rank",
          ranges={"ranks": (2, 64), "shard_bytes": (1e5, 2e9)})
class AllGatherBytes:
    def draw(d):
        return {"ranks": d.choice(RING_RANKS), "shard_bytes": int(d.nice(1e5, 2e9, 2))}

    def prompt(g):
        return (f"N = {g['ranks']} GPUs each hold a shard of {num(g['shard_bytes'])} bytes; a "
                f"ring all-gather gives every GPU all N shards. How many bytes does each GPU "
                f"send?")

    def solve(g):
        n, s = g["ranks"], g["shard_bytes"]
        whole = n * s
        sent = sent_share("all_gather", "ring", n) * whole
        steps = (
            Step("The gathered tensor", "S = N × shard", f"{n} × {num(s)}", whole, "bytes"),
            Step("Steps", "N − 1", f"{n} − 1", n - 1, "steps"),
            Step("Bytes each rank sends: one shard a step", "(N−1)/N · S",
                 f"({n} − 1) / {n} × {num(whole)}", sent, "bytes"),
        )
        return Worked(sent, steps, (
            Mistake(whole, "A rank never sends a shard back to where it came from: N−1 "
                           "shards, not N."),
            Mistake(2 * sent, "No 2 here: an all-gather is one half of an all-reduce."),
            Mistake(float(s), "Each step forwards one shard, and there are N−1 steps."),
        ))

    def scene(g):
        return collective_scene("all_gather", g["ranks"], g["ranks"] * g["shard_bytes"])


@exercise("reduce-scatter-time", chapter=2, scene="collective", kind="number", unit="ms",
          title="α–β time of a ring reduce-scatter",
          source="Thakur et al. 2005: (N−1)·α + (N−1)/N · S/β",
          ranges={"ranks": (2, 64), "bytes": (1e6, 7e10), "alpha_us": (1, 50),
                  "link_gbs": (10, 900)})
class ReduceScatterTime:
    def draw(d):
        return {"ranks": d.choice(RING_RANKS), "bytes": buffer_bytes(d),
                "alpha_us": d.choice((2.0, 5.0, 10.0, 15.0)),
                "link_gbs": d.choice((25.0, 50.0, 100.0, 300.0, 450.0))}

    def prompt(g):
        return (f"N = {g['ranks']} GPUs reduce-scatter a tensor of S = {bytes_text(g['bytes'])} — "
                f"{num(g['bytes'], 12)} bytes — with the ring algorithm: each ends with the sum "
                f"of one 1/N chunk. Messages cost α = {g['alpha_us']:g} µs plus bytes over "
                f"β = {g['link_gbs']:g} GB/s. How long does it take, in milliseconds?")

    def solve(g):
        n, m, a, b = g["ranks"], g["bytes"], g["alpha_us"], g["link_gbs"]
        ms = cost.ring_time_us("reduce_scatter", n, m, one_node(n, a, b)) / 1e3
        per_step = a * 1e-3 + m / n / (b * 1e6)
        steps = (
            Step("Steps", "N − 1", f"{n} − 1", n - 1, "steps"),
            Step("One step: α + one chunk over β", "α + (S/N)/β",
                 f"{a:g}×10⁻³ + {num(m)} / {n} / ({b:g} × 10⁶)", per_step, "ms"),
            Step("Reduce-scatter", "(N−1)·(α + S/(Nβ))", f"({n} − 1) × {num(per_step)}", ms,
                 "ms"),
        )
        return Worked(ms, steps, (
            Mistake(2 * ms, "That is an all-reduce: a reduce-scatter is only its first half, "
                            "N−1 steps."),
            Mistake((n - 1) * m / n / (b * 1e6), "Add the latency: N−1 messages of α each."),
        ))

    def scene(g):
        return collective_scene("reduce_scatter", g["ranks"], g["bytes"], g["alpha_us"],
                                g["link_gbs"])


@exercise("alpha-beta-crossover", chapter=2, scene="collective", kind="number", unit="bytes",
          title="Where latency and bandwidth cost the same",
          source="Hockney's α–β model on the ring all-reduce: 2(N−1)α = 2(N−1)/N · M/β",
          ranges={"ranks": (2, 64), "alpha_us": (1, 50), "link_gbs": (10, 900)})
class AlphaBetaCrossover:
    def draw(d):
        return {"ranks": d.choice(RING_RANKS), "alpha_us": d.choice((2.0, 5.0, 8.0, 10.0,
                                                                    20.0)),
                "link_gbs": d.choice((25.0, 50.0, 100.0, 200.0, 300.0, 900.0))}

    def prompt(g):
        return (f"A ring all-reduce on N = {g['ranks']} GPUs pays α = {g['alpha_us']:g} µs per "
                f"message and β = {g['link_gbs']:g} GB/s per link. For which buffer size M do "
                f"its latency term and its bandwidth term cost the same time? (Below it, the "
                f"all-reduce is latency-bound.)")

    def solve(g):
        n, a, b = g["ranks"], g["alpha_us"], g["link_gbs"]
        costs = cost.schedule_costs("all_reduce", "ring", n, one_node(n, a, b))
        latency = cost.time_us(costs, a, 0.0)                      # µs at M → 0
        per_byte = cost.time_us(costs, a, 1.0) - latency           # µs per byte
        size = latency / per_byte
        steps = (
            Step("Latency term", "2(N−1)·α", f"2 × ({n} − 1) × {a:g}", latency, "µs"),
            Step("Bandwidth term per byte", "2(N−1)/N / β",
                 f"2 × ({n} − 1) / {n} / ({b:g} × 10³)", per_byte, "µs"),
            Step("Equal when", "M = 2(N−1)α / (2(N−1)/(Nβ)) = N·α·β",
                 f"{num(latency)} / {num(per_byte)}", size, "bytes"),
        )
        return Worked(size, steps, (
            Mistake(size / n, "The bandwidth term has (N−1)/N, the latency term (N−1): they "
                              "do not cancel to α·β, an N is left."),
            Mistake(size / 1e3, "α is in µs and β in GB/s: 1 GB/s moves 10³ bytes per µs."),
        ))

    def scene(g):
        return collective_scene("all_reduce", g["ranks"], 64 * 2**20, g["alpha_us"],
                                g["link_gbs"])


@exercise("all-to-all-bytes", chapter=2, scene="collective", kind="number", unit="bytes",
          title="Bytes each rank sends in an all-to-all",
          source="torch.distributed all_to_all; nccl-tests: (n−1)/n · S per rank",
          ranges=BUFFER_RANGES, draw=draw_buffer)
class AllToAllBytes:
    def prompt(g):
        return (f"In an all-to-all on N = {g['ranks']} GPUs, each GPU's buffer of "
                f"{num(g['bytes'])} bytes is cut into N equal chunks and chunk j goes to GPU j "
                f"(pairwise direct exchange). How many bytes does each GPU send to the others?")

    def solve(g):
        n, m = g["ranks"], g["bytes"]
        sent = sent_share("all_to_all", "direct", n) * m
        steps = (
            Step("One chunk", "S/N", f"{num(m)} / {n}", m / n, "bytes"),
            Step("Chunks sent to other ranks", "N − 1", f"{n} − 1", n - 1, ""),
            Step("Bytes sent", "(N−1)/N · S", f"({n} − 1) × {num(m / n)}", sent, "bytes"),
        )
        return Worked(sent, steps, (
            Mistake(float(m), "The chunk for itself stays: (N−1)/N of the buffer leaves."),
            Mistake(2 * sent, "No 2: each chunk travels once, directly to its owner."),
        ))

    def scene(g):
        return collective_scene("all_to_all", g["ranks"], g["bytes"], algorithm="direct")


@exercise("allreduce-steps", chapter=2, scene="collective", kind="integer", unit="steps",
          title="How many steps an all-reduce takes",
          source="Thakur et al. 2005: ring 2(N−1) steps; recursive halving-doubling 2·log₂N",
          ranges={"ranks": (2, 64), "algorithm": ("ring", "halving_doubling")})
class AllReduceSteps:
    def draw(d):
        algorithm = d.choice(("ring", "halving_doubling"))
        ranks = d.choice(RING_RANKS) if algorithm == "ring" else d.choice((2, 4, 8, 16, 32, 64))
        return {"ranks": ranks, "algorithm": algorithm}

    def prompt(g):
        how = ("the ring algorithm" if g["algorithm"] == "ring" else
               "Rabenseifner's recursive halving-doubling (a reduce-scatter by halving, then an "
               "all-gather by doubling)")
        return (f"An all-reduce on N = {g['ranks']} GPUs runs {how}. How many communication "
                f"steps does it take (in each step every GPU sends one message)?")

    def solve(g):
        n, alg = g["ranks"], g["algorithm"]
        k = step_count("all_reduce", alg, n, 2 * n)
        assert k == len(build("all_reduce", alg, n, 2 * n).steps)
        if alg == "ring":
            steps = (Step("Reduce-scatter", "N − 1", f"{n} − 1", n - 1, "steps"),
                     Step("All-gather", "N − 1", f"{n} − 1", n - 1, "steps"),
                     Step("All-reduce", "2(N−1)", f"2 × ({n} − 1)", k, "steps"))
            mistakes = (Mistake(n - 1, "That is one phase: the ring reduce-scatters, then "
                                       "all-gathers, N−1 steps each."),
                        Mistake(2 * n, "A rank needs N−1 steps per phase, not N: its own chunk "
                                       "is already where it belongs."))
        else:
            steps = (Step("Halving (reduce-scatter)", "log₂N", f"log2({n})", k // 2, "steps"),
                     Step("Doubling (all-gather)", "log₂N", f"log2({n})", k // 2, "steps"),
                     Step("All-reduce", "2·log₂N", f"2 × log2({n})", k, "steps"))
            mistakes = (Mistake(k // 2, "Count both the halving and the doubling phases."),
                        Mistake(2 * (n - 1), "That is the ring; halving-doubling halves the "
                                             "distance each step: log₂N steps a phase."))
        return Worked(k, steps, mistakes)

    def scene(g):
        return collective_scene("all_reduce", g["ranks"], 64 * 2**20,
                                algorithm=g["algorithm"])


