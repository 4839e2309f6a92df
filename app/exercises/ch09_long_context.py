"""Chapter 9, long context: what ring attention and Ulysses send per rank, how lopsided causal
attention is on contiguous blocks, which tokens zigzag gives a rank and how many scores each
computes then, attention's s² memory, and the block size from which ring attention hides its
transfers.

Answers call :mod:`app.sim.context_parallel` — ``volumes.elements_sent`` (DESIGN.md's
formulas, checked there against the simulated transfers), ``layout.tokens_table``,
``cost.gather_pairs`` and ``cost.overlap`` — and :mod:`app.sim.memory.activations`: what
/context-parallel computes (Liu et al. 2023; Jacobs et al. 2023; Megatron-LM context parallel).
"""

from __future__ import annotations

from app.exercises.model import Mistake, Step, Worked, exercise
from app.exercises.units import num
from app.sim.context_parallel import cost as cp_cost
from app.sim.context_parallel.layout import tokens_table
from app.sim.context_parallel.volumes import elements_sent
from app.sim.memory import activations
from app.catalog.models import ModelShape

CP = (2, 4, 8, 16, 32)
SEQS = (8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)
GQA = ((32, 8, 128), (64, 8, 128), (128, 8, 128), (32, 32, 128), (16, 16, 64), (40, 8, 128))
"""(heads, kv_heads, head_dim) of Llama-3 8B / 70B / 405B-like and multi-head attention."""


def _scene(g, method: str = "ring", balance: str = "none", causal: bool = True) -> dict:
    cp = g["cp"]
    seq = max(16, 2 * cp)
    out = {"method": method, "cp": cp, "seq": seq, "causal": causal, "balance": balance,
           "context": g.get("seq")}
    if method == "ulysses":
        out.update(heads=cp, kv_heads=cp)
    return out


@exercise("cp-ring-bytes", chapter=9, scene="context-parallel", kind="number", unit="bytes",
          title="What ring attention sends per rank",
          source="Liu et al. 2023 (Ring Attention); DESIGN.md: (cp−1)·2·(seq/cp)·kv_heads·"
                 "head_dim elements per rank and layer",
          ranges={"cp": (2, 32), "seq": (8192, 1048576), "kv_heads": (1, 128),
                  "head_dim": (64, 128), "bytes_per_element": (1, 2, 4)},
          query=_scene)
class CpRingBytes:
    def draw(d):
        heads, kv, dim = d.choice(GQA)
        return {"cp": d.choice(CP), "seq": d.choice(SEQS), "kv_heads": kv, "head_dim": dim,
                "bytes_per_element": d.choice((2, 2, 1, 4))}

    def prompt(g):
        return (f"Ring attention splits one sequence of {g['seq']} tokens over cp = {g['cp']} "
                f"GPUs. Each step every GPU passes the K and V blocks it holds to the next GPU; "
                f"there are {g['kv_heads']} key/value heads of dimension {g['head_dim']}, "
                f"{g['bytes_per_element']} byte{'s' if g['bytes_per_element'] > 1 else ''} per "
                f"element. How many bytes does each GPU send in one attention layer's forward "
                f"pass?")

    def solve(g):
        cp, s, kv, dim, e = (g["cp"], g["seq"], g["kv_heads"], g["head_dim"],
                             g["bytes_per_element"])
        elements = elements_sent("ring", cp, s, kv, kv, dim)
        block = s // cp
        steps = (
            Step("Tokens per rank", "seq/cp", f"{s} / {cp}", block, "tokens"),
            Step("One K block (V is as large)", "(seq/cp)·kv_heads·head_dim",
                 f"{block} × {kv} × {dim}", block * kv * dim, "elements"),
            Step("Elements sent: K and V, cp − 1 times", "(cp−1)·2·(seq/cp)·kv_heads·head_dim",
                 f"({cp} - 1) × 2 × {num(block * kv * dim)}", elements, "elements"),
            Step("Bytes", "elements × bytes per element", f"{num(elements)} × {e}",
                 elements * e, "bytes"),
        )
        return Worked(elements * e, steps, (
            Mistake(elements * e / 2, "Both K and V travel round the ring: 2 blocks a step."),
            Mistake(elements * e * cp / (cp - 1), "A block passes cp − 1 times: the last hop "
                                                  "would bring it home."),
            Mistake(float(elements), "Multiply by the bytes per element."),
        ))


