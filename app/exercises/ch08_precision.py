"""Chapter 8, mixed precision and memory tricks: activation memory per layer (Korthikanti's
closed forms), the loss scale FP16 can take, where a gradient lands in FP16, a format's largest
value and its spacing, GradScaler's dynamics, FP8's per-tensor scale, selective recompute's
cost, the peak of checkpointed segments, and the global batch of gradient accumulation.

Answers call :mod:`app.sim.memory.activations` (Korthikanti et al. 2022, Table 2),
:mod:`app.sim.precision.number_formats` and ``.loss_scaling`` (IEEE 754; Micikevicius et al.
2018 and 2022; torch.amp.GradScaler), :mod:`app.sim.flops` and
:mod:`app.sim.checkpointing.simulate` — the code /precision and /checkpointing draw.
"""

from __future__ import annotations

import math

from app.exercises.common import plural
from app.exercises.model import Mistake, Step, Worked, exercise
from app.exercises.units import num
from app.sim import flops
from app.sim.checkpointing.simulate import LayerBytes, full_peak, global_batch, segments
from app.sim.memory import activations
from app.catalog.models import ModelShape
from app.sim.precision.loss_scaling import per_tensor_scale, update_scale
from app.sim.precision.number_formats import FORMATS, encode, overflows

SHAPES = ((2048, 16), (4096, 32), (5120, 40), (8192, 64), (12288, 96))


@exercise("activation-memory", chapter=8, scene="checkpointing", kind="number", unit="bytes",
          title="Activation memory of one layer (Korthikanti et al.)",
          source="Korthikanti et al. 2022, Table 2: sbh(10 + 24/t + 5as/(ht)); with SP "
                 "sbh(34/t + 5as/(ht))",
          ranges={"seq": (512, 8192), "micro_batch": (1, 8), "hidden": (2048, 12288),
                  "heads": (16, 96), "tp": (1, 8), "sequence_parallel": (False, True)})
class ActivationMemory:
    def draw(d):
        hidden, heads = d.choice(SHAPES)
        tp = d.choice((1, 2, 4, 8))
        return {"seq": d.choice((512, 1024, 2048, 4096, 8192)),
                "micro_batch": d.choice((1, 2, 4, 8)), "hidden": hidden, "heads": heads,
                "tp": tp, "sequence_parallel": bool(d.integer(0, 1)) if tp > 1 else False}

    def prompt(g):
        sp = " with sequence parallelism" if g["sequence_parallel"] else ""
        return (f"A GPT layer with h = {g['hidden']}, a = {g['heads']} heads runs a micro-batch "
                f"of b = {plural(g['micro_batch'], 'sequence')} of s = {g['seq']} tokens, "
                f"tensor-parallel "
                f"over t = {g['tp']}{sp}, no recomputation, 16-bit activations and 1-byte "
                f"dropout masks. How many bytes of activations does the layer keep for backward "
                f"on one GPU?")

    def solve(g):
        s, b, h, a, t, sp = (g["seq"], g["micro_batch"], g["hidden"], g["heads"], g["tp"],
                             g["sequence_parallel"])
        kept = activations.per_layer_bytes(activations.LayerShape(s, b, h, a), t, sp)
        sbh, scores = s * b * h, 5 * a * s / (h * t)
        if sp:
            inner = ("34/t + 5as/(ht)", f"34 / {t} + 5 × {a} × {s} / ({h} × {t})", 34 / t + scores)
        else:
            inner = ("10 + 24/t + 5as/(ht)", f"10 + 24 / {t} + 5 × {a} × {s} / ({h} × {t})",
                     10 + 24 / t + scores)
        steps = (
            Step("sbh", "s·b·h", f"{s} × {b} × {h}", sbh, "elements"),
            Step("Bytes per sbh", inner[0], inner[1], inner[2], ""),
            Step("Activations per layer", "sbh × (" + inner[0] + ")",
                 f"{num(sbh)} × {num(inner[2])}", kept, "bytes"),
        )
        mistakes = [Mistake(sbh * (34 + 5 * a * s / h), "Tensor parallelism splits most "
                                                        "activations t ways: only 10sbh "
                                                        "(LayerNorms, dropouts, inputs) stay "
                                                        "whole." if t > 1 else "Recheck.")]
        mistakes.append(Mistake(sbh * (10 + 24 / t), "Add the attention scores: 5as/(ht) — "
                                                     "softmax output, dropout mask and output, "
                                                     "quadratic in s."))
        if sp:
            mistakes.append(Mistake(sbh * (10 + 24 / t + scores), "Sequence parallelism also "
                                                                  "splits the 10sbh over t."))
        return Worked(kept, steps, tuple(mistakes))

    def scene(g):
        return {"preset": "gpt3-175b", "hidden": g["hidden"], "heads": g["heads"],
                "seq": g["seq"], "micro_batch": g["micro_batch"], "tp": g["tp"],
                "sequence_parallel": g["sequence_parallel"]}


