"""The application: ``create_app()`` mounts the course index, every scene, the verification
jobs and the static files, behind headers that keep every request on this origin."""

from __future__ import annotations

from contextlib import asynccontextmanager
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.middleware.gzip import GZipMiddleware

from app.caches import fix_mmap_threshold
from app.course import CHAPTERS
from app.jobs.runner import JobRunner
from app.routes.export import export_router
from app.routes.scenes import scene_router
from app.routes.verify import verify_router
from app.scenes import (
    checkpointing,
    collective,
    data_parallel,
    memory,
    moe,
    optimizer,
    parallelism,
    pipeline,
    precision,
    tensor_parallel,
    zero,
)
from app.templating import STATIC, asset_version, render

SCENES = (memory.SCENE, parallelism.SCENE, collective.SCENE, optimizer.SCENE,
          data_parallel.SCENE, zero.SCENE, tensor_parallel.SCENE, pipeline.SCENE, precision.SCENE,
          checkpointing.SCENE, moe.SCENE)
"""Every built scene, in course order."""

# Only same-origin content may load: no CDN, no remote fonts (DESIGN budgets). Pages may not
# be framed, except embed pages, which any site may frame.
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
       "script-src 'self'; connect-src 'self'; font-src 'self'; object-src 'none'; "
       "base-uri 'self'; form-action 'self'; frame-src 'self'; ")


class SecurityHeaders:
    """Pure ASGI middleware (cheaper than BaseHTTPMiddleware on the hot path)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        embed = scope["path"].startswith(("/embed/", "/svg/"))
        ancestors = b"frame-ancestors *" if embed else b"frame-ancestors 'none'"

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"content-security-policy", CSP.encode() + ancestors))
                headers.append((b"x-content-type-options", b"nosniff"))
                headers.append((b"referrer-policy", b"same-origin"))
                if not embed:
                    headers.append((b"x-frame-options", b"DENY"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


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


class CompressPages:
    """gzip for pages and assets; /api answers stay uncompressed so they stay cheap. Level 1:
    a stage fragment is compressed on every request (and fetched ahead while a slider moves),
    and level 1 takes a third of level 6's time for a page about a quarter larger."""

    def __init__(self, app):
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=1024, compresslevel=1)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and not scope["path"].startswith("/api/"):
            return await self.gzip(scope, receive, send)
        return await self.app(scope, receive, send)


def create_app(runner: JobRunner | None = None) -> FastAPI:
    runner = runner or JobRunner.from_environment()
    fix_mmap_threshold()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        runner.shutdown()  # no worker outlives the server

    app = FastAPI(title="Shardscope", docs_url=None, redoc_url=None,
                  openapi_url="/api/openapi.json", lifespan=lifespan,
                  description="Distributed training computed step by step. Every scene's "
                              "query is described from its params model.")
    app.state.runner = runner
    app.mount("/static", Assets(directory=STATIC), name="static")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def home(request: Request):
        by_chapter = {}
        for scene in SCENES:
            for number in scene.chapters:
                by_chapter.setdefault(number, []).append(scene)
        return HTMLResponse(render("home.html", chapters=CHAPTERS, scenes=by_chapter,
                                   embed=False, path="/"))

    @app.get("/api/docs", response_class=HTMLResponse, include_in_schema=False)
    def api_docs():
        return HTMLResponse(render("api_docs.html", embed=False))

    for scene in SCENES:
        app.include_router(scene_router(scene))
    app.include_router(verify_router(SCENES, runner))
    app.include_router(export_router(SCENES))
    app.add_middleware(CompressPages)
    app.add_middleware(SecurityHeaders)
    return app