@exercise("ulysses-bytes", chapter=9, scene="context-parallel", kind="number", unit="bytes",
          title="What DeepSpeed-Ulysses sends per rank",
          source="Jacobs et al. 2023 (DeepSpeed-Ulysses) §3.3; DESIGN.md: (cp−1)/cp · (seq/cp)"
                 " · head_dim · (2·heads + 2·kv_heads)",
          ranges={"cp": (2, 8), "seq": (8192, 1048576), "heads": (16, 128),
                  "kv_heads": (8, 128), "head_dim": (64, 128), "bytes_per_element": (2,)})
class UlyssesBytes:
    def draw(d):
        heads, kv, dim = d.choice(GQA)
        return {"cp": d.choice(tuple(c for c in (2, 4, 8) if kv % c == 0)), "seq": d.choice(SEQS),
                "heads": heads, "kv_heads": kv, "head_dim": dim, "bytes_per_element": 2}

    def prompt(g):
        return (f"DeepSpeed-Ulysses spreads a sequence of {g['seq']} tokens over cp = "
                f"{g['cp']} GPUs and, around attention, all-to-alls Q, K, V (sequence → heads) "
                f"and the output back (heads → sequence). The model has {g['heads']} query "
                f"heads and {g['kv_heads']} key/value heads of dimension {g['head_dim']}, "
                f"16-bit. How many bytes does each GPU send in one layer's forward pass?")

    def solve(g):
        cp, s, h, kv, dim, e = (g["cp"], g["seq"], g["heads"], g["kv_heads"], g["head_dim"],
                                g["bytes_per_element"])
        elements = elements_sent("ulysses", cp, s, h, kv, dim)
        n = s // cp
        steps = (
            Step("Tokens per rank", "seq/cp", f"{s} / {cp}", n, "tokens"),
            Step("Q, K, V and the output a rank holds", "(seq/cp)·d·(2H + 2H_kv)",
                 f"{n} × {dim} × (2 × {h} + 2 × {kv})", n * dim * (2 * h + 2 * kv), "elements"),
            Step("The share that leaves the rank", "× (cp−1)/cp",
                 f"{num(n * dim * (2 * h + 2 * kv))} × ({cp} - 1) / {cp}", elements, "elements"),
            Step("Bytes", "× 2", f"{num(elements)} × {e}", elements * e, "bytes"),
        )
        return Worked(elements * e, steps, (
            Mistake(elements * e * cp / (cp - 1), "Each all-to-all keeps 1/cp on the rank: "
                                                  "(cp−1)/cp of it is sent."),
            Mistake(n * dim * 4 * h * e * (cp - 1) / cp if kv != h else -1.0,
                    "K and V have only kv_heads heads (grouped-query attention)."),
            Mistake(n * dim * (h + 2 * kv) * e * (cp - 1) / cp, "Four all-to-alls: Q, K and V "
                                                                "before attention and the "
                                                                "output after it."),
        ))

    def scene(g):
        return _scene(g, "ulysses")


@exercise("causal-imbalance", chapter=9, scene="context-parallel", kind="number", unit="ratio",
          title="How lopsided causal attention is on contiguous blocks",
          source="Megatron-LM context parallel (load balancing); Liu et al. 2023",
          ranges={"cp": (2, 32), "seq": (8192, 1048576)},
          query=_scene)
class CausalImbalance:
    def draw(d):
        return {"cp": d.choice(CP), "seq": d.choice(SEQS)}

    def prompt(g):
        return (f"A causal sequence of {g['seq']} tokens is cut into cp = {g['cp']} contiguous "
                f"blocks, one per GPU; query i attends to keys 0 … i. How many times as many "
                f"(query, key) scores does the last GPU compute as the first?")

    def solve(g):
        cp, s = g["cp"], g["seq"]
        work = cp_cost.gather_pairs(s, cp, "none", True)[0]
        n = s // cp
        steps = (
            Step("First rank: its queries see only its own block", "n(n + 1)/2",
                 f"{n} × ({n} + 1) / 2", int(work[0]), "scores"),
            Step("Last rank: every earlier block and its own", "n(2(cp−1)n + n + 1)/2",
                 f"{n} × (2 × ({cp} - 1) × {n} + {n} + 1) / 2", int(work[-1]), "scores"),
            Step("Ratio", "last / first", f"{int(work[-1])} / {int(work[0])}",
                 float(work[-1] / work[0]), "ratio"),
        )
        return Worked(float(work[-1] / work[0]), steps, (
            Mistake(float(cp), "The last rank's own block is a triangle too: 2cp − 1 half-"
                               "blocks against 1, not cp."),
            Mistake(1.0, "With a causal mask later queries see more keys: contiguous blocks are "
                         "not balanced (that is what zigzag fixes)."),
        ))