@exercise("fp16-max-loss-scale", chapter=8, scene="precision", kind="integer", unit="",
          title="The largest loss scale FP16 can take",
          source="Micikevicius et al. 2018 §3.2; IEEE 754 binary16: largest finite 65504",
          ranges={"max_grad": (1e-4, 10)})
class Fp16MaxLossScale:
    def draw(d):
        return {"max_grad": d.nice(1e-4, 10.0, 2)}

    def prompt(g):
        return (f"The largest gradient magnitude of a step is {g['max_grad']:g}. Loss scaling "
                f"multiplies every gradient by a power of two S before it is stored in FP16 "
                f"(round to nearest). What is the largest S = 2^k for which no gradient "
                f"overflows to infinity?")

    def solve(g):
        fp16 = FORMATS["fp16"]
        k = math.floor(math.log2(fp16.max / g["max_grad"])) + 1
        while overflows(g["max_grad"] * 2.0 ** k, fp16):
            k -= 1
        steps = (
            Step("FP16's largest finite value", "(2 − 2⁻¹⁰) · 2¹⁵", "(2 - 2^-10) × 2^15",
                 fp16.max, ""),
            Step("Headroom", "65504 / max|g|", f"65504 / {num(g['max_grad'])}",
                 fp16.max / g["max_grad"], ""),
            Step("Largest power of two that fits", "2^⌊log₂(headroom)⌋ (values up to 65519 "
                 "still round to 65504)", f"2^{k}", 2 ** k, ""),
        )
        return Worked(2 ** k, steps, (
            Mistake(2 ** (k + 1), "That one overflows: max|g| × S must stay below 65520, or "
                                  "FP16 rounds it to infinity."),
            Mistake(2 ** 16, "2¹⁶ is GradScaler's starting scale, not the largest that fits "
                             "this gradient."),
        ))

    def scene(g):
        return {"value": g["max_grad"], "format": "fp16"}


@exercise("fp16-flush", chapter=8, scene="precision", kind="choice",
          title="Where a gradient lands in FP16",
          source="IEEE 754 binary16: smallest normal 2⁻¹⁴ ≈ 6.1e-5, smallest subnormal "
                 "2⁻²⁴ ≈ 6.0e-8, largest 65504",
          ranges={"value": (1e-10, 1e6)})
class Fp16Flush:
    def draw(d):
        while True:
            value = d.nice(1e-10, 1e6, 2)
            if not any(0.8 < value / edge < 1.25 for edge in (2**-25, 2**-14, 65504)):
                return {"value": value}

    def prompt(g):
        return (f"A gradient of {g['value']:g} is stored in FP16 (round to nearest). What does "
                f"it become: a normal number, a subnormal number (fewer significant bits), "
                f"zero (it underflows), or infinity (it overflows)?")

    def choices(g):
        return ("normal", "subnormal", "zero", "overflow")

    def solve(g):
        fp16 = FORMATS["fp16"]
        kind = encode(g["value"], fp16).kind
        steps = (
            Step("Smallest normal FP16", "2⁻¹⁴", "2^-14", fp16.min_normal, ""),
            Step("Smallest subnormal FP16", "2⁻²⁴ (half of it rounds to 0)", "2^-24",
                 fp16.min_subnormal, ""),
            Step("Largest finite FP16", "65504", "65504", fp16.max, ""),
            Step("The value lands", "compare", "", kind, ""),
        )
        wrong = {"normal": ("subnormal", "Below 2⁻¹⁴ ≈ 6.1e-5 a value is subnormal; this one "
                                         "is above it."),
                 "subnormal": ("zero", "Values down to 2⁻²⁵ ≈ 3e-8 survive as subnormals; "
                                       "this one is above that."),
                 "zero": ("subnormal", "Below half the smallest subnormal (2⁻²⁵ ≈ 3e-8) even a "
                                       "subnormal cannot hold it."),
                 "overflow": ("normal", "FP16 tops out at 65504; this is beyond it.")}
        other, hint = wrong[kind]
        return Worked(kind, steps, (Mistake(other, hint),))

    def scene(g):
        return {"value": g["value"], "format": "fp32"}


