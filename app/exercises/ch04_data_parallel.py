"""Chapter 4, data parallelism: DDP's gradient all-reduce in bytes and in time across nodes,
its buckets (how many, the first one's size), the communication backward cannot hide, the
tokens of a global batch, and what FSDP sends.

Answers call the ring schedule of :mod:`app.sim.collectives` and its α–β times, DDP's bucket
assignment (:mod:`app.sim.data_parallel.buckets`, torch's ``compute_bucket_assignment_by_size``),
the lane scheduler :mod:`app.sim.timeline` the /data-parallel timeline is built with, the global
batch of :mod:`app.sim.checkpointing.simulate` and ZeRO-3's volume (:mod:`app.sim.zero.scale`,
which FSDP shares).
"""

from __future__ import annotations

from app.exercises.ch02_collectives import sent_share
from app.exercises.common import DP_SIZES, params, psi_text
from app.exercises.model import Mistake, Step, Worked, exercise
from app.exercises.units import num
from app.sim import timeline
from app.sim.checkpointing.simulate import global_batch
from app.sim.collectives.cost import BYTES_PER_ELEMENT, Links, ring_time_us
from app.sim.data_parallel import buckets as ddp_buckets
from app.sim.zero import scale as zero_scale

GRAD_DTYPES = ("fp32", "bf16")


@exercise("ddp-allreduce-bytes", chapter=4, scene="data-parallel", kind="number", unit="bytes",
          title="What DDP sends per step",
          source="Li et al. 2020 (PyTorch DDP): one ring all-reduce of the gradients a step, "
                 "2(N−1)/N of them per rank",
          ranges={"params": (1e8, 2e12), "dp": (2, 64), "dtype": GRAD_DTYPES})
class DdpAllReduceBytes:
    def draw(d):
        return {"params": params(d), "dp": d.choice((2, 4, 8, 16, 32, 64)),
                "dtype": d.choice(GRAD_DTYPES)}

    def prompt(g):
        return (f"DDP trains a model of {psi_text(g['params'])} parameters on {g['dp']} GPUs; "
                f"its gradients are {g['dtype']} and NCCL all-reduces them with the ring "
                f"algorithm. How many bytes does each GPU send per training step?")

    def solve(g):
        psi, n, e = g["params"], g["dp"], BYTES_PER_ELEMENT[g["dtype"]]
        grads = psi * e
        sent = sent_share("all_reduce", "ring", n) * grads
        steps = (
            Step("Gradient bytes", f"Ψ × {e} bytes ({g['dtype']})", f"{num(psi)} × {e}", grads,
                 "bytes"),
            Step("Ring all-reduce: each rank sends", "2(N−1)/N × gradient bytes",
                 f"2 × ({n} - 1) / {n} × {num(grads)}", sent, "bytes"),
        )
        return Worked(sent, steps, (
            Mistake(sent / 2, "The ring all-reduce is a reduce-scatter and an all-gather: "
                              "2(N−1)/N, not (N−1)/N."),
            Mistake(psi * 2 * (n - 1) / n, f"Gradients are {g['dtype']}: {e} bytes each."
                    if e != 1 else "Count bytes."),
            Mistake(2.0 * grads, "Each rank sends (N−1)/N of each phase: its own chunk stays."),
        ))

    def scene(g):
        return {"mode": "ddp", "dp": g["dp"], "dtype": g["dtype"]}


@exercise("ddp-comm-time", chapter=4, scene="data-parallel", kind="number", unit="ms",
          title="DDP's all-reduce across nodes",
          source="α–β model of the ring (Thakur et al. 2005): a ring spanning nodes runs at the "
                 "slowest link",
          ranges={"params": (1e8, 5e10), "dp": (16, 256), "gpus_per_node": (8,),
                  "intra_gbs": (150, 900), "inter_gbs": (12.5, 50), "alpha_us": (5, 20)})
