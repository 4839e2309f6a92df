"""HTTP caching by the book (issue 29; DESIGN.md, "HTTP caching"; RFC 9110 §8.8 and §13, RFC 9111).

Every page, stage fragment, embed, ``/api``, ``/svg`` and ``/export`` answer is a pure function
of the app's version and its request: the path, the query and a few request headers that choose
the representation (htmx's ``HX-Request`` and ``HX-History-Restore-Request``, and whether the
answer is gzipped). A GET endpoint declares itself so with :func:`pure`; :class:`HttpCache`, one
ASGI middleware, then gives every 200 it sends

* a strong ``ETag``: the version (:func:`app_version`: a hash of the code, templates, static
  files, the libraries that shape an answer and the server's real-run settings) and a hash of
  the scheme, host, path, canonical query (pairs sorted by key, each key's values in their
  order: the last one wins when the params are read) and the declared headers' values, so a new
  version changes every tag and a changed query never matches an old one;
* ``Cache-Control: public, max-age=…`` (pages :data:`PAGE_MAX_AGE`, everything else
  :data:`ANSWER_MAX_AGE`) and a ``Vary`` that names the declared headers (and
  ``Accept-Encoding`` where the answer may be gzipped),

and answers a GET whose ``If-None-Match`` holds the tag with 304 **before anything is parsed,
simulated or rendered**: the tag is computed from the request alone. An answer asked for again
(another student's browser, the same state) is sent from :data:`app.caches.SENT` — the headers
and bytes sent the first time, gzip included — before routing, on the event loop. Students' browsers reuse a
state they have seen without asking; a proxy in front (deploy/nginx.conf) answers a class from
one render, and revalidates with a 304 that costs the app no render either.

Everything else is left as its route made it, except that the answer to any other method (a
POST: jobs, reports, uploads) is ``no-store`` unless it says otherwise; the job status GETs say
``no-store`` themselves (app/routes/verify.py). Static files with a content hash in their URL are
``immutable`` (app/main.py, Assets). A 422 (a rejected state), a 204 and any other status get
no caching headers from here.

A route added later gets all of this by declaring itself: ``@pure()`` under ``@router.get``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers

from app.caches import SENT

ROOT = Path(__file__).resolve().parent.parent

PAGE_MAX_AGE = 60
"""Seconds a whole page may be reused without asking. Short: a page names the versioned
assets of its version, so after an upgrade it should soon be asked again (with its tag: a 304
costs nothing while the version stands)."""
ANSWER_MAX_AGE = 600
"""Seconds a fragment, an embed's state, /api, /svg or /export may be reused without asking:
ten minutes, the most an answer of an older version can outlive an upgrade."""

LIBRARIES = ("fastapi", "jinja2", "numpy", "pydantic", "ml_dtypes", "orjson", "resvg_py",
             "CairoSVG", "pillow", "imageio-ffmpeg", "python-pptx", "pypdf")
"""The libraries whose version can change an answer's bytes (templates, numbers, exports)."""


@dataclass(frozen=True)
class Pure:
    max_age: int | Callable[[Headers], int]
    """seconds, or request headers → seconds (a page and its fragment differ)"""
    vary: tuple[str, ...]
    """request headers that choose the representation, besides Accept-Encoding"""


def pure(*, max_age: int | Callable[[Headers], int] = ANSWER_MAX_AGE,
         vary: tuple[str, ...] = ()):
    """Declare a GET endpoint's 200 answers a pure function of the app's version, the URL and
    the ``vary`` request headers: they get an ETag, Cache-Control and 304s (:class:`HttpCache`)."""
    def mark(endpoint):
        endpoint.http_pure = Pure(max_age, tuple(vary))
        return endpoint
    return mark


