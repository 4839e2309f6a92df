"""The lecture hall (issue 29, item 5): a class on one server, measured on loopback.

    .venv/bin/python -m bench.hall [--students 32 100] [--record]

A recorded visit (bench/hall_visit.json, made by ``--record`` from a real Chromium visit of
/pipeline: the page, its assets, the states it fetched at rest, a look at the track, a drag of
the micro-batches slider, a chip) is replayed by each simulated student, an async HTTP client
(aiohttp, six connections like a browser): the page and assets at their recorded times, the
states fetched ahead one at a time as stage.js fetches them (a 204 asked again after a doubling
wait), the person's own moves when they were made. The class opens the lecturer's link within
five seconds; until a student's first move of its own the states are those everyone shares (the
lecturer's page and what it fetches at rest); from then on each student explores a state of its
own (its own forward time ``t_f``: every state new to the server). Meanwhile a lecturer's client
moves to a new state every second and measures how long each takes.

Budgets (DESIGN.md, on this 2-core machine with ``make run``'s defaults): the lecturer's
new-state p95 ≤ 250 ms with 32 students and ≤ 500 ms with 100; repeat views (a state someone
asked for before) p95 ≤ 20 ms; no 5xx. The server's resident memory (every worker) is reported.
The same class is then measured behind nginx (deploy/nginx.conf, bench/proxy.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import psutil

from app.jobs.procs import free_port, kill_tree
from bench.http_load import percentile
from bench.servers import wait_until_up

ROOT = Path(__file__).resolve().parent.parent
VISIT = Path(__file__).with_name("hall_visit.json")
SCENE = "pipeline"
OWN = "t_f"
"""The parameter that makes a student's states its own (the forward time: every value a new
state, valid wherever the recorded moves go)."""
SPREAD_S = 5.0
"""The class opens the link within this many seconds."""
LECTURER_EVERY_S = 1.0
BUDGETS = {32: 250, 100: 500}
REPEAT_P95_MS = 20


# -- replaying it -----------------------------------------------------------------------------

@dataclass
class Tally:
    lecturer_ms: list = field(default_factory=list)
    repeat_ms: list = field(default_factory=list)
    new_ms: list = field(default_factory=list)
    statuses: dict = field(default_factory=dict)
    seen: set = field(default_factory=set)
    errors: list = field(default_factory=list)
    resets: int = 0

    def count(self, status: int) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1


def own_url(url: str, value: float) -> str:
    """``url`` with the student's own ``t_f``."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != OWN]
    return f"{parts.path}?{urlencode([*query, (OWN, f'{value:.4f}')])}"


async def fetch(session, base: str, url: str, headers: dict, tally: Tally) -> int:
    import aiohttp
    key = (url, headers.get("HX-Request", ""))
    repeat = key in tally.seen
    t0 = time.perf_counter()
    for attempt in (1, 2):
        try:
            async with session.get(base + url, headers=headers) as response:
                await response.read()
                status = response.status
            break
        except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as error:
            # a keep-alive connection the server closed as it was reused: a browser asks again
            tally.resets += 1
            if attempt == 2:
                tally.errors.append(f"{type(error).__name__}: {error}")
                return 0
    ms = (time.perf_counter() - t0) * 1000
    tally.count(status)
    if status == 200 and not url.startswith("/static/"):
        (tally.repeat_ms if repeat else tally.new_ms).append(ms)
        tally.seen.add(key)
    return status


async def student(base: str, visit: dict, index: int, tally: Tally, rng: random.Random) -> None:
    import aiohttp
    await asyncio.sleep(rng.uniform(0, SPREAD_S))
    mine = 1.0 + (index + 1) * 1e-4  # this student's t_f, once it explores on its own
    own = False
    start = time.monotonic()
    queue: asyncio.Queue = asyncio.Queue()
    # (the bodies are read as they came, gzipped: the load generator shares the cores it measures)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit_per_host=6),
                                     auto_decompress=False) as session:
        async def ahead_one_at_a_time():
            while True:
                url, tier = await queue.get()
                if url is None:
                    return
                wait = 0.15
                for _ in range(6):  # stage.js: a 204 is asked again, each time after twice as long
                    status = await fetch(session, base, url, {"HX-Request": "true",
                                                              "X-Fetch-Ahead": tier}, tally)
                    if status != 204 or tier != "rest":
                        break
                    await asyncio.sleep(wait)
                    wait *= 2
        worker = asyncio.create_task(ahead_one_at_a_time())
        pending, move = [], None
        for event in visit["events"]:
            delay = start + event["t_ms"] / 1000 - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            kind, url = event["kind"], event["url"]
            if kind == "move":
                own = True
            if own and kind in ("move", "ahead"):
                url = own_url(url, mine)
            if kind == "ahead":
                queue.put_nowait((url, event["tier"]))
            elif kind == "move":
                if move is not None and not move.done():
                    move.cancel()  # htmx aborts a move's request when the next comes
                move = asyncio.create_task(fetch(session, base, url, {"HX-Request": "true"},
                                                 tally))
                pending.append(move)
            elif kind in ("page", "asset"):
                pending.append(asyncio.create_task(fetch(session, base, url, {}, tally)))
        queue.put_nowait((None, None))
        await asyncio.gather(worker, *pending, return_exceptions=True)


async def lecturer(base: str, tally: Tally, until: float) -> None:
    import aiohttp
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        await asyncio.sleep(SPREAD_S / 2)
        k = 0
        while time.monotonic() < until:
            k += 1
            url = f"/{SCENE}?stages={4 + k % 5}&microbatches={8 + k % 9}&t_f={3 + k * 1e-4:.4f}"
            t0 = time.perf_counter()
            async with session.get(base + url, headers={"HX-Request": "true"}) as response:
                await response.read()
                tally.count(response.status)
            tally.lecturer_ms.append((time.perf_counter() - t0) * 1000)
            await asyncio.sleep(LECTURER_EVERY_S)


