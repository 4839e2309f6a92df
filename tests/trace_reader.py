"""An independent reader of Chrome Trace Event JSON (the Trace Event Format, Google 2016, as
ui.perfetto.dev and chrome://tracing read it): written from the format's description, sharing no
code with app/export/trace.py. It checks what a viewer relies on and returns the complete events
by (pid, tid)."""

from __future__ import annotations

import json
from collections import defaultdict


def read(body: bytes | str | dict) -> dict[tuple[int, int], list[dict]]:
    doc = json.loads(body) if not isinstance(body, dict) else body
    assert isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list), "no traceEvents"
    assert doc.get("displayTimeUnit") in ("ms", "ns")
    lanes: dict[tuple[int, int], list[dict]] = defaultdict(list)
    names: dict[tuple, str] = {}
    for e in doc["traceEvents"]:
        assert isinstance(e.get("name"), str) and e["name"], e
        assert isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int), e
        if e["ph"] == "M":                              # metadata: names a process or thread
            assert e["name"] in ("process_name", "thread_name", "process_sort_index",
                                 "thread_sort_index"), e
            names[(e["name"], e["pid"], e["tid"])] = str(e["args"])
            continue
        assert e["ph"] == "X", e                        # complete events only
        for key in ("ts", "dur"):
            assert isinstance(e[key], (int, float)) and e[key] >= 0, e
        if "args" in e:
            assert isinstance(e["args"], dict)
        lanes[(e["pid"], e["tid"])].append(e)
    for (pid, tid), events in lanes.items():
        assert ("process_name", pid, 0) in names, f"process {pid} has no name"
        assert ("thread_name", pid, tid) in names, f"thread {pid}/{tid} has no name"
        starts = [e["ts"] for e in events]
        assert starts == sorted(starts), f"times run backwards on {pid}/{tid}"
        for a, b in zip(events, events[1:]):           # one thread does one thing at a time
            assert b["ts"] >= a["ts"] + a["dur"] - 1e-3, (a, b)
    return dict(lanes)
