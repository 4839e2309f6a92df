"""Hashes of what every scene answers over a few thousand states: proof that a refactor changed
no output, byte for byte.

    .venv/bin/python -m bench.state_hashes --out before.json         # record (at the branch point)
    .venv/bin/python -m bench.state_hashes --compare before.json     # after each step

A state is a query of one scene. For each scene the states are its defaults; every field at each
of its candidate values alone (a Literal's choices, a bool's two, a number's bounds, a quarter
of its upper bound, the slider's bounds: :func:`bench.heaviest.candidates`, plus odd sizes
such as 3, 5 and 7 within the bounds); the heaviest states the bench knows
(:data:`bench.heaviest.KNOWN`, :data:`bench.run.HEAVIEST`); and seeded random combinations of
two to four such values, until ``--per-scene`` of them are accepted. A few refused
combinations are kept too (their 422 answers are outputs as well).

For every accepted state these outputs are hashed (SHA-256 of status and body):
``/api/<slug>`` (the JSON), the page's stage fragment (``HX-Request``) at the first and the last
frame, ``/embed/<slug>``, and ``/svg/<slug>?frame=k`` for every frame k — the standalone file
that the exports (GIF, PDF, PPTX, PNG, the handout) are made of. The defaults' full page is
hashed too. A refused state: its ``/api`` 422 and its page fragment.

``--compare`` requests exactly the URLs recorded in the file (not a fresh enumeration, so it
compares like with like even when the params models have changed since) and reports every
output whose hash differs, with the first differing characters. Exit status 1 when any does.

Not a CI test: decks change legitimately; this is a tool to run before and after a refactor that
must not change them (docs/structure.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from urllib.parse import urlencode

ODD = (3, 5, 7, 12, 33)
"""Odd and non-dividing sizes tried for every integer field within its bounds."""
REFUSED_PER_SCENE = 6
"""Refused random combinations kept per scene (their 422 answers are hashed)."""
FRAGMENT = {"HX-Request": "true"}


def _query(state: dict) -> str:
    return urlencode({k: (str(v).lower() if isinstance(v, bool) else v)
                      for k, v in sorted(state.items())})


def _accepted(scene, state: dict):
    from pydantic import ValidationError
    try:
        return scene.params(**state)
    except (ValidationError, ValueError, TypeError):
        return None


def candidates(scene) -> dict[str, list]:
    """Each field's values to try: bench.heaviest's extremes and choices, plus odd integers."""
    from bench.heaviest import candidates as extremes
    options = extremes(scene.params)
    for name, values in options.items():
        info = scene.params.model_fields[name]
        if info.annotation is int and values:
            low, high = min(values), max(values)
            values += [v for v in ODD if low < v < high and v not in values]
    return options


def states(scene, per_scene: int, seed: int = 7) -> tuple[list[dict], list[dict]]:
    """(accepted, refused) states of ``scene``, in a fixed order for a fixed ``seed``."""
    from bench.heaviest import KNOWN
    from bench.run import HEAVIEST
    from urllib.parse import parse_qsl
    options = candidates(scene)
    accepted: dict[str, dict] = {}
    refused: dict[str, dict] = {}

    def offer(state: dict) -> None:
        key = _query(state)
        if key in accepted or key in refused:
            return
        if _accepted(scene, state) is not None:
            accepted[key] = state
        elif len(refused) < REFUSED_PER_SCENE:
            refused[key] = state

    offer({})
    for state in KNOWN.get(scene.slug, []):
        offer(dict(state))
    if scene.slug in HEAVIEST:
        offer(dict(parse_qsl(HEAVIEST[scene.slug])))
    for name, values in options.items():
        for value in values:
            offer({name: value})
    rng = random.Random(f"{seed}-{scene.slug}")
    names = sorted(options)
    singles = len(accepted)
    for _ in range(per_scene * 20):
        if len(accepted) - singles >= per_scene or not names:
            break
        chosen = rng.sample(names, min(len(names), rng.choice((2, 3, 4))))
        offer({name: rng.choice(options[name]) for name in chosen})
    return list(accepted.values()), list(refused.values())


def urls(scene, state: dict, frames: int) -> list[tuple[str, bool]]:
    """(url, fragment?) of every output of one accepted state with ``frames`` frames."""
    q = _query(state)
    sep = "&" if q else ""
    slug = scene.slug
    out = [(f"/api/{slug}?{q}", False), (f"/{slug}?{q}", True),
           (f"/{slug}?{q}{sep}frame={frames - 1}", True), (f"/embed/{slug}?{q}", False)]
    out += [(f"/svg/{slug}?{q}{sep}frame={k}", False) for k in range(frames)]
    if not state:
        out.append((f"/{slug}", False))
    return out


def _digest(response) -> str:
    body = response.content
    return f"{response.status_code}:{len(body)}:{hashlib.sha256(body).hexdigest()[:20]}"


def _client():
    from fastapi.testclient import TestClient
    from app.jobs.runner import JobRunner
    from app.main import create_app
    runner = JobRunner(concurrency=1, queue_limit=8, timeout_s=90, max_world=8)
    return TestClient(create_app(runner)), runner


def _key(url: str, fragment: bool) -> str:
    return ("HX " if fragment else "") + url


def _record_scene(args: tuple[str, int]) -> tuple[str, list[str], dict[str, str], int, int]:
    """One scene's states hashed (in a worker process)."""
    slug, per_scene = args
    from app.main import SCENES
    from app.scene import trace_of
    scene = next(s for s in SCENES if s.slug == slug)
    accepted, refused = states(scene, per_scene)
    client, runner = _client()
    out: dict[str, str] = {}
    with client:
        for state in accepted:
            frames = scene.frame_count(trace_of(scene, _accepted(scene, state)))
            for url, fragment in urls(scene, state, frames):
                out[_key(url, fragment)] = _digest(
                    client.get(url, headers=FRAGMENT if fragment else {}))
        for state in refused:
            q = _query(state)
            for url, fragment in ((f"/api/{slug}?{q}", False), (f"/{slug}?{q}", True)):
                out[_key(url, fragment)] = _digest(
                    client.get(url, headers=FRAGMENT if fragment else {}))
    runner.shutdown()
    return slug, [_query(s) for s in accepted + refused], out, len(accepted), len(refused)


