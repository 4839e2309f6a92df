"""The heaviest accepted states of every scene: a bounded greedy search over each params
model's extremes, then each found state's page, /api and /svg measured for time and size.

A ``make bench`` row (bench/run.py) and the source of tests/api/test_heaviest_states.py's
table (``python -m bench.heaviest`` prints the five heaviest states per scene; paste them into
FOUND when a scene changes). DESIGN budgets: every accepted state < 500 ms, no response over
5 MB.

Search: start at the defaults; each round tries every field at each of its candidate values
(a Literal's choices, a bool's two, a number's bounds, a quarter of its upper bound and the
slider's bounds), keeps the single change that makes the trace's JSON largest, and goes on from
there for ``rounds`` rounds. Every state tried is remembered; the five largest are measured.
"""

from __future__ import annotations

import json
import sys
import time
import typing
from urllib.parse import urlencode

import annotated_types as at
from pydantic import ValidationError

from app.caches import DECKS, JSON, PAGES, TRACES
from app.params import Control
from app.scene import Scene, json_of

CACHES = (TRACES, DECKS, PAGES, JSON)
SKIP_FIELDS = {"seed", "root", "value"}
"""Fields that choose inputs, not sizes."""


def _number_candidates(info) -> list:
    low = high = None
    bounds = None
    for m in info.metadata:
        if isinstance(m, (at.Ge, at.Gt)):
            low = getattr(m, "ge", None) if isinstance(m, at.Ge) else m.gt
        if isinstance(m, (at.Le, at.Lt)):
            high = getattr(m, "le", None) if isinstance(m, at.Le) else m.lt
        if isinstance(m, Control) and m.bounds and m.kind != "log2":
            bounds = m.bounds
    values = [v for v in (low, high, high / 4 if high else None) if v is not None]
    if bounds:
        values += list(bounds)
    integral = info.annotation is int
    out = []
    for v in values:
        v = int(v) if integral else float(v)
        if isinstance(low, (int, float)) and isinstance(info.metadata[0] if info.metadata else None, at.Gt) and v <= low:
            continue
        out.append(v)
    return sorted(set(out))


def candidates(model) -> dict[str, list]:
    out = {}
    for name, info in model.model_fields.items():
        if name in SKIP_FIELDS:
            continue
        annotation = info.annotation
        if typing.get_origin(annotation) is typing.Literal:
            out[name] = list(typing.get_args(annotation))
        elif annotation is bool:
            out[name] = [False, True]
        elif annotation in (int, float):
            out[name] = _number_candidates(info)
    return out


def _size(scene: Scene, query: dict) -> int | None:
    try:
        params = scene.params(**query)
    except (ValidationError, ValueError, TypeError):
        return None
    try:
        return len(json_of(scene, params))
    except Exception:   # a state the model accepts but the simulation cannot: reported below
        return -1


KNOWN: dict[str, list[dict]] = {
    # states a greedy walk from the defaults does not reach (they need three changes at once):
    # the issues' heaviest, and their neighbours
    "collective": [{"op": "all_reduce", "world": 64, "count": 128},
                   {"op": "all_to_all", "algorithm": "ring", "world": 64, "count": 128},
                   {"op": "all_gather", "algorithm": "ring", "world": 64, "count": 128}],
    "pipeline": [{"schedule": "zb_h1", "stages": 64, "microbatches": 1024},
                 {"schedule": "interleaved_1f1b", "stages": 64, "microbatches": 128,
                  "chunks": 8},
                 {"schedule": "dualpipev", "stages": 64, "microbatches": 512}],
    "moe": [{"tokens": 4096, "top_k": 4, "router_steps": 32}],
}
"""Seeds added to every search of their scene (each start of a walk as well)."""


def search(scene: Scene, rounds: int = 3) -> list[tuple[int, dict]]:
    """[(JSON bytes, query)] of every accepted state tried, largest first: a greedy walk from
    the defaults, and the KNOWN seeds."""
    options = candidates(scene.params)
    seen: dict[str, tuple[int, dict]] = {}
    for query in KNOWN.get(scene.slug, []):
        size = _size(scene, query)
        if size is not None:
            seen[json.dumps(query, sort_keys=True)] = (size, query)
    state: dict = {}
    for _ in range(rounds):
        best = None
        for name, values in options.items():
            for value in values:
                query = {**state, name: value}
                key = json.dumps(query, sort_keys=True)
                if key not in seen:
                    size = _size(scene, query)
                    if size is None:
                        continue
                    seen[key] = (size, query)
                if best is None or seen[key][0] > best[0]:
                    best = seen[key]
        if best is None or best[1] == state:
            break
        state = best[1]
    return sorted(seen.values(), key=lambda t: -t[0])


def distinct(found: list[tuple[int, dict]], top: int) -> list[dict]:
    """The ``top`` largest states, skipping one within 2 % of the size of a state already
    chosen (a cost parameter changes the JSON by a few bytes)."""
    out: list[tuple[int, dict]] = []
    for size, query in found:
        if all(abs(size - other) > 0.02 * other for other, _ in out):
            out.append((size, query))
        if len(out) == top:
            break
    return [query for _, query in out]


def measure(client, scene: Scene, query: dict) -> dict:
    """Cold-ish time (ms) and size (bytes) of the state's page, /api and /svg."""
    q = urlencode({k: str(v).lower() if isinstance(v, bool) else v for k, v in query.items()})
    out = {"query": q}
    for cache in CACHES:     # cold: nothing the search (or a previous request) computed
        cache.clear()
    for kind, path in (("page", f"/{scene.slug}?{q}"), ("api", f"/api/{scene.slug}?{q}"),
                       ("svg", f"/svg/{scene.slug}?{q}")):
        start = time.perf_counter()
        response = client.get(path)
        out[kind] = {"status": response.status_code, "ms": round((time.perf_counter() - start) * 1e3),
                     "bytes": len(response.content)}
    return out


def heaviest(scenes, top: int = 5, rounds: int = 3) -> dict[str, list[dict]]:
    from fastapi.testclient import TestClient
    from app.main import create_app
    results = {}
    with TestClient(create_app()) as client:
        for scene in scenes:
            found = distinct(search(scene, rounds), top)
            results[scene.slug] = [measure(client, scene, q) for q in found]
    return results


def rows(results: dict[str, list[dict]]) -> list[str]:
    """Markdown rows: scene, state, page / api / svg time and size."""
    out = []
    for slug, states in results.items():
        for s in states:
            cells = " · ".join(f"{k} {s[k]['ms']} ms {s[k]['bytes'] / 1e6:.2f} MB"
                               for k in ("page", "api", "svg"))
            worst = max(s[k]["bytes"] for k in ("page", "api", "svg"))
            slow = max(s[k]["ms"] for k in ("page", "api", "svg"))
            out.append(f"| heaviest state `/{slug}?{s['query']}` | < 500 ms, < 5 MB | {cells} "
                       f"{'✓' if worst < 5e6 and slow < 500 else '✗'} |")
    return out


if __name__ == "__main__":
    from app.main import SCENES
    only = sys.argv[1:]
    scenes = [s for s in SCENES if not only or s.slug in only]
    for scene in scenes:
        result = heaviest([scene])
        for s in result[scene.slug]:
            print(scene.slug, s["query"], {k: (s[k]["status"], s[k]["ms"], s[k]["bytes"])
                                           for k in ("page", "api", "svg")}, flush=True)
