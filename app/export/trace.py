"""Timelines as Chrome Trace Event JSON, for ui.perfetto.dev and chrome://tracing (the Trace
Event Format, Google 2016: ``{"traceEvents": [...], "displayTimeUnit": "ms"}``, complete events
``{"name", "ph": "X", "ts", "dur", "pid", "tid", "args"}`` with times in µs, and metadata
events ``"ph": "M"`` that name each process and thread).

One process per rank, one thread per lane (its compute, and each kind of communication), as
DESIGN.md's "Traces" contract says. :func:`chrome_trace` writes any list of
``{"rank", "lane", "kind", "start_s", "dur_s", …}`` events — the measured timeline of a
``/train`` job and the predicted ones — and :data:`TIMELINES` holds, for each scene that has a
timeline, how its trace becomes those events (``GET /export/<scene>.trace``).
"""

from __future__ import annotations

from collections.abc import Callable

LANE_ORDER = ("compute", "tp", "cp", "ep", "pp", "dp")
EXTRA = ("group", "microbatch", "stage", "bytes", "peer", "overlapped")


def _name(e: dict) -> str:
    if e["lane"] == "compute" and "microbatch" in e and e["kind"] in ("F", "B", "R"):
        return f"{e['kind']}{e['microbatch']}" + (f" stage {e['stage']}" if "stage" in e else "")
    return str(e.get("name") or e["kind"])


def chrome_trace(events: list[dict], process_name: Callable[[int], str] = "rank {}".format,
                 lanes: tuple[str, ...] = LANE_ORDER) -> dict:
    """The Trace Event JSON of ``events`` (seconds) — pid the rank, tid the lane's index."""
    order = list(lanes) + sorted({e["lane"] for e in events} - set(lanes))
    tid = {lane: k for k, lane in enumerate(order)}
    out, named = [], set()
    for e in events:
        pid, lane = int(e["rank"]), e["lane"]
        if pid not in named:
            named.add(pid)
            out.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                        "args": {"name": process_name(pid)}})
            out.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                        "args": {"sort_index": pid}})
        if (pid, lane) not in named:
            named.add((pid, lane))
            out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid[lane],
                        "args": {"name": lane}})
        args = {k: e[k] for k in EXTRA if k in e}
        out.append({"name": _name(e), "cat": lane, "ph": "X",
                    "ts": round(e["start_s"] * 1e6, 3), "dur": round(e["dur_s"] * 1e6, 3),
                    "pid": pid, "tid": tid[lane], "args": {"kind": e["kind"], **args}})
    return {"traceEvents": out, "displayTimeUnit": "ms"}


# --- each scene's predicted timeline as events -------------------------------------------------

def train_events(trace) -> list[dict]:
    return list(trace.events)


def pipeline_events(trace, unit_s: float = 1e-3) -> list[dict]:
    """The pipeline scene's passes (its time unit drawn as 1 ms)."""
    out = []
    for rank in trace.to_dict()["ranks"]:
        for a in rank["actions"]:
            out.append({"rank": rank["rank"], "lane": "compute", "kind": a["kind"],
                        "name": a["action"], "start_s": a["start"] * unit_s,
                        "dur_s": (a["end"] - a["start"]) * unit_s, "stage": a["stage"],
                        "microbatch": a["microbatch"]})
    return out


def data_parallel_events(trace) -> list[dict]:
    """The data-parallel step's lanes (every rank runs the same timeline: rank 0 stands for
    them; DataParallel's GPU lanes are ranks of their own)."""
    out = []
    for s in trace.timeline.spans:
        if s.end_us <= s.start_us:
            continue
        rank, lane = (int(s.lane.split()[1]), "compute") if s.lane.startswith("GPU ") else \
            (0, {"comm": "dp", "links": "dp"}.get(s.lane, s.lane))
        out.append({"rank": rank, "lane": lane, "kind": s.kind, "name": s.name,
                    "start_s": s.start_us * 1e-6, "dur_s": (s.end_us - s.start_us) * 1e-6})
    return out


def planner_events(trace) -> list[dict]:
    """The best mix's step: its pipeline (app.sim.pipeline with the mix's stages, micro-batches
    and schedule; one process per stage, every rank of a stage alike), its passes timed from the
    planner's budget (a micro-batch's compute and model-parallel communication, one third
    forward), then the exposed data-parallel communication and the optimizer."""
    from app.sim.pipeline.params import PipelineParams
    from app.sim.pipeline.simulate import simulate as pipeline
    best = trace.plan.best if hasattr(trace, "plan") else None
    if best is None:
        return []
    b = best.budget
    per_mb = (b["compute"] + b["tp"] + b["cp"] + b["ep"]) / max(1, best.microbatches)
    unit = 1e-6                                 # the pipeline scene's time unit, in seconds
    while 2 * per_mb / 3 / unit > 1000:         # (its pass times are at most 1000 units)
        unit *= 10
    schedule = best.schedule if best.schedule in ("gpipe", "1f1b", "interleaved_1f1b") else "1f1b"
    p = PipelineParams(schedule=schedule, stages=best.pp, microbatches=best.microbatches,
                       chunks=best.chunks if schedule == "interleaved_1f1b" else 1,
                       t_f=max(1e-3, per_mb / 3 / unit), t_b=max(1e-3, 2 * per_mb / 3 / unit),
                       t_w=0.0, t_comm=0.0)
    events = pipeline_events(pipeline(p), unit)
    end = max((e["start_s"] + e["dur_s"] for e in events), default=0.0)
    for stage in range(best.pp):
        t = end
        for lane, kind, seconds in (("dp", "dp", b["dp"]), ("compute", "optimizer",
                                                             b["optimizer"])):
            if seconds > 0:
                events.append({"rank": stage, "lane": lane, "kind": kind, "name": kind,
                               "start_s": t, "dur_s": seconds})
                t += seconds
    return events


TIMELINES: dict[str, tuple[Callable, str]] = {
    "train": (train_events, "rank {}"),
    "pipeline": (pipeline_events, "rank {}"),
    "data-parallel": (data_parallel_events, "rank {}"),
    "planner": (planner_events, "pipeline stage {} (its ranks alike)"),
}
"""slug → (trace → events, the name of a process)."""


def scene_trace(slug: str, trace) -> dict:
    events_of, name = TIMELINES[slug]
    return chrome_trace(events_of(trace), name.format)