class DdpCommTime:
    def draw(d):
        return {"params": int(d.nice(1e8, 5e10, 2)), "dp": d.choice((16, 32, 64, 128, 256)),
                "gpus_per_node": 8, "intra_gbs": d.choice((150.0, 300.0, 450.0, 900.0)),
                "inter_gbs": d.choice((12.5, 25.0, 50.0)), "alpha_us": d.choice((5.0, 10.0,
                                                                                 20.0))}

    def prompt(g):
        return (f"DDP all-reduces the bf16 gradients of a model of {psi_text(g['params'])} "
                f"parameters over dp = {g['dp']} GPUs on nodes of {g['gpus_per_node']} (ranks "
                f"fill nodes in order) with one ring. Inside a node the links run at "
                f"{g['intra_gbs']:g} GB/s, between nodes at {g['inter_gbs']:g} GB/s; every "
                f"message costs α = {g['alpha_us']:g} µs. How long does the all-reduce take, in "
                f"milliseconds?")

    def solve(g):
        n, size = g["dp"], g["params"] * 2
        links = Links(g["alpha_us"], g["intra_gbs"], g["inter_gbs"], g["gpus_per_node"])
        ms = ring_time_us("all_reduce", n, size, links) / 1e3
        slow = min(g["intra_gbs"], g["inter_gbs"])
        per_step = g["alpha_us"] / 1e3 + size / n / (slow * 1e6)
        steps = (
            Step("Gradient bytes", "2Ψ (bf16)", f"2 × {num(g['params'])}", size, "bytes"),
            Step("The ring's slowest link", "the ring leaves its node: between-node bandwidth",
                 f"min({g['intra_gbs']:g}, {g['inter_gbs']:g})", slow, "GB/s"),
            Step("One step", "α + (M/N)/β_slowest",
                 f"{g['alpha_us']:g} / 1000 + {num(size)} / {n} / ({slow:g} × 10⁶)", per_step,
                 "ms"),
            Step("All-reduce", "2(N−1) steps", f"2 × ({n} - 1) × {num(per_step)}", ms, "ms"),
        )
        fast = ring_time_us("all_reduce", n, size, Links(g["alpha_us"], g["intra_gbs"],
                                                         g["intra_gbs"], n)) / 1e3
        return Worked(ms, steps, (
            Mistake(fast, "Every step waits for its slowest hop: once the ring crosses nodes, "
                          "that is the InfiniBand link, not NVLink."),
            Mistake(ms / 2, "Bytes are bf16: 2 per parameter; and the ring takes 2(N−1) steps."),
        ))

    def scene(g):
        return {"mode": "ddp", "dp": g["dp"], "dtype": "bf16", "alpha_us": g["alpha_us"],
                "intra_node_gbs": g["intra_gbs"], "inter_node_gbs": g["inter_gbs"],
                "gpus_per_node": g["gpus_per_node"]}


def _tensors(d) -> tuple[list[int], list[str]]:
    """A small stack of Linear layers (weight, bias each), in model.parameters() order."""
    widths = [d.choice((256, 512, 1024, 2048)) for _ in range(d.integer(3, 5) + 1)]
    sizes, names = [], []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        sizes += [a * b, b]
        names += [f"fc{i}.weight", f"fc{i}.bias"]
    return sizes, names


@exercise("ddp-bucket-count", chapter=4, scene="data-parallel", kind="integer", unit="buckets",
          title="How many buckets DDP makes",
          source="torch reducer.cpp compute_bucket_assignment_by_size: tensors in gradient-ready "
                 "order, a bucket closes once it reaches the cap",
          ranges={"bucket_mb": (0.5, 16), "dtype": ("fp32",)})