async def memory(pids: list[int], peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        total = 0
        for pid in pids:
            try:
                root = psutil.Process(pid)
                total += sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
            except psutil.Error:
                pass
        peak[0] = max(peak[0], total)
        await asyncio.sleep(0.5)


async def a_class(base: str, visit: dict, students: int, server_pids: list[int]) -> dict:
    tally, peak, stop = Tally(), [0], asyncio.Event()
    rng = random.Random(students)
    length = max(e["t_ms"] for e in visit["events"]) / 1000 + SPREAD_S
    sampler = asyncio.create_task(memory(server_pids, peak, stop))
    t0 = time.monotonic()
    await asyncio.gather(lecturer(base, tally, t0 + length),
                         *(student(base, visit, i, tally, rng) for i in range(students)))
    stop.set()
    await sampler
    p95 = lambda xs: percentile(xs, 95) if xs else None  # noqa: E731
    return {"students": students, "seconds": round(time.monotonic() - t0, 1),
            "lecturer_p50_ms": percentile(tally.lecturer_ms, 50) if tally.lecturer_ms else None,
            "lecturer_p95_ms": p95(tally.lecturer_ms), "lecturer_moves": len(tally.lecturer_ms),
            "repeat_p95_ms": p95(tally.repeat_ms), "repeats": len(tally.repeat_ms),
            "new_p95_ms": p95(tally.new_ms), "new_states": len(tally.new_ms),
            "statuses": {str(k): v for k, v in sorted(tally.statuses.items())},
            "server_errors": sum(v for k, v in tally.statuses.items() if k >= 500),
            "connection_resets": tally.resets, "failed": len(tally.errors),
            "errors": tally.errors[:5], "rss_mb": round(peak[0] / 2**20)}


def run_class(base: str, visit: dict, students: int, pids: list[int]) -> dict:
    """One class, on uvloop where it is installed (the load generator costs the cores less)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(a_class(base, visit, students, pids))
    return uvloop.run(a_class(base, visit, students, pids))


@contextmanager
def make_run():
    """The server as ``make run`` starts it (``shardscope serve``: a worker per core), with a
    data directory of its own."""
    port = free_port()
    data = tempfile.mkdtemp(prefix="shardscope-hall-")
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
                            cwd=ROOT, start_new_session=True, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "SHARDSCOPE_DATA": data})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(proc, base + "/", 60, "shardscope serve")
        yield base, proc.pid
    finally:
        kill_tree(proc.pid)
        shutil.rmtree(data, ignore_errors=True)


def measure(sizes=(32, 100), proxied: bool = True) -> dict:
    """Each class size on a fresh server, then behind nginx (a fresh server and cache)."""
    from bench.proxy import nginx, nginx_binary
    visit = json.loads(VISIT.read_text())
    out: dict = {"visit": {"recorded": visit["recorded"], "requests": len(visit["events"]),
                           "ahead": sum(e["kind"] == "ahead" for e in visit["events"]),
                           "moves": sum(e["kind"] == "move" for e in visit["events"])},
                 "workers": os.cpu_count(), "direct": {}, "nginx": {}}
    for students in sizes:
        with make_run() as (base, pid):
            out["direct"][students] = run_class(base, visit, students, [pid])
        if proxied and nginx_binary():
            with make_run() as (base, pid), nginx(urlsplit(base).port) as front:
                out["nginx"][students] = run_class(front, visit, students, [pid])
    return out


def rows(r: dict, mark) -> list[str]:
    """The bench table's rows (bench/run.py)."""
    out = []
    for where, label in (("direct", "`make run`"), ("nginx", "behind nginx")):
        for students, m in sorted(r.get(where, {}).items(), key=lambda kv: int(kv[0])):
            budget = BUDGETS.get(int(students), 500)
            ok = (m["lecturer_p95_ms"] is not None and m["lecturer_p95_ms"] <= budget
                  and (m["repeat_p95_ms"] or 0) <= REPEAT_P95_MS and not m["server_errors"]
                  and not m.get("failed"))
            out.append(f"| a lecture hall, {students} students on `/{SCENE}` ({label}, "
                       f"{r.get('workers')} workers): lecturer's new state p50 / p95, repeat "
                       f"views p95, 5xx and failed requests, server memory | p95 ≤ {budget} ms, "
                       f"≤ {REPEAT_P95_MS} ms, 0 | {m['lecturer_p50_ms']:.0f} / "
                       f"{m['lecturer_p95_ms']:.0f} ms, {m['repeat_p95_ms'] or 0:.1f} ms "
                       f"({m['repeats']} repeats, {m['new_states']} new states), "
                       f"{m['server_errors']} and {m.get('failed', 0)}, {m['rss_mb']} MB "
                       f"{mark(ok)} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, nargs="+", default=[32, 100])
    parser.add_argument("--record", action="store_true",
                        help="record a real Chromium visit into bench/hall_visit.json first")
    parser.add_argument("--no-proxy", action="store_true", help="skip the runs behind nginx")
    args = parser.parse_args()
    if args.record:
        from bench.hall_record import record
        with make_run() as (base, _):
            visit = record(base)
        print(f"recorded {len(visit['events'])} requests into {VISIT}", file=sys.stderr)
    results = measure(tuple(args.students), proxied=not args.no_proxy)
    print(json.dumps(results, indent=1))
    print("\n".join(rows(results, lambda ok: "✓" if ok else "✗ over budget")))


if __name__ == "__main__":
    main()
