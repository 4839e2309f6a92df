"""Comparing torch's casts, GradScaler and float8 quantisation (workers/precision.py) with the
mixed-precision simulation.

Each of the scene's three claims is checked on every rank:

1. the typed value rounds to the same value, with the same bits, in every format torch has a
   dtype for (TF32 only where a CUDA GPU measured it) — compared with what torch's casts do,
   rounding the float64 to FP32 first and then to the format
   (:func:`~app.sim.precision.number_formats.round_via_fp32`). The scene itself shows the
   nearest value, rounded once; for the rare value where rounding twice lands elsewhere
   (1.00390625001 → BF16: 1.0 through FP32, 1.0078125 nearest) the table says so and why;
2. ``torch.amp.GradScaler`` (``torch._amp_update_scale_``) used the same loss scale at every
   step, skipped the same steps, and the same shares of gradients flushed to 0 or turned
   subnormal in FP16 (Micikevicius et al. 2018, §3.2);
3. FP8 with and without per-tensor scaling (Micikevicius et al. 2022, §4.3) gives the same
   scales, amax, underflow and overflow shares.

All of these are exact: the same IEEE operations on the same numbers, or counts. The one
exception is FP8's RMS relative error, a float64 mean whose terms torch (summed per rank, then
all-reduced) and numpy add in different orders; it passes within 1e-12 relative — one
quantised value off by one FP8 step would move it by about 1e-3.
"""

from __future__ import annotations

import math

import numpy as np

from app.sim.precision.number_formats import FORMATS, KEYS, encode_via_fp32
from app.jobs.runner import Check, Verdict

RMS_TOLERANCE = 1e-12
STEP_FIELDS = (("scale", "scale", "the scale S"), ("skipped", "found_inf", "skipped"),
               ("underflow", "underflow", "the share flushed to 0"),
               ("subnormal", "subnormal", "the subnormal share"),
               ("scale_after", "scale_after", "the next scale"),
               ("growth_tracker", "growth_tracker", "the clean-step counter"))
"""(worker's key, ScaleStep's attribute, words) of what is compared at every step"""


class Tally:
    """What went wrong (each difference once, with the ranks it happened on), what to tell the
    student, and the largest difference seen."""

    def __init__(self, world: int) -> None:
        self.world = world
        self.found: dict[tuple[str, str], list[int]] = {}
        self.notes: list[str] = []
        self.worst = 0.0

    def problem(self, what: str, rank: int | None, text: str) -> None:
        """``what`` differs on ``rank`` (None: not a rank's matter), as ``text`` says."""
        ranks = self.found.setdefault((what, text), [])
        if rank is not None:
            ranks.append(rank)

    @property
    def problems(self) -> list[str]:
        out = []
        for (what, text), ranks in self.found.items():
            if not ranks:
                where = ""
            elif len(ranks) == self.world > 1:
                where = " on every rank"
            else:
                where = (f" on rank{'s' if len(ranks) > 1 else ''} "
                         f"{_listed([str(r) for r in ranks])}")
            out.append(f"{what}{where}: {text}")
        return out

    def differ(self, got, want) -> bool:
        """Whether ``got`` is not exactly ``want``; finite numeric gaps count towards worst."""
        if isinstance(got, (int, float)) and isinstance(want, (int, float)):
            gap = abs(float(got) - float(want))
            if math.isfinite(gap):
                self.worst = max(self.worst, gap)
        return got != want

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def _bits(encoded) -> str:
    return f"{encoded.sign} {encoded.exponent} {encoded.mantissa}".strip()


def _spaced(bits: str, key: str) -> str:
    """A bit string split as sign, exponent, mantissa."""
    e = FORMATS[key].exponent_bits
    return f"{bits[0]} {bits[1:1 + e]} {bits[1 + e:]}"


def _value_cell(got: dict) -> str:
    if not got.get("measured", True):
        return "not measurable on a CPU"
    if got["overflow"]:
        saturated = got.get("saturated_to")
        return "overflow" + (f" (saturates to {saturated:g})" if saturated is not None else "")
    return f"{got['rounded']:.9g}"


