"""deploy/nginx.conf in front of the app (issue 29, item 4): nginx on loopback (bench/proxy.py:
free ports, its prefix, temp and cache folders in a temp folder of its own, stopped by its pid)
in front of the live server. A repeat view is a cache HIT with the same bytes, each representation (page,
fragment, gzip or not) is its own entry, a changed query is a MISS, a browser's tag is answered
304 by nginx, and real runs — jobs, their status, reports — pass through uncached."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest

from bench.proxy import nginx, nginx_binary

pytestmark = pytest.mark.skipif(nginx_binary() is None,
                                reason="nginx is not installed (make test installs it)")


@pytest.fixture(scope="module")
def proxy(live_server):
    with nginx(urlsplit(live_server).port) as base:
        yield base


def get(base: str, path: str, **headers) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(base + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def stored(base: str, path: str, **headers) -> None:
    """Wait until nginx has stored the answer it just passed on: it sends the last bytes to the
    client before it moves the entry into its cache, so on a loaded machine a request that comes
    at once can still miss (CI saw it once in five thousand tests)."""
    for _ in range(40):
        _, again, _ = get(base, path, **headers)
        if again["x-cache-status"] == "HIT":
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} {headers}: never stored")


def post(base: str, path: str, body: bytes = b"") -> tuple[int, dict, bytes]:
    request = urllib.request.Request(base + path, data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


@pytest.mark.parametrize("path,headers", [
    ("/pipeline?stages=5&microbatches=7", {}),
    ("/pipeline?stages=5&microbatches=7", {"HX-Request": "true"}),
    ("/pipeline?stages=5&microbatches=7", {"HX-Request": "true", "Accept-Encoding": "gzip"}),
    ("/api/zero?dp=5", {}),
    ("/svg/collective?world=5&frame=2", {}),
    ("/embed/moe?experts=16", {}),
])
def test_a_repeat_view_is_a_cache_hit(proxy, path, headers):
    status, first, body = get(proxy, path, **headers)
    assert status == 200 and first["x-cache-status"] == "MISS", first
    stored(proxy, path, **headers)
    status, again, same = get(proxy, path, **headers)
    assert status == 200 and again["x-cache-status"] == "HIT", again
    assert same == body and again["etag"] == first["etag"]
    assert again["cache-control"].startswith("public, max-age=")
    # the browser's own copy: nginx answers its tag
    status, _, empty = get(proxy, path, **{**headers, "If-None-Match": first["etag"]})
    assert status == 304 and empty == b""


def test_each_representation_and_query_is_its_own_entry(proxy):
    path = "/collective?world=7&count=14"
    _, page, page_body = get(proxy, path)
    _, fragment, fragment_body = get(proxy, path, **{"HX-Request": "true"})
    assert page["x-cache-status"] == fragment["x-cache-status"] == "MISS"
    assert b"<html" in page_body and b"<html" not in fragment_body
    _, zipped, zipped_body = get(proxy, path, **{"HX-Request": "true", "Accept-Encoding": "gzip, br"})
    assert zipped["x-cache-status"] == "MISS" and zipped["content-encoding"] == "gzip"
    stored(proxy, path, **{"HX-Request": "true", "Accept-Encoding": "gzip, br"})
    _, other, _ = get(proxy, path, **{"HX-Request": "true", "Accept-Encoding": "deflate, gzip"})
    assert other["x-cache-status"] == "HIT"  # any way of asking for gzip: one entry
    _, changed, changed_body = get(proxy, "/collective?world=7&count=21", **{"HX-Request": "true"})
    assert changed["x-cache-status"] == "MISS" and changed_body != fragment_body


def test_jobs_reports_and_uploads_pass_through_uncached(proxy):
    job = "/api/verify/collective?world=99"  # rejected by the app (422), every time
    for _ in range(2):
        status, headers, body = post(proxy, job)
        assert status == 422 and "x-cache-status" not in headers
        assert headers["cache-control"] == "no-store"
    status, headers, body = post(proxy, "/api/verify/collective/report?world=2&count=4",
                                 json.dumps({"argv": []}).encode())
    assert status == 422 and b"digest" in body and "x-cache-status" not in headers
    for _ in range(2):
        status, headers, _ = get(proxy, "/api/verify/jobs/nope")
        assert status == 404 and "x-cache-status" not in headers
        assert headers["cache-control"] == "no-store"