def _compare_chunk(expected: list[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """(key, recorded digest) → {key: (digest now, the body's start)} for the keys whose
    digest differs (a worker; bodies of identical outputs are not kept)."""
    client, runner = _client()
    out = {}
    with client:
        for key, digest in expected:
            fragment = key.startswith("HX ")
            url = key[3:] if fragment else key
            response = client.get(url, headers=FRAGMENT if fragment else {})
            now = _digest(response)
            if now != digest:
                out[key] = (now, response.text[:400])
    runner.shutdown()
    return out


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def record(path: str, per_scene: int, only: list[str], jobs: int) -> None:
    from app.main import SCENES
    slugs = [s.slug for s in SCENES if not only or s.slug in only]
    start = time.monotonic()
    result = {"tool": "bench.state_hashes", "commit": _commit(), "per_scene": per_scene,
              "scenes": {}, "outputs": {}}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for slug, queries, outputs, ok, bad in pool.map(_record_scene,
                                                       [(s, per_scene) for s in slugs]):
            result["scenes"][slug] = {"accepted": ok, "refused": bad, "outputs": len(outputs)}
            result["outputs"].update(outputs)
            print(f"{slug:18} {ok:5} states accepted, {bad:2} refused, {len(outputs):6} outputs",
                  flush=True)
    states_total = sum(v["accepted"] + v["refused"] for v in result["scenes"].values())
    print(f"{states_total} states, {len(result['outputs'])} outputs hashed in "
          f"{time.monotonic() - start:.0f} s → {path}")
    with open(path, "w") as f:
        json.dump(result, f, indent=0, sort_keys=True)


def _first_difference(a: str, b: str) -> int:
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return k


def _state_of(key: str) -> str:
    """The state an output belongs to: its scene and query without ``frame`` (the outputs of
    one state go to one worker, which simulates the state once)."""
    url = key.removeprefix("HX ")
    path, _, query = url.partition("?")
    slug = path.rsplit("/", 1)[-1]
    return slug + "?" + "&".join(p for p in query.split("&") if not p.startswith("frame="))


def _chunks(keys: list[str], count: int) -> list[list[str]]:
    by_state: dict[str, list[str]] = {}
    for key in keys:
        by_state.setdefault(_state_of(key), []).append(key)
    chunks: list[list[str]] = [[] for _ in range(count)]
    for i, group in enumerate(by_state.values()):
        chunks[i % count] += group
    return [c for c in chunks if c]


def compare(path: str, jobs: int, only: list[str]) -> int:
    with open(path) as f:
        recorded = json.load(f)
    keys = sorted(k for k in recorded["outputs"]
                  if not only or any(f"/{s}" in k.split("?")[0] for s in only))
    start = time.monotonic()
    chunks = [[(k, recorded["outputs"][k]) for k in chunk] for chunk in _chunks(keys, jobs * 2)]
    now: dict[str, tuple[str, str]] = {}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for part in pool.map(_compare_chunk, chunks):
            now.update(part)
    differ = sorted(now)
    states_total = sum(v["accepted"] + v["refused"] for s, v in recorded["scenes"].items()
                       if not only or s in only)
    print(f"{states_total} states, {len(keys)} outputs compared with {path} "
          f"(recorded at {recorded.get('commit', '?')[:10]}) in {time.monotonic() - start:.0f} s:"
          f" {len(keys) - len(differ)} identical, {len(differ)} differ")
    for key in differ[:20]:
        digest, text = now[key]
        print(f"  {key}\n    was {recorded['outputs'][key]}  now {digest}")
        print(f"    now: …{text[:200]!r}")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.state_hashes",
                                     description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", help="record the hashes into this JSON file")
    mode.add_argument("--compare", help="compare with the hashes recorded in this JSON file")
    parser.add_argument("--per-scene", type=int, default=150,
                        help="accepted random combinations per scene (default 150)")
    parser.add_argument("--scenes", default="", help="comma-separated slugs (default: every scene)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="worker processes (default 2)")
    args = parser.parse_args(argv)
    only = [s for s in args.scenes.split(",") if s]
    if args.out:
        record(args.out, args.per_scene, only, args.jobs)
        return 0
    return compare(args.compare, args.jobs, only)


if __name__ == "__main__":
    sys.exit(main())