@exercise("zigzag-chunks", chapter=9, scene="context-parallel", kind="coords",
          title="Which tokens zigzag gives a rank",
          source="Megatron-LM get_batch_on_this_cp_rank: 2·cp chunks, rank r holds r and "
                 "2cp−1−r",
          ranges={"cp": (2, 32), "seq": (8192, 1048576), "rank": (0, 31)},
          keys=("first", "second"))
class ZigzagChunks:
    def draw(d):
        cp = d.choice(CP)
        return {"cp": cp, "seq": d.choice(SEQS[:4]), "rank": d.integer(0, cp - 1)}

    def prompt(g):
        return (f"Megatron-LM balances causal context parallelism by cutting a sequence of "
                f"{g['seq']} tokens into 2·cp equal chunks for cp = {g['cp']}; rank r takes "
                f"chunks r and 2·cp − 1 − r. At which token positions (from 0) do the two "
                f"chunks of rank {g['rank']} start?")

    def solve(g):
        cp, s, r = g["cp"], g["seq"], g["rank"]
        held = tokens_table(s, cp, "zigzag")[r]
        c = s // (2 * cp)
        first, second = int(held[0]), int(held[c])
        steps = (
            Step("Chunk length", "seq / (2cp)", f"{s} / (2 × {cp})", c, "tokens"),
            Step("First chunk r starts at", "r · chunk", f"{r} × {c}", first, ""),
            Step("Second chunk 2cp − 1 − r starts at", "(2cp − 1 − r) · chunk",
                 f"(2 × {cp} - 1 - {r}) × {c}", second, ""),
        )
        return Worked({"first": first, "second": second}, steps, (
            Mistake({"first": r * s // cp, "second": (cp - 1 - r) * s // cp},
                    "There are 2·cp chunks, each seq/(2cp) long."),
            Mistake({"first": first, "second": (2 * cp - r) * c}, "The second chunk is number "
                                                                  "2cp − 1 − r, counted from 0."),
        ))

    def scene(g):
        return _scene(g, balance="zigzag")


@exercise("zigzag-scores", chapter=9, scene="context-parallel", kind="number", unit="scores",
          title="Scores per rank with zigzag",
          source="Megatron-LM context parallel: zigzag gives every rank s(s+1)/(2cp) causal "
                 "pairs per head",
          ranges={"cp": (2, 32), "seq": (8192, 131072), "heads": (16, 128)})
class ZigzagScores:
    def draw(d):
        heads, _, _ = d.choice(GQA)
        return {"cp": d.choice(CP), "seq": d.choice(SEQS[:5]), "heads": heads}

    def prompt(g):
        return (f"With zigzag load balancing, a causal sequence of {g['seq']} tokens is spread "
                f"over cp = {g['cp']} GPUs (rank r holds chunks r and 2cp − 1 − r of 2cp). "
                f"How many unmasked (query, key) scores does each GPU compute for one attention "
                f"layer with {g['heads']} query heads?")

    def solve(g):
        cp, s, h = g["cp"], g["seq"], g["heads"]
        work = cp_cost.gather_pairs(s, cp, "zigzag", True)[0]
        assert work.min() == work.max()
        per_rank = int(work[0]) * h
        steps = (
            Step("Causal pairs in the whole sequence", "s(s + 1)/2", f"{s} × ({s} + 1) / 2",
                 s * (s + 1) // 2, "scores"),
            Step("Per rank, per head (zigzag balances them)", "s(s + 1)/(2cp)",
                 f"{s} × ({s} + 1) / (2 × {cp})", int(work[0]), "scores"),
            Step("All query heads", "× heads", f"{int(work[0])} × {h}", per_rank, "scores"),
        )
        return Worked(per_rank, steps, (
            Mistake(s * s * h / cp, "The causal mask skips the keys after each query: s(s+1)/2 "
                                    "pairs, not s²."),
            Mistake(int(work[0]), "Every query head computes its own scores: × heads."),
        ))

    def scene(g):
        return _scene(g, balance="zigzag")


@exercise("attention-scores-memory", chapter=9, scene="context-parallel", kind="number",
          unit="bytes", title="The s² of attention",
          source="Korthikanti et al. 2022, Table 2: the softmax output keeps 2as²b bytes per "
                 "layer",
          ranges={"seq": (2048, 131072), "heads": (16, 128), "micro_batch": (1, 4)})
class AttentionScoresMemory:
    def draw(d):
        heads, _, dim = d.choice(GQA)
        return {"seq": d.choice((2048, 4096, 8192, 16384, 32768, 131072)), "heads": heads,
                "head_dim": dim, "micro_batch": d.choice((1, 2, 4))}

    def prompt(g):
        return (f"Attention computed naively (no FlashAttention) stores its softmax output, one "
                f"16-bit score per (query, key) pair and head, for the backward pass. How many "
                f"bytes is that for one layer with {g['heads']} heads, micro-batch "
                f"{g['micro_batch']}, and sequences of {g['seq']} tokens?")

    def solve(g):
        s, a, b = g["seq"], g["heads"], g["micro_batch"]
        shape = activations.LayerShape(s, b, a * g["head_dim"], a)
        softmax = next(t for t in activations.terms(shape) if t.name == "softmax output")
        steps = (
            Step("Scores", "a·s²·b", f"{a} × {s}^2 × {b}", a * s * s * b, "scores"),
            Step("Bytes", "2as²b", f"2 × {num(a * s * s * b)}", softmax.bytes, "bytes"),
        )
        return Worked(softmax.bytes, steps, (
            Mistake(softmax.bytes * 2, "16-bit: 2 bytes a score."),
            Mistake(softmax.bytes / a, "Every head has its own s × s scores."),
        ))

    def scene(g):
        return {"method": "ring", "cp": 2, "seq": 16, "context": g["seq"],
                "micro_batch": g["micro_batch"]}


@exercise("ring-overlap-block", chapter=9, scene="context-parallel", kind="number",
          unit="tokens", title="When ring attention hides its transfers",
          source="Liu et al. 2023 (Ring Attention) §3.1: compute hides the transfer when the "
                 "block c ≥ (H_kv/H) · F/B",
          ranges={"heads": (16, 128), "kv_heads": (8, 128), "peak_tflops": (312, 1979),
                  "link_gbs": (25, 450)})
class RingOverlapBlock:
    def draw(d):
        heads, kv, dim = d.choice(GQA)
        return {"heads": heads, "kv_heads": kv, "head_dim": dim,
                "peak_tflops": float(d.choice((312, 989, 1979))),
                "link_gbs": float(d.choice((25, 50, 100, 450)))}

    def prompt(g):
        return (f"In ring attention a step computes 4·c²·H·d FLOPs on a block of c tokens "
                f"(H = {g['heads']} query heads, d = {g['head_dim']}) while it sends the next "
                f"K and V blocks, 2·c·H_kv·d 16-bit numbers (H_kv = {g['kv_heads']}). The GPU "
                f"computes at F = {g['peak_tflops']:g} TFLOP/s; the link moves "
                f"B = {g['link_gbs']:g} GB/s. Ignoring latency, from how many tokens per block c "
                f"does the compute hide the transfer?")

    def solve(g):
        model = ModelShape("exercise", "llama", 1, g["heads"] * g["head_dim"], g["heads"],
                           g["kv_heads"], 4 * g["heads"] * g["head_dim"], 1, 8192)
        sc = cp_cost.Scale(model, 131072, 1, "none", False, g["peak_tflops"], 0.0,
                           g["link_gbs"], g["link_gbs"], 8)
        c = cp_cost.overlap(sc, "ring", 8, 1).links[0].crossover_tokens
        ratio = g["peak_tflops"] * 1e12 / (g["link_gbs"] * 1e9)
        steps = (
            Step("F/B: FLOPs per byte the link delivers", "F / B",
                 f"{g['peak_tflops']:g}×10¹² / ({g['link_gbs']:g} × 10⁹)", ratio, ""),
            Step("Compute ≥ transfer", "4c²Hd/F ≥ 4c·H_kv·d/B ⇔ c ≥ (H_kv/H)·F/B",
                 f"{g['kv_heads']} / {g['heads']} × {num(ratio)}", c, "tokens"),
        )
        return Worked(c, steps, (
            Mistake(ratio, "Grouped-query attention sends only H_kv heads of K and V: scale F/B "
                           "by H_kv/H." if g["kv_heads"] != g["heads"] else "Recheck the units."),
            Mistake(c * 2, "Each number is 2 bytes and K and V are two tensors: both sides "
                           "carry a 4 — they cancel."),
        ))

    def scene(g):
        return {"method": "ring", "cp": 8, "seq": 16, "gpu_tflops": g["peak_tflops"],
                "intra_node_gbs": g["link_gbs"]}
