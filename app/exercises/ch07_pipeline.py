"""Chapter 7, pipeline parallelism: the bubble (PTD-P's share of the ideal time, and of the
total), Megatron's warm-up forwards, the micro-batches a rank holds at its peak, a 1F1B
makespan, ZB-H1's bubble, and the first stage's activation memory.

Every answer is read off a simulated timeline: the schedule's order from
:func:`app.sim.pipeline.orders.build`, timed by :func:`app.sim.pipeline.passes.timeline` and
its memory pass — the code /pipeline draws (Narayanan et al. 2021, PTD-P §2.2; Qi et al. 2023,
Zero Bubble, Table 2; Korthikanti et al. 2022 §4.2.3).
"""

from __future__ import annotations

from app.exercises.model import Mistake, Step, Worked, exercise
from app.exercises.units import num
from app.sim.memory import activations
from app.sim.pipeline import passes
from app.sim.pipeline.orders import build, interleaved_warmup, one_f_one_b_warmup

SCHEDULES = {"gpipe": "gpipe", "1f1b": "1f1b", "interleaved": "interleaved_1f1b"}
"""The canonical problem's schedule names → the simulator's."""
WORDS = {"gpipe": "GPipe (all forwards, then all backwards)",
         "1f1b": "1F1B (PipeDream-Flush, Megatron's default)",
         "interleaved": "interleaved 1F1B", "interleaved_1f1b": "interleaved 1F1B",
         "zb_h1": "ZB-H1"}
STAGES = (2, 3, 4, 6, 8, 12, 16)


def run(schedule: str, p: int, m: int, v: int = 1, t_f: float = 1.0, t_b: float = 2.0,
        t_w: float = 0.0):
    """(schedule, flat, timeline) of the simulated pipeline."""
    sched = build(schedule, p, m, v)
    flat = passes.validate(sched)
    line = passes.timeline(sched, passes.Times(t_f, t_b, t_w), flat)
    return sched, flat, line


def _draw_pipeline(d, schedules=("gpipe", "1f1b", "interleaved")) -> dict:
    schedule = d.choice(schedules)
    p = d.choice(STAGES)
    if schedule == "interleaved":
        v = d.choice((2, 3, 4))
        m = p * d.integer(1, 8)              # p divides m: PTD-P's formula holds exactly
    else:
        v = 1
        m = d.choice((1, 2, 4, 8, 12, 16, 24, 32, 48, 64))
        m = max(m, 2)
    return {"stages": p, "microbatches": m, "schedule": schedule, "chunks": v}


def _scene(g, schedule: str | None = None, **times) -> dict:
    name = SCHEDULES.get(g.get("schedule"), g.get("schedule")) if schedule is None else schedule
    return {"schedule": name, "stages": g["stages"], "microbatches": g["microbatches"],
            "chunks": g.get("chunks", 1) if name == "interleaved_1f1b" else None, **times}


@exercise("pipeline-bubble", chapter=7, scene="pipeline", kind="number", unit="fraction",
          title="The pipeline bubble, as PTD-P counts it",
          source="Narayanan et al. 2021 (PTD-P) §2.2: t_pb/t_id = (p−1)/m; interleaved "
                 "(p−1)/(v·m)",
          ranges={"stages": (2, 16), "microbatches": (2, 128),
                  "schedule": ("gpipe", "1f1b", "interleaved"), "chunks": (1, 4)},
          draw=_draw_pipeline)