FORMAT_KEYS = ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "tf32")


@exercise("format-largest", chapter=8, scene="precision", kind="number", unit="",
          title="A number format's largest finite value",
          source="IEEE 754; Micikevicius et al. 2022 (FP8 formats), Table 1",
          ranges={"format": FORMAT_KEYS})
class FormatLargest:
    def draw(d):
        return {"format": d.choice(FORMAT_KEYS)}

    def prompt(g):
        f = FORMATS[g["format"]]
        special = (" It has no infinities: only the all-ones exponent and mantissa pattern is "
                   "NaN, so the top exponent holds numbers too." if not f.has_inf else
                   " The all-ones exponent is reserved for infinities and NaN.")
        return (f"{f.label} has 1 sign bit, {f.exponent_bits} exponent bits (bias "
                f"{f.bias}) and {f.mantissa_bits} mantissa bits.{special} What is its largest "
                f"finite value?")

    def solve(g):
        f = FORMATS[g["format"]]
        if f.has_inf:
            top = 2 ** f.exponent_bits - 2 - f.bias
            steps = (Step("Largest exponent", "2^E − 2 − bias", f"2^{f.exponent_bits} - 2 - "
                                                               f"{f.bias}", top, ""),
                     Step("Largest significand", "2 − 2^−m", f"2 - 2^-{f.mantissa_bits}",
                          2 - 2.0 ** -f.mantissa_bits, ""),
                     Step("Largest value", "(2 − 2^−m) · 2^emax",
                          f"(2 - 2^-{f.mantissa_bits}) × 2^{top}", f.max, ""))
        else:
            top = 2 ** f.exponent_bits - 1 - f.bias
            steps = (Step("Largest exponent (all ones is a number)", "2^E − 1 − bias",
                          f"2^{f.exponent_bits} - 1 - {f.bias}", top, ""),
                     Step("Largest significand (all-ones mantissa is NaN)", "2 − 2·2^−m",
                          f"2 - 2 × 2^-{f.mantissa_bits}", 2 - 2 * 2.0 ** -f.mantissa_bits, ""),
                     Step("Largest value", "1.75 · 2⁸", f"(2 - 2 × 2^-{f.mantissa_bits}) × 2^{top}",
                          f.max, ""))
        ieee = (2 - 2.0 ** -f.mantissa_bits) * 2.0 ** (2 ** f.exponent_bits - 2 - f.bias)
        return Worked(f.max, steps, (
            Mistake(ieee, "E4M3 does not reserve its top exponent for infinities (OCP FP8): "
                          "only S.1111.111 is NaN."),
            Mistake(2.0 ** (2 ** f.exponent_bits - 2 - f.bias + 1), "The significand is below "
                                                                    "2: (2 − 2^−m)·2^emax."),
        ))

    def scene(g):
        return {"format": g["format"], "value": 1}


