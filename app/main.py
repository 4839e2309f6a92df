"""The application: ``create_app()`` mounts the course index, every scene, the verification
jobs and the static files, behind headers that keep every request on this origin."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from urllib.parse import parse_qs

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.middleware.gzip import GZipMiddleware

from app.caches import (after_answer, after_answer_due, fix_mmap_threshold,
                        freeze_startup_objects, tune_collector)
from app.http_cache import PAGE_MAX_AGE, HttpCache, app_version, pure
from app.course import CHAPTERS, INTROS
from app.jobs.runner import JobRunner
from app.routes.ahead import FetchAhead
from app.routes.answers import KnownAnswers
from app.routes.exercises import exercises_router
from app.sim.planner.ledger import ledger
from app.routes.export import export_router
from app.routes.planner import planner_router
from app.routes.scenes import scene_router
from app.routes.verify import verify_router
from app.scenes import (
    checkpointing,
    collective,
    context_parallel,
    data_parallel,
    memory,
    moe,
    optimizer,
    parallelism,
    pipeline,
    planner,
    precision,
    tensor_parallel,
    train,
    zero,
)
from app.templating import STATIC, asset_version, compile_templates, render

SCENES = (memory.SCENE, parallelism.SCENE, collective.SCENE, optimizer.SCENE,
          data_parallel.SCENE, zero.SCENE, tensor_parallel.SCENE, pipeline.SCENE, precision.SCENE,
          checkpointing.SCENE, context_parallel.SCENE, moe.SCENE, planner.SCENE, train.SCENE)
"""Every built scene, in course order."""

# Only same-origin content may load: no CDN, no remote fonts (DESIGN budgets). Pages may not
# be framed, except embed pages, which any site may frame.
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
       "script-src 'self'; connect-src 'self'; font-src 'self'; object-src 'none'; "
       "base-uri 'self'; form-action 'self'; frame-src 'self'; ")


class AfterAnswer:
    """Once an answer has been sent, what its computation left is done in a worker thread
    while the browser draws what came (app/caches.py, after_answer): the entries it kept in the
    deferred caches are sized (walking a trace and a deck costs a first visit of /collective at
    64 ranks 5–8 ms) and the cycle collector's pass runs if one is due (20 ms when it came in
    the middle of a render), so nobody waits for them. Not awaited: the connection's next
    request is not held up."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        try:
            await self.app(scope, receive, send)
        finally:
            if after_answer_due():
                asyncio.get_running_loop().run_in_executor(None, after_answer)


class SecurityHeaders:
    """Pure ASGI middleware (cheaper than BaseHTTPMiddleware on the hot path)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        embed = scope["path"].startswith(("/embed/", "/svg/"))
        ancestors = b"frame-ancestors *" if embed else b"frame-ancestors 'none'"

        started = False

        async def send_with_headers(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                headers.append((b"content-security-policy", CSP.encode() + ancestors))
                headers.append((b"x-content-type-options", b"nosniff"))
                headers.append((b"referrer-policy", b"same-origin"))
                if not embed:
                    headers.append((b"x-frame-options", b"DENY"))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            # an unexpected error still answers a plain 500 behind the same headers (Starlette's
            # own 500 is sent outside every middleware); re-raised so the server logs it
            if started:
                raise
            await server_error(scope["path"])(scope, receive, send_with_headers)
            raise


def server_error(path: str) -> Response:
    """The answer to an unexpected error: no detail of it, JSON on /api, a plain page else."""
    text = "The server failed on this request; it has been logged."
    if path.startswith("/api/"):
        return Response(orjson.dumps({"detail": text, "message": text}), status_code=500,
                        media_type="application/json")
    return HTMLResponse(f"<!doctype html><html lang=\"en\"><meta charset=\"utf-8\">"
                        f"<title>Server error — Shardscope</title><h1>Server error</h1>"
                        f"<p>{text} <a href=\"/\">The course</a></p></html>", status_code=500)


class HeadAsGet:
    """HEAD answers like GET without the body: the same status and headers, Content-Length of
    the GET's body where it has one (FastAPI's GET routes answer only GET)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "HEAD":
            return await self.app(scope, receive, send)

        async def send_without_body(message):
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_without_body)


class Assets(StaticFiles):
    """Static files. Templates write their URLs with ``?v=`` and a hash of the files
    (:func:`app.templating.asset_version`): such a URL never changes content, so the browser
    keeps it without asking again (without this, Chromium revalidates the favicon after every
    slider move, which pushes a new address)."""

    async def get_response(self, path, scope):
        response = await super().get_response(path, scope)
        version = parse_qs(scope.get("query_string", b"").decode()).get("v")
        if response.status_code == 200 and version == [asset_version()]:
            response.headers["Cache-Control"] = "public, max-age=31536000, immutable"
        return response


def compresses(path: str) -> bool:
    """Whether answers of ``path`` may be gzipped (:class:`CompressPages`)."""
    return not path.startswith("/api/")


class CompressPages:
    """gzip for pages and assets; /api answers stay uncompressed so they stay cheap. Level 1:
    a stage fragment is compressed on every request (and fetched ahead while a slider moves),
    and level 1 takes a third of level 6's time for a page about a quarter larger."""

    def __init__(self, app):
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=1024, compresslevel=1)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and compresses(scope["path"]):
            return await self.gzip(scope, receive, send)
        return await self.app(scope, receive, send)


def create_app(runner: JobRunner | None = None) -> FastAPI:
    runner = runner or JobRunner.from_environment()
    fix_mmap_threshold()
    tune_collector()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # the planner's accuracy ledger (every published run searched twice, the same on
        # every planner page) is computed, and every template compiled, before the first
        # request, not during it
        await run_in_threadpool(ledger)
        await run_in_threadpool(compile_templates)
        freeze_startup_objects()
        yield
        runner.shutdown()  # no worker outlives the server

    app = FastAPI(title="Shardscope", docs_url=None, redoc_url=None,
                  openapi_url="/api/openapi.json", lifespan=lifespan,
                  description="Distributed training computed step by step. Every scene's "
                              "query is described from its params model.")
    app.state.runner = runner
    # every ETag starts with it: the code, the libraries and the real-run settings a page shows
    app.state.http_version = app_version(runner.settings())
    app.state.scenes = SCENES  # course order: the scenes' prev / next links
    app.mount("/static", Assets(directory=STATIC), name="static")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    @pure(max_age=PAGE_MAX_AGE)
    def home(request: Request):
        by_chapter = {}
        for scene in SCENES:
            for number in scene.chapters:
                by_chapter.setdefault(number, []).append(scene)
        return HTMLResponse(render("home.html", chapters=CHAPTERS, scenes=by_chapter, path_scenes=SCENES,
                                   intros=INTROS,
                                   embed=False, path="/"))

    @app.get("/api/docs", response_class=HTMLResponse, include_in_schema=False)
    @pure(max_age=PAGE_MAX_AGE)
    def api_docs():
        return HTMLResponse(render("api_docs.html", embed=False))

    app.include_router(planner_router())  # the accuracy ledger, its page, the config reader
    for scene in SCENES:
        app.include_router(scene_router(scene))
    app.include_router(verify_router(SCENES, runner))
    app.include_router(export_router(SCENES))
    app.include_router(exercises_router(SCENES))
    app.add_middleware(KnownAnswers)
    app.add_middleware(CompressPages)
    app.add_middleware(FetchAhead)
    app.add_middleware(HttpCache, compresses=compresses)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(HeadAsGet)
    app.add_middleware(AfterAnswer)  # outermost: after the whole answer is sent
    return app