class PipelineBubble:
    def prompt(g):
        chunks = (f", each rank holding v = {g['chunks']} model chunks" if g["schedule"] ==
                  "interleaved" else "")
        return (f"A pipeline of p = {g['stages']} stages runs m = {g['microbatches']} "
                f"micro-batches per step with {WORDS[g['schedule']]}{chunks}; communication is "
                f"free. What is the bubble time as a fraction of the ideal time, t_pb/t_id "
                f"(PTD-P's bubble fraction)?")

    def solve(g):
        p, m, v = g["stages"], g["microbatches"], g["chunks"]
        _, _, line = run(SCHEDULES[g["schedule"]], p, m, v)
        ideal = m * 3.0                         # m·(t_f + t_b) with t_f = 1, t_b = 2
        bubble = line.makespan - ideal
        fraction = bubble / ideal
        steps = (
            Step("Simulated with t_f = 1, t_b = 2: the step's length", "makespan", "",
                 line.makespan, "time units"),
            Step("Ideal time", "t_id = m·(t_f + t_b)", f"{m} × 3", ideal, "time units"),
            Step("Bubble", "t_pb = makespan − t_id = (p − 1)(t_f + t_b)" +
                 ("/v" if v > 1 else ""), f"({p} - 1) × 3" + (f" / {v}" if v > 1 else ""),
                 bubble, "time units"),
            Step("Bubble fraction", "t_pb/t_id = (p − 1)/" + ("(v·m)" if v > 1 else "m"),
                 f"({p} - 1) / " + (f"({v} × {m})" if v > 1 else f"{m}"), fraction,
                 "fraction"),
        )
        mistakes = [Mistake((p - 1) / (m + p - 1), "That is the bubble's share of the total "
                                                   "time, (p−1)/(m+p−1); PTD-P divides by the "
                                                   "ideal time instead: t_pb/t_id."),
                    Mistake(p / m / v, "The bubble is p − 1 passes long: the last stage starts "
                                       "p − 1 forwards late.")]
        if v > 1:
            mistakes.append(Mistake((p - 1) / m, "Interleaving cuts every pass into v shorter "
                                                 "ones: the bubble shrinks by v."))
        return Worked(fraction, steps, tuple(mistakes))

    def scene(g):
        return _scene(g, t_b=2)


@exercise("pipeline-bubble-share", chapter=7, scene="pipeline", kind="number", unit="fraction",
          title="The share of the step the GPUs sit idle",
          source="Huang et al. 2019 (GPipe): (p−1)/(m+p−1); PTD-P §2.2.2: (p−1)/(v·m+p−1)",
          ranges={"stages": (2, 16), "microbatches": (2, 128),
                  "schedule": ("gpipe", "1f1b", "interleaved"), "chunks": (1, 4)},
          draw=_draw_pipeline)
class PipelineBubbleShare:
    def prompt(g):
        chunks = (f" with v = {g['chunks']} chunks per rank" if g["schedule"] == "interleaved"
                  else "")
        return (f"p = {g['stages']} pipeline stages run m = {g['microbatches']} micro-batches "
                f"with {WORDS[g['schedule']]}{chunks}, communication free. What fraction of "
                f"all GPU time in the step (p × makespan) is idle?")

    def solve(g):
        p, m, v = g["stages"], g["microbatches"], g["chunks"]
        _, _, line = run(SCHEDULES[g["schedule"]], p, m, v)
        busy = float(line.busy.sum())
        steps = (
            Step("Busy GPU time (t_f = 1, t_b = 2)", "p · m · (t_f + t_b)", f"{p} × {m} × 3", busy,
                 "time units"),
            Step("Makespan", "(m·v + p − 1)(t_f + t_b)/v", f"({m} × {v} + {p} - 1) × 3 / {v}",
                 line.makespan, "time units"),
            Step("Idle share", "1 − busy/(p · makespan) = (p−1)/(v·m + p − 1)",
                 f"({p} - 1) / ({v} × {m} + {p} - 1)", line.bubble_fraction, "fraction"),
        )
        return Worked(line.bubble_fraction, steps, (
            Mistake((p - 1) / (m * v), "That is PTD-P's t_pb/t_id, relative to the ideal time; "
                                       "the question asks for the share of the whole step."),
            Mistake((p - 1) / (m + p - 1) if v > 1 else (p - 1) / (m * 2 + p - 1),
                    "Interleaving divides the bubble by v: (p−1)/(v·m + p − 1)." if v > 1 else
                    "Recount: the bubble is p − 1 passes, the step m + p − 1."),
        ))

    def scene(g):
        return _scene(g, t_b=2)


@exercise("pipeline-warmup", chapter=7, scene="pipeline", kind="integer", unit="micro-batches",
          title="Warm-up forwards before a rank's first backward",
          source="Megatron-LM schedules.py: 1F1B min(p−r−1, m); interleaved (v−1)·m_round + "
                 "2(p−1−r) (10, 8, 6, 4 for v = 2, p = 4, m = 8)",
          ranges={"schedule": ("1f1b", "interleaved"), "stages": (2, 16),
                  "microbatches": (2, 128), "chunks": (1, 4), "rank": (0, 15)},
          query=_scene)