@exercise("format-spacing", chapter=8, scene="precision", kind="number", unit="",
          title="The gap between neighbouring numbers",
          source="IEEE 754: the spacing at x is 2^(⌊log₂x⌋ − m)",
          ranges={"format": ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2"), "value": (0.02, 400)})
class FormatSpacing:
    def draw(d):
        while True:
            value = d.nice(0.02, 400.0, 2)
            if abs(math.log2(value) - round(math.log2(value))) > 0.05:
                return {"format": d.choice(("fp16", "bf16", "fp8_e4m3", "fp8_e5m2")),
                        "value": value}

    def prompt(g):
        f = FORMATS[g["format"]]
        return (f"{f.label} keeps {f.mantissa_bits} mantissa bits. What is the gap between two "
                f"neighbouring {f.label} numbers near {g['value']:g} (the spacing that the "
                f"binade containing {g['value']:g} has)?")

    def solve(g):
        f = FORMATS[g["format"]]
        e = math.floor(math.log2(g["value"]))
        gap = f.eps * 2.0 ** e
        steps = (
            Step("Binade", "⌊log₂ x⌋", f"floor(log2({g['value']:g}))", e, ""),
            Step("Spacing", "2^(⌊log₂ x⌋ − m)", f"2^({e} - {f.mantissa_bits})", gap, ""),
        )
        return Worked(gap, steps, (
            Mistake(f.eps, "ε = 2^−m is the spacing in [1, 2); scale it by the binade of x."),
            Mistake(gap * 2, "Use ⌊log₂ x⌋: the binade below x, not above."),
        ))

    def scene(g):
        return {"format": g["format"], "value": g["value"]}


@exercise("loss-scale-after", chapter=8, scene="precision", kind="integer", unit="",
          title="Where GradScaler's scale ends up",
          source="torch.amp.GradScaler (torch._amp_update_scale_): halve on inf, double after "
                 "growth_interval clean steps",
          ranges={"init_scale_log2": (8, 24), "growth_interval": (2, 6)})
class LossScaleAfter:
    def draw(d):
        n = d.integer(8, 14)
        pattern = ["inf" if d.integer(0, 3) == 0 else "ok" for _ in range(n)]
        return {"init_scale_log2": d.integer(10, 20), "growth_interval": d.integer(2, 5),
                "steps": pattern}

    def prompt(g):
        shown = ", ".join("overflow" if s == "inf" else "clean" for s in g["steps"])
        return (f"torch.amp.GradScaler starts at S = 2^{g['init_scale_log2']} with "
                f"growth_interval = {g['growth_interval']} (backoff 0.5, growth 2). The next "
                f"{len(g['steps'])} steps are: {shown}. What is the scale after the last of "
                f"them?")

    def solve(g):
        scale, tracker = 2.0 ** g["init_scale_log2"], 0
        steps = ()
        for k, outcome in enumerate(g["steps"], start=1):
            before = scale
            scale, tracker = update_scale(scale, tracker, outcome == "inf", g["growth_interval"])
            what = ("overflow: skip, halve" if outcome == "inf" else
                    "clean: grow" if scale > before else f"clean ({tracker} in a row)")
            steps += (Step(f"Step {k}: {what}", "S × ½" if outcome == "inf" else
                           ("S × 2" if scale > before else "S"),
                           f"{num(before)} × 0.5" if outcome == "inf" else
                           (f"{num(before)} × 2" if scale > before else num(before)), scale,
                           ""),)
        naive = 2.0 ** g["init_scale_log2"]
        for outcome in g["steps"]:
            naive = naive / 2 if outcome == "inf" else naive
        return Worked(int(scale), steps, (
            Mistake(int(naive), "Clean steps count too: after growth_interval of them in a row "
                                "the scale doubles."),
            Mistake(int(scale * 2), "An overflow resets the clean-step counter: the doubling "
                                    "needs growth_interval clean steps after it."),
        ))

    def scene(g):
        return {"init_scale_log2": g["init_scale_log2"], "growth_interval": g["growth_interval"],
                "steps": len(g["steps"])}


@exercise("fp8-scale", chapter=8, scene="precision", kind="number", unit="",
          title="FP8's per-tensor scale",
          source="Micikevicius et al. 2022 §4.3; NVIDIA Transformer Engine: s = (fp8_max / amax) "
                 "/ 2^margin",
          ranges={"format": ("fp8_e4m3", "fp8_e5m2"), "amax": (1e-3, 100), "margin": (0, 3)})
class Fp8Scale:
    def draw(d):
        return {"format": d.choice(("fp8_e4m3", "fp8_e5m2")), "amax": d.nice(1e-3, 100.0, 2),
                "margin": d.integer(0, 3)}

    def prompt(g):
        f = FORMATS[g["format"]]
        return (f"Transformer Engine quantises a tensor whose largest magnitude is amax = "
                f"{g['amax']:g} to {f.label} (largest finite value {f.max:g}) with a margin of "
                f"{g['margin']}. What scale s does it multiply the tensor by?")

    def solve(g):
        f = FORMATS[g["format"]]
        s = per_tensor_scale(g["amax"], g["format"], g["margin"])
        steps = (Step("Headroom", "fp8_max / amax", f"{f.max:g} / {num(g['amax'])}",
                      f.max / g["amax"], ""),
                 Step("Scale", "headroom / 2^margin", f"{num(f.max / g['amax'])} / 2^{g['margin']}",
                      s, ""))
        return Worked(s, steps, (
            Mistake(f.max / g["amax"], "Apply the margin: divide by 2^margin.")
            if g["margin"] else Mistake(g["amax"] / f.max, "Scale up small tensors: "
                                                          "fp8_max / amax, not amax / fp8_max."),
            Mistake(g["amax"] / f.max, "Scale up small tensors: fp8_max / amax."),
        ))

    def scene(g):
        return {"format": g["format"], "fp8_margin": g["margin"]}


@exercise("selective-recompute-overhead", chapter=8, scene="checkpointing", kind="number",
          unit="fraction", title="What selective recomputation costs",
          source="Korthikanti et al. 2022 §5: recompute only QKᵀ, softmax, dropout, ×V (4bs²h "
                 "FLOPs a layer)",
          ranges={"seq": (1024, 16384), "hidden": (2048, 12288)})
class SelectiveRecomputeOverhead:
    def draw(d):
        hidden, heads = d.choice(SHAPES)
        return {"seq": d.choice((1024, 2048, 4096, 8192, 16384)), "hidden": hidden,
                "heads": heads}

    def prompt(g):
        return (f"A GPT layer (h = {g['hidden']}, MLP 4h) trains on sequences of s = "
                f"{g['seq']} tokens. Selective recomputation re-runs only the attention core "
                f"(QKᵀ and the product with V) during backward. By what fraction does that "
                f"increase the layer's forward-plus-backward FLOPs (backward = 2 × forward)?")

    def solve(g):
        model = ModelShape("exercise", "gpt", 1, g["hidden"], g["heads"], g["heads"],
                           4 * g["hidden"], 1, g["seq"])
        core = flops.attention_core_flops(model, g["seq"], 1)
        forward = flops.layer_forward_flops(model, g["seq"], 1)
        s, h = g["seq"], g["hidden"]
        steps = (
            Step("Recomputed per sequence", "4s²h", f"4 × {s}^2 × {h}", core, "FLOP"),
            Step("Forward per sequence", "24sh² + 4s²h", f"24 × {s} × {h}^2 + 4 × {s}^2 × {h}",
                 forward, "FLOP"),
            Step("Overhead", "4s²h / (3 × forward)", f"{num(core)} / (3 × {num(forward)})",
                 core / (3 * forward), "fraction"),
        )
        return Worked(core / (3 * forward), steps, (
            Mistake(core / forward, "Compare with forward and backward together: 3 × the "
                                    "forward."),
            Mistake(1 / 3, "That is full recomputation (one more forward of everything); "
                           "selective redoes only the attention core."),
        ))

    def scene(g):
        return {"preset": "gpt3-175b", "hidden": g["hidden"], "heads": g["heads"],
                "seq": g["seq"], "recompute": "selective"}


@exercise("checkpoint-peak", chapter=8, scene="checkpointing", kind="number", unit="bytes",
          title="The peak of checkpointed segments",
          source="Chen et al. 2016; Megatron-LM --recompute-method uniform: (L/k − 1)·C + k·A",
          ranges={"layers": (8, 96), "k": (1, 12), "a_mib": (100, 3000), "c_mib": (10, 200)})
class CheckpointPeak:
    def draw(d):
        layers = d.choice((8, 12, 16, 24, 32, 48, 64, 96))
        ks = [k for k in range(2, 13) if layers % k == 0]
        return {"layers": layers, "k": d.choice(ks), "a_mib": float(d.choice((312, 552, 1024,
                                                                              2736))),
                "c_mib": float(d.choice((24, 48, 96)))}

    def prompt(g):
        return (f"Full recomputation in segments of k = {g['k']} layers (Megatron's uniform "
                f"method) on a model of L = {g['layers']} layers: forward keeps only each "
                f"segment's input, C = {g['c_mib']:g} MiB; backward re-runs one segment at a "
                f"time, keeping its k layers' full activations, A = {g['a_mib']:g} MiB each "
                f"(its own checkpoint is among them). What is the peak activation memory, in "
                f"bytes (MiB = 2²⁰ bytes)?")

    def solve(g):
        L, k, mib = g["layers"], g["k"], 2**20
        per = LayerBytes(g["a_mib"] * mib, 0.0, g["c_mib"] * mib)
        peak = full_peak(L, k, per)
        n = len(segments(L, k))
        steps = (
            Step("Segments", "L / k", f"{L} / {k}", n, ""),
            Step("Checkpoints held while the last segment re-runs", "(L/k − 1)·C",
                 f"({n} - 1) × {num(per.checkpoint)}", (n - 1) * per.checkpoint, "bytes"),
            Step("The re-run segment's activations", "k·A", f"{k} × {num(per.full)}",
                 k * per.full, "bytes"),
            Step("Peak", "(L/k − 1)·C + k·A",
                 f"{num((n - 1) * per.checkpoint)} + {num(k * per.full)}", peak, "bytes"),
        )
        return Worked(peak, steps, (
            Mistake(n * per.checkpoint + k * per.full, "The re-run segment's own checkpoint is "
                                                       "one of its k layers' inputs: count the "
                                                       "other L/k − 1."),
            Mistake(L * per.full, "That is without recomputation."),
        ))

    def scene(g):
        return {"preset": "gpt3-175b", "layers": g["layers"], "recompute": "full",
                "recompute_layers": g["k"]}


@exercise("grad-accum-global-batch", chapter=8, scene="checkpointing", kind="integer",
          unit="sequences", title="The global batch of gradient accumulation",
          source="global batch = micro_batch × grad_accum × dp (Megatron-LM, DeepSpeed)",
          ranges={"global": (16, 65536), "micro_batch": (1, 16), "dp": (2, 512)},
          scene_hides=("grad_accum",))
class GradAccumSteps:
    def draw(d):
        b, dp, accum = d.choice((1, 2, 4, 8)), d.choice((8, 16, 32, 64, 128, 256)), d.choice(
            (2, 4, 8, 16, 32))
        return {"global": global_batch(b, accum, dp), "micro_batch": b, "dp": dp}

    def prompt(g):
        return (f"A run wants a global batch of {g['global']} sequences per optimizer step. It "
                f"has dp = {g['dp']} data-parallel replicas, and only micro-batches of "
                f"{plural(g['micro_batch'], 'sequence')} fit in memory. How many micro-batches must each "
                f"replica accumulate before every optimizer step?")

    def solve(g):
        per_pass = global_batch(g["micro_batch"], 1, g["dp"])
        accum = g["global"] // per_pass
        assert global_batch(g["micro_batch"], accum, g["dp"]) == g["global"]
        steps = (
            Step("Sequences per accumulation step, all replicas", "micro_batch × dp",
                 f"{g['micro_batch']} × {g['dp']}", per_pass, "sequences"),
            Step("Accumulation steps", "global / (micro_batch × dp)",
                 f"{g['global']} / {per_pass}", accum, "micro-batches"),
        )
        return Worked(accum, steps, (
            Mistake(g["global"] // g["micro_batch"], "Every replica takes its share of the "
                                                     "batch: divide by dp too."),
            Mistake(g["global"] // g["dp"], "Each micro-batch holds several sequences: divide "
                                            "by the micro-batch too."),
        ))

    def scene(g):
        return {"micro_batch": g["micro_batch"], "dp": g["dp"],
                "grad_accum": g["global"] // (g["micro_batch"] * g["dp"])}