class DdpBucketCount:
    def draw(d):
        while True:
            sizes, names = _tensors(d)
            g = {"sizes": sizes, "names": names, "bucket_mb": d.choice((0.5, 1.0, 2.0, 4.0)),
                 "dtype": "fp32"}
            if DdpBucketCount.solve(g).answer >= 2:
                return g

    def _listing(g) -> str:
        return "; ".join(f"{n} {s:,}" for n, s in zip(g["names"], g["sizes"]))

    def prompt(g):
        return (f"A model's parameters, in model.parameters() order, with their element "
                f"counts: {DdpBucketCount._listing(g)}. DDP(model, bucket_cap_mb="
                f"{g['bucket_mb']:g}) keeps fp32 gradients (4 bytes) and, from the second "
                f"iteration on, fills buckets in gradient-ready order — the last layer first, "
                f"each Linear's bias before its weight — closing a bucket as soon as it holds at "
                f"least {g['bucket_mb']:g} MiB (2²⁰ bytes); a tensor is never split. How many "
                f"buckets are there?")

    def solve(g):
        e = BYTES_PER_ELEMENT[g["dtype"]]
        found = ddp_buckets.buckets(tuple(g["sizes"]), e, g["bucket_mb"],
                                    names=tuple(g["names"]))
        cap = ddp_buckets.cap_bytes(g["bucket_mb"])
        steps = (Step("Cap", "bucket_cap_mb × 2²⁰", f"{g['bucket_mb']:g} × 2^20", cap, "bytes"),)
        for b in found:
            members = " + ".join(g["names"][t] for t in b.tensors)
            steps += (Step(f"Bucket {b.index}: {members}", "elements × 4 bytes",
                           " + ".join(f"{g['sizes'][t]} × {e}" for t in b.tensors), b.bytes,
                           "bytes"),)
        steps += (Step("Buckets", "count", str(len(found)), len(found), "buckets"),)
        total = sum(g["sizes"]) * e
        return Worked(len(found), steps, (
            Mistake(-(-total // cap), "A bucket is closed only once it reaches the cap and "
                                      "never splits a tensor: walk through the tensors in "
                                      "ready order."),
        ))

    def scene(g):
        return {"mode": "ddp", "bucket_mb": g["bucket_mb"], "explicit_cap": True}


@exercise("ddp-exposed-comm", chapter=4, scene="data-parallel", kind="number", unit="ms",
          title="Communication DDP cannot hide",
          source="Li et al. 2020 (PyTorch DDP) §3.2: bucketed all-reduce overlapped with "
                 "backward",
          ranges={"backward_ms": (10, 400), "buckets": (2, 12), "allreduce_ms": (1, 100)})
class DdpExposedComm:
    def draw(d):
        while True:
            g = {"backward_ms": float(d.choice((20, 30, 40, 60, 80, 120, 200, 300))),
                 "buckets": d.integer(2, 10), "allreduce_ms": d.nice(1.0, 60.0, 2)}
            if DdpExposedComm._exposed(g) > 0.05 * g["allreduce_ms"]:
                return g

    def _run(g):
        k, chunk = g["buckets"], g["backward_ms"] / g["buckets"]
        tasks = []
        for i in range(k):
            tasks.append(timeline.Task(f"backward {i}", "compute", chunk * 1e3,
                                       (f"backward {i - 1}",) if i else (), "backward"))
            tasks.append(timeline.Task(f"bucket {i}", "comm", g["allreduce_ms"] * 1e3,
                                       (f"backward {i}",), "all_reduce"))
        return timeline.schedule(tasks)

    def _exposed(g) -> float:
        spans = DdpExposedComm._run(g)
        return timeline.exposed_us(spans, "comm", "compute") / 1e3

    def prompt(g):
        return (f"DDP's backward takes {g['backward_ms']:g} ms and fills {g['buckets']} "
                f"buckets of equal size, one after each {g['backward_ms'] / g['buckets']:g} ms "
                f"of it; each bucket's all-reduce takes {g['allreduce_ms']:g} ms and starts as "
                f"soon as its bucket is full and the previous all-reduce is done (one NCCL "
                f"stream). How many milliseconds of communication are left after the backward "
                f"ends (exposed)?")

    def solve(g):
        spans = DdpExposedComm._run(g)
        exposed = timeline.exposed_us(spans, "comm", "compute") / 1e3
        end = timeline.makespan(spans) / 1e3
        k, chunk, c = g["buckets"], g["backward_ms"] / g["buckets"], g["allreduce_ms"]
        steps = (
            Step("Bucket i is ready at", "(i + 1) · T_b/k", f"{num(g['backward_ms'])} / {k}",
                 chunk, "ms"),
            Step("All-reduces end", "each starts at max(ready, previous end); ends c later",
                 f"max({' , '.join(f'{num((i + 1) * chunk)} + {k - i} × {num(c)}' for i in range(k))})",
                 end, "ms"),
            Step("Exposed", "last end − backward end", f"{num(end)} - {num(g['backward_ms'])}",
                 exposed, "ms"),
        )
        return Worked(exposed, steps, (
            Mistake(k * c, "Most all-reduces run while backward goes on: only what is left "
                           "after backward ends is exposed."),
            Mistake(c, "The all-reduces queue on one stream: when they take longer than a "
                       "chunk of backward, they pile up."),
        ))

    def scene(g):
        return {"mode": "ddp"}


@exercise("dp-global-batch-tokens", chapter=4, scene="checkpointing", kind="integer",
          unit="tokens", title="Tokens in a global batch",
          source="global batch = micro-batch × gradient-accumulation steps × dp (Megatron-LM, "
                 "DeepSpeed)",
          ranges={"micro_batch": (1, 16), "grad_accum": (1, 64), "dp": (2, 1024),
                  "seq": (1024, 8192)})
class GlobalBatchTokens:
    def draw(d):
        return {"micro_batch": d.choice((1, 2, 4, 8, 16)), "grad_accum": d.choice((1, 2, 4, 8,
                                                                                  16, 32)),
                "dp": d.choice(DP_SIZES + (3, 6, 12, 24, 48, 96, 192)),
                "seq": d.choice((1024, 2048, 4096, 8192))}

    def prompt(g):
        return (f"Each of dp = {g['dp']} data-parallel replicas runs {g['grad_accum']} "
                f"micro-batches of {g['micro_batch']} sequences of {g['seq']} tokens before one "
                f"optimizer step (gradient accumulation). How many tokens does one optimizer "
                f"step see?")

    def solve(g):
        seqs = global_batch(g["micro_batch"], g["grad_accum"], g["dp"])
        steps = (
            Step("Global batch, in sequences", "micro-batch × accumulation × dp",
                 f"{g['micro_batch']} × {g['grad_accum']} × {g['dp']}", seqs, "sequences"),
            Step("Tokens", "sequences × s", f"{seqs} × {g['seq']}", seqs * g["seq"], "tokens"),
        )
        return Worked(seqs * g["seq"], steps, (
            Mistake(g["micro_batch"] * g["dp"] * g["seq"], "Gradient accumulation adds "
                                                           "micro-batches to the same step."),
            Mistake(g["micro_batch"] * g["grad_accum"] * g["seq"], "Every data-parallel "
                                                                   "replica sees its own data."),
            Mistake(seqs, "That is sequences; multiply by the sequence length for tokens."),
        ))

    def scene(g):
        return {"micro_batch": g["micro_batch"], "grad_accum": g["grad_accum"], "dp": g["dp"]}


@exercise("fsdp-comm-bytes", chapter=4, scene="data-parallel", kind="number", unit="bytes",
          title="What FSDP sends per step",
          source="Zhao et al. 2023 (PyTorch FSDP); Rajbhandari et al. 2019 §7: all-gather "
                 "forward and backward, reduce-scatter: 3Ψ",
          ranges={"params": (1e8, 2e12), "dp": (2, 1024), "dtype": GRAD_DTYPES})
class FsdpCommBytes:
    def draw(d):
        return {"params": params(d), "dp": d.choice(DP_SIZES), "dtype": d.choice(GRAD_DTYPES)}

    def prompt(g):
        return (f"FSDP (full sharding) trains a model of {psi_text(g['params'])} parameters "
                f"on {g['dp']} GPUs with {g['dtype']} parameters and gradients. Each unit's "
                f"parameters are all-gathered before its forward and again before its backward "
                f"(freed in between), and its gradients reduce-scattered. How many bytes does "
                f"each GPU send per step?")

    def solve(g):
        psi, n, e = g["params"], g["dp"], BYTES_PER_ELEMENT[g["dtype"]]
        elements = zero_scale.comm_elements(psi, n, 3)
        steps = (
            Step("Collectives of the whole model", "all-gather, all-gather, reduce-scatter",
                 "3", 3, ""),
            Step("Elements each rank sends", "3·(N−1)·⌈Ψ/N⌉", f"3 × ({n} - 1) × ⌈{num(psi)} / {n}⌉",
                 elements, "elements"),
            Step("Bytes", f"elements × {e}", f"{num(elements)} × {e}", elements * e, "bytes"),
        )
        return Worked(elements * e, steps, (
            Mistake(elements * e * 2 / 3, "FSDP frees the gathered parameters after forward and "
                                          "gathers them again for backward: three collectives, "
                                          "not two."),
            Mistake(3.0 * psi * e, "Each ring collective sends (N−1)/N of the tensor per rank."),
        ))

    def scene(g):
        return {"mode": "fsdp", "dp": min(g["dp"], 64), "dtype": g["dtype"]}