def _rounding(params, trace, ranks: list[dict], tally: Tally) -> list[list[str]]:
    rows = []
    for key in KEYS:
        nearest, label = trace.encoding(key), FORMATS[key].label
        enc = encode_via_fp32(params.value, FORMATS[key])   # what torch's cast must give
        sim_cell = "overflow" if enc.kind == "overflow" else f"{enc.rounded:.9g}"
        if nearest.differs_via_fp32:
            exact = "overflow" if nearest.kind == "overflow" else f"{nearest.rounded:.9g}"
            sim_cell += f" through FP32 (nearest: {exact})"
            tally.note(f"{label}: torch casts the float64 {params.value!r} to FP32 first and "
                       f"then to {label}, rounding twice; the first rounding lands on or past "
                       f"a midpoint, so it gives {sim_cell.split(' through')[0]} where the "
                       f"nearest {label} value is {exact}. The page shows the nearest; this "
                       f"check holds torch to its own two roundings.")
        agree, measured = True, True
        for r, rank in enumerate(ranks):
            got = rank["rounding"][key]
            if not got["measured"]:
                measured = False
                tally.note(f"{got['why']}, so it is not measured here; the simulation's "
                           f"{label} is FP16's rounding after an exact power-of-two shift.")
                continue
            if got.get("saturated_to") is not None:
                tally.note(f"torch's {label} cast saturates: {params.value:g} becomes "
                           f"{got['saturated_to']:g}, where ml_dtypes gives NaN — both mean it "
                           f"does not fit.")
            if got["overflow"] != (enc.kind == "overflow"):
                agree = False
                tally.problem(label, r, f"torch says {_value_cell(got)}, the simulation "
                                        f"{sim_cell}")
                continue
            if got["overflow"]:
                continue
            value_off = tally.differ(got["rounded"], enc.rounded)
            if value_off or got["bits"] != _bits(enc).replace(" ", ""):
                agree = False
                tally.problem(
                    label, r, f"torch rounds {params.value!r} to {got['rounded']!r} "
                    f"({_spaced(got['bits'], key)}), the simulation to {enc.rounded!r} "
                    f"({_bits(enc)}){_why(params.value, key, got)}")
        if not measured:
            verdict = "— not measured"
        elif not agree:
            verdict = "✗ differs"
        else:
            verdict = ("✓ overflow in both" if enc.kind == "overflow"
                   else f"✓ same bits: {_bits(enc)}")
        real_cell = _value_cell(ranks[0]["rounding"][key])
        rows.append([f"{params.value:g} → {label}", sim_cell, real_cell, verdict])
    return rows


def _why(value: float, key: str, got: dict) -> str:
    """A likely cause of a rounding difference, in words (empty when none is known)."""
    if key == "tf32" and got.get("fp32_unchanged"):
        return " — this GPU multiplied in full FP32 (no TF32 tensor cores were used)"
    return ""


def _scaling(trace, ranks: list[dict], tally: Tally) -> tuple[list[list[str]], list[list[int]]]:
    steps = trace.scale_steps
    table = [[0] * len(ranks) for _ in steps]
    for r, rank in enumerate(ranks):
        history = rank["scaling"]
        if len(history) != len(steps):
            tally.problem(f"rank {r}", None, f"ran {len(history)} loss-scaling steps, the "
                                             f"simulation {len(steps)}")
            for t in range(len(history), len(steps)):   # a missing step differs in everything
                table[t][r] += len(STEP_FIELDS)
        shown = 0
        for t, (got, want) in enumerate(zip(history, steps)):
            for key, attr, words in STEP_FIELDS:
                if tally.differ(got[key], getattr(want, attr)):
                    table[t][r] += 1
                    if shown < 3:
                        tally.problem(f"step {want.step}", r,
                                      f"{words} is {got[key]!r} with torch, "
                                      f"{getattr(want, attr)!r} in the simulation")
                    shown += 1
    bad_steps = sum(1 for row in table if any(row))
    sim = _scale_summary([(s.scale, s.found_inf, s.scale_after, s.underflow, s.subnormal)
                          for s in steps])
    real = _scale_summary([(h["scale"], h["skipped"], h["scale_after"], h["underflow"],
                            h["subnormal"]) for h in ranks[0]["scaling"]])
    every = f"all {len(steps)} step{'s' if len(steps) > 1 else ''}, every rank"
    rows = [[f"loss scale, {len(steps)} steps", sim[0], real[0],
             f"✓ {every}" if not bad_steps else f"✗ {bad_steps} step(s) differ"],
            ["FP16 gradients, S·g", sim[1], real[1],
             f"✓ {every}" if not bad_steps else "✗ see the steps below"]]
    return rows, table


def _scale_summary(steps: list[tuple[float, bool, float, float, float]]) -> tuple[str, str]:
    """(scale, skipped, next scale, flushed, subnormal) per step → the table's two cells."""
    if not steps:
        return "no steps", "—"
    skipped = [str(t) for t, s in enumerate(steps, start=1) if s[1]]
    listed = ", ".join(skipped) if len(skipped) <= 6 else ", ".join(skipped[:5]) + ", …"
    scales = (f"{_pow2(steps[0][0])} → {_pow2(steps[-1][2])}; "
              + (f"{len(skipped)} skipped ({listed})" if skipped else "none skipped"))
    return scales, f"{_most(steps, 3, 'flushed to 0')}; {_most(steps, 4, 'subnormal')}"


def _most(steps, field: int, words: str) -> str:
    top = max(range(len(steps)), key=lambda t: steps[t][field])
    if steps[top][field] == 0:
        return f"none {words}"
    return f"up to {100 * steps[top][field]:.3g}% {words} (step {top + 1})"


def _pow2(x: float) -> str:
    k = math.log2(x) if x > 0 else float("nan")
    return f"2^{k:g}" if k.is_integer() else f"{x:g}"


