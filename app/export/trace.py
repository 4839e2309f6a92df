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
    """The Trace Event JSON of ``events`` (seconds): pid the rank, tid the lane. A thread does
    one thing at a time, so events of one lane that overlap (gradient buckets in flight
    together) go onto further threads of that lane, "dp · 2", "dp · 3" …"""
    by_lane: dict[tuple[int, str], list[dict]] = {}
    for e in events:
        by_lane.setdefault((int(e["rank"]), e["lane"]), []).append(e)
    order = {lane: k for k, lane in enumerate(lanes)}
    out, threads = [], {}
    for pid in sorted({pid for pid, _ in by_lane}):
        out.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                    "args": {"name": process_name(pid)}})
        out.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                    "args": {"sort_index": pid}})
        mine = sorted((lane for p, lane in by_lane if p == pid),
                      key=lambda lane: (order.get(lane, len(order)), lane))
        for lane in mine:
            ends: list[float] = []                     # when each of the lane's threads is free
            for e in sorted(by_lane[(pid, lane)], key=lambda e: e["start_s"]):
                k = next((i for i, end in enumerate(ends) if end <= e["start_s"] + 1e-12),
                         len(ends))
                if k == len(ends):
                    ends.append(0.0)
                ends[k] = e["start_s"] + e["dur_s"]
                name = lane if k == 0 else f"{lane} · {k + 1}"
                if (pid, name) not in threads:
                    threads[(pid, name)] = len([t for t in threads if t[0] == pid])
                    out.append({"name": "thread_name", "ph": "M", "pid": pid,
                                "tid": threads[(pid, name)], "args": {"name": name}})
                args = {k2: e[k2] for k2 in EXTRA if k2 in e}
                ts = round(e["start_s"] * 1e6, 3)        # µs; the end rounded alike, so that
                dur = round(round((e["start_s"] + e["dur_s"]) * 1e6, 3) - ts, 3)  # none overlap
                out.append({"name": _name(e), "cat": lane, "ph": "X", "ts": ts,
                            "dur": max(dur, 0.0), "pid": pid,
                            "tid": threads[(pid, name)], "args": {"kind": e["kind"], **args}})
    return {"traceEvents": out, "displayTimeUnit": "ms"}


# --- each scene's predicted timeline as events -------------------------------------------------

def train_events(trace) -> list[dict]:
    return list(trace.events)


def pipeline_events(trace, unit_s: float = 1e-3) -> list[dict]:
    """The pipeline scene's passes (its time unit drawn as 1 ms), read off its arrays."""
    from app.sim.pipeline.schedules import KINDS
    flat, line = trace.flat, trace.line
    stage, kind, mb = flat.stage.tolist(), flat.kind.tolist(), flat.microbatch.tolist()
    start, end = line.start.tolist(), line.end.tolist()
    out = []
    for r, (a, b) in enumerate(zip(flat.offsets[:-1].tolist(), flat.offsets[1:].tolist())):
        for k in range(a, b):
            out.append({"rank": r, "lane": "compute", "kind": KINDS[kind[k]],
                        "name": f"{stage[k]}{KINDS[kind[k]]}{mb[k]}", "start_s": start[k] * unit_s,
                        "dur_s": (end[k] - start[k]) * unit_s, "stage": stage[k],
                        "microbatch": mb[k]})
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
