"""Latency with one client (keep-alive) and throughput under 32 connections (wrk)."""

from __future__ import annotations

import http.client
import re
import shutil
import subprocess
import time
from urllib.parse import urlsplit


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def latency_ms(url: str, requests: int = 1000, warmup: int = 50, method: str = "GET",
               body: bytes | None = None, headers: dict | None = None) -> dict:
    """p50 / p99 of sequential requests (GETs, or ``method`` with ``body``) over one keep-alive
    connection, in milliseconds."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    times = []
    for i in range(warmup + requests):
        t0 = time.perf_counter()
        conn.request(method, path, body, headers or {})
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{url} answered {response.status}")
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1000)
    conn.close()
    return {"p50_ms": percentile(times, 50), "p99_ms": percentile(times, 99), "n": requests}


def once_ms(url: str) -> float:
    """One request, cold (its parameters not seen before), in milliseconds."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    t0 = time.perf_counter()
    conn.request("GET", parts.path + f"?{parts.query}")
    response = conn.getresponse()
    response.read()
    elapsed = (time.perf_counter() - t0) * 1000
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"{url} answered {response.status}")
    return elapsed


def wrk_rps(url: str, seconds: int = 8, connections: int = 32) -> float:
    """Requests per second that wrk sustains against ``url`` (2 threads)."""
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed (apt-get install wrk)")
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", url],
                         capture_output=True, text=True, timeout=seconds + 30).stdout
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if not match or errors:
        raise RuntimeError(f"wrk failed on {url}:\n{out}")
    return float(match.group(1))