class PipelineWarmup:
    def draw(d):
        g = _draw_pipeline(d, ("1f1b", "interleaved"))
        g["rank"] = d.integer(0, g["stages"] - 1)
        return g

    def prompt(g):
        chunks = (f" (v = {g['chunks']} model chunks per rank; a chunk's forward counts as one)"
                  if g["schedule"] == "interleaved" else "")
        return (f"Megatron-LM runs {WORDS[g['schedule']]} on p = {g['stages']} pipeline ranks "
                f"with m = {g['microbatches']} micro-batches{chunks}. How many warm-up forward "
                f"passes (num_warmup_microbatches) does rank {g['rank']} run before its steady "
                f"one-forward-one-backward phase?")

    def solve(g):
        p, m, v, r = g["stages"], g["microbatches"], g["chunks"], g["rank"]
        if g["schedule"] == "1f1b":
            warm = one_f_one_b_warmup(r, p, m)
            steps = (Step("Warm-up", "min(p − r − 1, m)", f"min({p} - {r} - 1, {m})", warm,
                          "micro-batches"),)
            mistakes = (Mistake(p - r, "Rank r's first backward comes after p − r − 1 forwards: "
                                       "the last rank starts backward right after its first "
                                       "forward."),
                        Mistake(m, "That is GPipe: 1F1B starts alternating as soon as the "
                                   "first gradient can reach the rank."))
        else:
            warm = interleaved_warmup(r, p, m, v)
            rounds = max(1, m // p)
            per = m // rounds
            steps = (Step("Micro-batches per round", "m / max(1, m // p)",
                          f"{m} / max(1, floor({m} / {p}))", per, "micro-batches"),
                     Step("Warm-up", "min((v − 1)·m_round + 2(p − 1 − r), v·m)",
                          f"min(({v} - 1) × {per} + 2 × ({p} - 1 - {r}), {v} × {m})", warm,
                          "micro-batches"))
            mistakes = (Mistake(min(p - r - 1, m), "Interleaved ranks first run their other "
                                                   "chunks' forwards: (v − 1)·m_round more."),
                        Mistake(min((v - 1) * per + (p - 1 - r), v * m),
                                "Each step down the pipeline costs two chunk-passes of "
                                "warm-up: 2(p − 1 − r)."))
        return Worked(warm, steps, mistakes)


@exercise("pipeline-peak-activations", chapter=7, scene="pipeline", kind="integer",
          unit="micro-batches", title="Micro-batches a rank holds at its peak",
          source="Narayanan et al. 2021 §2.2.1: GPipe keeps m, 1F1B at most p − r on rank r",
          ranges={"schedule": ("gpipe", "1f1b"), "stages": (2, 16), "microbatches": (2, 128),
                  "rank": (0, 15)},
          query=_scene)
class PipelinePeakActivations:
    def draw(d):
        g = _draw_pipeline(d, ("gpipe", "1f1b"))
        g["rank"] = d.integer(0, g["stages"] - 1)
        return g

    def prompt(g):
        return (f"p = {g['stages']} pipeline stages run m = {g['microbatches']} micro-batches "
                f"with {WORDS[g['schedule']]}. A rank keeps a micro-batch's activations from "
                f"its forward until its backward ends. At most how many micro-batches' "
                f"activations does rank {g['rank']} hold at once?")

    def solve(g):
        p, m, r = g["stages"], g["microbatches"], g["rank"]
        _, flat, line = run(g["schedule"], p, m)
        peak = passes.memory(flat, line).peak[r]
        if g["schedule"] == "gpipe":
            steps = (Step("GPipe runs every forward first", "m", str(m), peak,
                          "micro-batches"),)
            mistakes = (Mistake(min(p - r, m), "That is 1F1B; GPipe runs all m forwards before "
                                               "any backward."),)
        else:
            steps = (Step("Warm-up forwards", "min(p − r − 1, m)",
                          f"min({p} - {r} - 1, {m})", min(p - r - 1, m), "micro-batches"),
                     Step("… plus the one in the steady 1F1B phase", "min(p − r, m)",
                          f"min({p} - {r}, {m})", peak, "micro-batches"))
            mistakes = (Mistake(m, "1F1B frees a micro-batch with every backward: it never "
                                   "holds more than p − r."),
                        Mistake(min(p - r - 1, m), "Count the steady phase's forward too: it "
                                                   "runs before its backward frees one."))
        return Worked(peak, steps, mistakes)


@exercise("pipeline-makespan", chapter=7, scene="pipeline", kind="number", unit="ms",
          title="How long a 1F1B step takes",
          source="Narayanan et al. 2021 §2.2.1: (m + p − 1)(t_f + t_b)",
          ranges={"stages": (2, 16), "microbatches": (2, 128), "t_f": (0.5, 20),
                  "t_b": (1, 40)})
class PipelineMakespan:
    def draw(d):
        t_f = d.choice((0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0))
        return {"stages": d.choice(STAGES), "microbatches": d.choice((4, 8, 16, 32, 64)),
                "t_f": t_f, "t_b": 2 * t_f}

    def prompt(g):
        return (f"A 1F1B pipeline of p = {g['stages']} stages runs m = {g['microbatches']} "
                f"micro-batches; on every stage a forward takes t_f = {g['t_f']:g} ms and a "
                f"backward t_b = {g['t_b']:g} ms; sends are free. How long is the step, from "
                f"the first forward to the last backward, in ms?")

    def solve(g):
        p, m, tf, tb = g["stages"], g["microbatches"], g["t_f"], g["t_b"]
        _, _, line = run("1f1b", p, m, 1, tf, tb)
        steps = (
            Step("Work on one stage", "m·(t_f + t_b)", f"{m} × ({tf:g} + {tb:g})",
                 m * (tf + tb), "ms"),
            Step("Fill and drain", "(p − 1)(t_f + t_b)", f"({p} - 1) × ({tf:g} + {tb:g})",
                 (p - 1) * (tf + tb), "ms"),
            Step("Step", "(m + p − 1)(t_f + t_b)", f"({m} + {p} - 1) × ({tf:g} + {tb:g})",
                 line.makespan, "ms"),
        )
        return Worked(line.makespan, steps, (
            Mistake(m * (tf + tb), "Add the bubble: the last stage waits p − 1 forwards before "
                                   "it starts, the first waits p − 1 backwards at the end."),
            Mistake((m + p) * (tf + tb), "The bubble is p − 1 passes, not p."),
        ))

    def scene(g):
        return _scene(g, "1f1b", t_f=g["t_f"], t_b=g["t_b"], t_w=0)


@exercise("zb-h1-bubble", chapter=7, scene="pipeline", kind="number", unit="fraction",
          title="ZB-H1's bubble",
          source="Qi et al. 2023 (Zero Bubble), Table 2: (p−1)(T_F + T_B − T_W) idle per rank",
          ranges={"stages": (2, 16), "microbatches": (2, 128), "t_f": (1, 2), "t_b": (1, 2),
                  "t_w": (0.2, 1)})
class ZbH1Bubble:
    def draw(d):
        p = d.choice((2, 3, 4, 6, 8))
        t_f = d.choice((1.0, 1.2, 1.5, 2.0))
        t_b = d.choice((1.0, 1.2, 1.5, 2.0))
        t_w = d.choice((0.2, 0.4, 0.5, 0.6, 0.8, 1.0))
        return {"stages": p, "microbatches": p * d.integer(1, 6), "t_f": t_f, "t_b": t_b,
                "t_w": min(t_w, t_f, t_b)}

    def prompt(g):
        return (f"ZB-H1 splits each backward into I (gradient for the inputs, t_b = "
                f"{g['t_b']:g}) and W (gradient for the weights, t_w = {g['t_w']:g}), and "
                f"delays W passes to fill the bubble. With p = {g['stages']} stages, "
                f"m = {g['microbatches']} micro-batches and forwards of t_f = {g['t_f']:g}, what "
                f"fraction of the step is each rank idle (communication free)?")

    def solve(g):
        p, m, tf, tb, tw = g["stages"], g["microbatches"], g["t_f"], g["t_b"], g["t_w"]
        _, _, line = run("zb_h1", p, m, 1, tf, tb, tw)
        idle = (p - 1) * (tf + tb - tw)
        busy = m * (tf + tb + tw)
        steps = (
            Step("Idle per rank", "(p − 1)(t_f + t_b − t_w)", f"({p} - 1) × ({tf:g} + {tb:g} - "
                                                              f"{tw:g})", idle, "time units"),
            Step("Busy per rank", "m(t_f + t_b + t_w)", f"{m} × ({tf:g} + {tb:g} + {tw:g})",
                 busy, "time units"),
            Step("Idle share (as simulated)", "idle / (idle + busy)",
                 f"{num(idle)} / ({num(idle)} + {num(busy)})", line.bubble_fraction,
                 "fraction"),
        )
        plain = (p - 1) * (tf + tb + tw) / ((p - 1) * (tf + tb + tw) + busy)
        return Worked(line.bubble_fraction, steps, (
            Mistake(plain, "That is 1F1B's bubble: ZB-H1's late W passes fill t_w of each "
                           "bubble slot, (p − 1)(t_f + t_b − t_w)."),
            Mistake(idle / busy, "Divide by the whole step (idle + busy), not the busy time."),
        ))

    def scene(g):
        return _scene(g, "zb_h1", t_f=g["t_f"], t_b=g["t_b"], t_w=g["t_w"])


@exercise("pipeline-first-stage-activations", chapter=7, scene="pipeline", kind="number",
          unit="bytes", title="Activation memory of the first pipeline stage",
          source="Korthikanti et al. 2022 §4.2.3: the first stage holds L layers' worth under "
                 "1F1B; interleaved × (1 + (p−1)/(p·v))",
          ranges={"layers": (6, 128), "stages": (2, 16), "per_layer_mib": (40, 3000),
                  "schedule": ("1f1b", "interleaved"), "chunks": (1, 4)})
class FirstStageActivations:
    def draw(d):
        p = d.choice((2, 4, 8, 16))
        schedule = d.choice(("1f1b", "interleaved"))
        return {"layers": p * d.integer(3, 8), "stages": p, "schedule": schedule,
                "chunks": d.choice((2, 4)) if schedule == "interleaved" else 1,
                "per_layer_mib": float(d.choice((48, 102, 312, 342, 552, 1024, 2736)))}

    def prompt(g):
        chunks = (f" with v = {g['chunks']} chunks per rank" if g["schedule"] == "interleaved"
                  else "")
        return (f"A model of L = {g['layers']} layers is pipelined over p = {g['stages']} "
                f"stages with {WORDS[g['schedule']]}{chunks}, enough micro-batches to fill "
                f"it. One layer keeps {g['per_layer_mib']:g} MiB (2²⁰ bytes) of activations "
                f"per micro-batch. How many bytes of activations does the first stage hold at "
                f"its peak?")

    def solve(g):
        L, p, v, a = g["layers"], g["stages"], g["chunks"], g["per_layer_mib"] * 2**20
        in_flight = activations.pipeline_in_flight(p, v)
        held = in_flight * (L / p) * a
        steps = (
            Step("Layers per stage", "L/p", f"{L} / {p}", L / p, "layers"),
            Step("Micro-batches of them in flight", "p" + (" · (1 + (p−1)/(p·v))" if v > 1 else ""),
                 f"{p}" + (f" × (1 + ({p} - 1) / ({p} × {v}))" if v > 1 else ""), in_flight, ""),
            Step("Activations held", "in flight × L/p × per layer",
                 f"{num(in_flight)} × {num(L / p)} × {num(a)}", held, "bytes"),
        )
        return Worked(held, steps, (
            Mistake((L / p) * a, "The first stage holds p micro-batches in flight under 1F1B, "
                                 "not one: L layers' worth in all."),
            Mistake(L * a, "Interleaving adds (p − 1)/(p·v) more in flight on the first stage."
                    if v > 1 else "Right idea; recheck the units (MiB = 2²⁰ bytes)."),
        ))

    def scene(g):
        return {"schedule": SCHEDULES[g["schedule"]], "stages": g["stages"],
                "microbatches": 2 * g["stages"],
                "chunks": g["chunks"] if g["schedule"] == "interleaved" else None}