@lru_cache(maxsize=1)
def code_version(root: Path = ROOT) -> str:
    """A hash of everything an answer is made from: the app's code, its templates and static
    files (vendored ones included), pyproject.toml, and the versions of :data:`LIBRARIES`."""
    digest = hashlib.blake2b(digest_size=16)
    for folder in ("app", "templates", "static"):
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and path.suffix not in (".pyc",):
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    pyproject = root / "pyproject.toml"
    if pyproject.exists():
        digest.update(pyproject.read_bytes())
    for name in LIBRARIES:
        try:
            digest.update(f"{name}={importlib.metadata.version(name)}".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{name}=-".encode())
    return digest.hexdigest()


def app_version(settings: tuple = ()) -> str:
    """The version every tag starts with: :func:`code_version` and the server's settings that
    show on a page (the real-run panel: backend, rank limit, whether torch is installed)."""
    return hashlib.blake2b(f"{code_version()}|{settings!r}".encode(), digest_size=5).hexdigest()


def canonical_query(query_string: bytes) -> str:
    """The query with its pairs in key order (a stable sort: one key's values keep their
    order, and the last of them is the one the params model reads)."""
    pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    return urlencode(sorted(pairs, key=lambda kv: kv[0]))


def etag(version: str, scope: dict, headers: Headers, purity: Pure, gzipped: bool) -> str:
    """The strong tag of the answer to this request (quoted, as the header carries it)."""
    parts = [scope.get("scheme", "http"), headers.get("host", ""), scope.get("root_path", ""),
             scope["path"], canonical_query(scope.get("query_string", b"")),
             *(f"{name}={headers.get(name, '')}" for name in purity.vary), f"gzip={gzipped}"]
    digest = hashlib.blake2b("\0".join(parts).encode(), digest_size=12).hexdigest()
    return f'"{version}-{digest}"'


def matches(if_none_match: str | None, tag: str) -> bool:
    """Whether ``If-None-Match`` names ``tag`` (weak comparison, as RFC 9110 §13.1.2 asks)."""
    if not if_none_match:
        return False
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == tag:
            return True
    return False


class HttpCache:
    """Pure ASGI middleware: ETags, Cache-Control and 304s for :func:`pure` GET routes,
    ``no-store`` for other methods. ``compresses(path)``: whether the answers of that path may
    be gzipped (then Accept-Encoding is part of the representation)."""

    def __init__(self, app, compresses: Callable[[str], bool]):
        self.app = app
        self.compresses = compresses
        self._routes: dict[str, Pure | None] = {}
        self._table: list | None = None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["method"] != "GET":
            return await self.app(scope, receive, _with_default(send, NO_STORE))
        purity = self._purity(scope)
        if purity is None:
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        gzipped = self.compresses(scope["path"]) and "gzip" in headers.get("accept-encoding", "")
        version = getattr(scope["app"].state, "http_version", "")
        tag = etag(version, scope, headers, purity, gzipped)
        age = purity.max_age(headers) if callable(purity.max_age) else purity.max_age
        vary = [*purity.vary, *(["Accept-Encoding"] if self.compresses(scope["path"]) else [])]
        cache = [(b"etag", tag.encode()),
                 (b"cache-control", f"public, max-age={age}".encode())]
        if matches(headers.get("if-none-match"), tag):
            await send({"type": "http.response.start", "status": 304,
                        "headers": [*cache, (b"vary", ", ".join(vary).encode())]})
            await send({"type": "http.response.body", "body": b""})
            return
        # (/api and /export have byte caches of their own: app/routes/answers.py, EXPORTS)
        keep = not scope["path"].startswith(("/api/", "/export/"))
        sent = SENT.get(tag) if keep else None
        if sent is not None:  # a repeat view: the bytes as they were sent
            await send({"type": "http.response.start", "status": 200, "headers": sent[0]})
            await send({"type": "http.response.body", "body": sent[1]})
            return
        kept: dict = {}

        async def send_tagged(message):
            if message["type"] == "http.response.start":
                out = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"vary"]
                said = [v.decode() for k, v in message.get("headers", []) if k.lower() == b"vary"]
                out.append((b"vary", _union(said + vary).encode()))
                if message["status"] == 200:
                    own = dict((k.lower(), v) for k, v in out).get(b"cache-control")
                    if own is None:
                        out += cache
                        if keep:  # kept below once the whole body has gone
                            kept["headers"] = [(k, v) for k, v in out
                                               if k.lower() != b"server-timing"]
                    elif b"no-store" not in own:
                        out.append(cache[0])
                message = {**message, "headers": out}
            elif message["type"] == "http.response.body" and "headers" in kept:
                if message.get("more_body", False):
                    kept.clear()  # streamed: not kept
                else:
                    SENT.put(tag, (kept.pop("headers"), message.get("body", b"")))
            await send(message)

        await self.app(scope, receive, send_tagged)

    def _purity(self, scope) -> Pure | None:
        """The declaration of the GET route this path reaches (looked up once per path)."""
        path = scope["path"]
        if path in self._routes:
            return self._routes[path]
        if self._table is None:
            self._table = list(_get_routes(getattr(scope.get("app"), "routes", ())))
        found = None
        for regex, endpoint in self._table:
            if regex.match(path):
                found = getattr(endpoint, "http_pure", None)
                break
        if len(self._routes) >= 4096:  # bounded: paths that reach no route are many
            self._routes.clear()
        self._routes[path] = found
        return found


def _get_routes(routes):
    """(path regex, endpoint) of every route that answers GET, in the order the router tries
    them. FastAPI keeps an included router's routes in it (with their full paths in its
    ``effective_route_contexts``); a mount (the static files) has no endpoint."""
    for route in routes:
        contexts = getattr(route, "effective_route_contexts", None)
        candidates = contexts() if contexts is not None else [route]
        for candidate in candidates:
            regex = getattr(candidate, "path_regex", None)
            methods = getattr(candidate, "methods", None)
            if regex is not None and (methods is None or "GET" in methods):
                yield regex, getattr(candidate, "endpoint", None)


NO_STORE = (b"cache-control", b"no-store")


def _with_default(send, header: tuple[bytes, bytes]):
    """``send`` that adds ``header`` to the answer unless the route set that header."""
    async def sending(message):
        if message["type"] == "http.response.start":
            names = {k.lower() for k, _ in message.get("headers", [])}
            if header[0] not in names:
                message = {**message, "headers": [*message.get("headers", []), header]}
        await send(message)
    return sending


def _union(values: list[str]) -> str:
    seen: dict[str, str] = {}
    for value in values:
        for token in value.split(","):
            token = token.strip()
            if token and token.lower() not in seen:
                seen[token.lower()] = token
    return ", ".join(seen.values())