def _fp8(trace, ranks: list[dict], tally: Tally) -> list[list[str]]:
    rows = []
    for i, want in enumerate(trace.fp8):
        label = (f"{FORMATS[want.format].label} · "
                 f"{'unscaled' if want.scaling == 'none' else 'per-tensor'}")
        agree = True
        for r, rank in enumerate(ranks):
            got = rank["fp8"][i] if i < len(rank["fp8"]) else {}
            if (got.get("format"), got.get("scaling")) != (want.format, want.scaling):
                tally.problem(label, r, "not reported")
                agree = False
                continue
            for key, attr in (("scale", "scale"), ("amax", "amax"), ("underflow", "underflow"),
                              ("overflow", "overflow")):
                if tally.differ(got[key], getattr(want, attr)):
                    agree = False
                    tally.problem(label, r, f"{key} is {got[key]!r} with torch, "
                                            f"{getattr(want, attr)!r} in the simulation")
            rms, expected = got["rms_relative_error"], want.rms_relative_error
            tally.differ(rms, expected)
            if abs(rms - expected) > RMS_TOLERANCE * max(expected, np.finfo(float).tiny):
                agree = False
                tally.problem(label, r, f"RMS relative error {rms:.6g} with torch, "
                                        f"{expected:.6g} in the simulation")
            if got.get("saturated"):
                tally.note(f"{label}: torch's cast saturated {got['saturated']} values past "
                           f"{FORMATS[want.format].max:g} to ±{FORMATS[want.format].max:g}, "
                           f"where ml_dtypes gives NaN; both count them as overflow.")
        first = ranks[0]["fp8"][i] if i < len(ranks[0]["fp8"]) else None
        rows.append([label, _fp8_cell(want.scale, want.underflow, want.overflow,
                                      want.rms_relative_error),
                     _fp8_cell(first["scale"], first["underflow"], first["overflow"],
                               first["rms_relative_error"]) if first else "—",
                     "✓ same" if agree else "✗ differs"])
    return rows


def _fp8_cell(scale: float, underflow: float, overflow: float, rms: float) -> str:
    return (f"s = {scale:.4g}: {100 * underflow:.3g}% → 0, {100 * overflow:.3g}% overflow, "
            f"RMS {rms:.3g}")


def _listed(words: list[str]) -> str:
    return ", ".join(words[:-1]) + f" and {words[-1]}" if len(words) > 1 else "".join(words)


def compare(params, trace, report: dict) -> Verdict:
    ranks = report["ranks"]
    tally = Tally(len(ranks))
    rounding = _rounding(params, trace, ranks, tally)
    before_scaling = len(tally.found)
    scaling, table = _scaling(trace, ranks, tally)
    before_fp8 = len(tally.found)
    fp8 = _fp8(trace, ranks, tally)
    rounded_ok = before_scaling == 0
    scaling_ok = before_fp8 == before_scaling
    fp8_ok = len(tally.found) == before_fp8
    measured = [FORMATS[k].label for k in KEYS if ranks[0]["rounding"][k]["measured"]]
    steps, skipped = len(trace.scale_steps), sum(s.found_inf for s in trace.scale_steps)
    where = " on CUDA" if report.get("device") == "cuda" else ""
    detail = (
        f"torch {report.get('torch', '')}{where}, every rank checked. Rounding: torch's casts "
        f"of {params.value:g} to {_listed(measured)} "
        f"{'give' if rounded_ok else 'do not all give'} the simulation's values, bit for "
        f"bit. Loss scaling: torch.amp.GradScaler, fed each rank's "
        f"FP16 shard of S·g and an all-reduce, "
        + (f"used the same scale at all {steps} steps, "
           + (f"skipped the same {skipped}" if skipped else "skipped none, as the simulation")
           + ", and flushed the same share of gradients to 0" if scaling_ok else
           "disagrees with the simulation")
        + ". FP8: torch's float8 casts "
        + (f"give the same scales, underflow and overflow, and RMS errors within "
           f"{RMS_TOLERANCE:g} relative" if fp8_ok else "disagree with the simulation")
        + ".")
    problems = tally.problems
    if problems:
        detail += " Differences: " + "; ".join(problems[:6]) + (
            f" (and {len(problems) - 6} more)" if len(problems) > 6 else "") + "."
    caption = "What torch computed, beside the simulation (rank 0 shown; every rank compared)"
    return Verdict(
        not problems, float(f"{tally.worst:.3g}"), detail,
        {"table": {"caption": caption, "header": ["", "simulation", "torch", "agree"],
                   "rows": rounding + scaling + fp8},
         "diff_table": table,
         "diff_label": "Loss scaling: quantities that differ per rank and step (the scale, "
                       "skipped, shares flushed and subnormal, next scale, counter)",
         "notes": tally.notes})


def worker_argv(p) -> list[str]:
    """workers/precision.py's command line for ``p``: --name=value for the floats, which
    argparse would otherwise read as an option when negative (-1e-05)."""
    return [f"--value={p.value!r}", f"--grad-center={p.grad_center!r}",
            f"--grad-spread={p.grad_spread!r}", "--steps", str(p.steps),
            "--init-scale-log2", str(p.init_scale_log2),
            "--growth-interval", str(p.growth_interval), "--seed", str(p.seed),
            "--fp8-margin", str(p.fp8_margin)]


CHECK = Check(
    worker="workers/precision.py",
    world=lambda p: 2,
    args=worker_argv,
    compare=compare,
)
