"""The four endpoints every scene has, built from its :class:`app.scene.Scene`.

    GET /{slug}         the page; with HX-Request only its block "stage" (what htmx swaps)
    GET /embed/{slug}   the deck and player without site chrome, frameable from any origin
    GET /api/{slug}     the trace as JSON (DESIGN.md's contract)
    GET /svg/{slug}     one frame (``frame``) as a standalone SVG file
    GET /{slug}/handout, /{slug}/presenter, /{slug}/key-stops   the lecturer's tools

Handlers only parse, call and render. Bad input is a 422 everywhere: JSON on /api and /svg, the
page with an inline message (which htmx is configured to swap) on pages.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import anyio.from_thread
import orjson
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from app.caches import PAGES
from app.classroom import key_stops
from app.export.frames import drawing, frame_svg
from app.http_cache import ANSWER_MAX_AGE, PAGE_MAX_AGE, pure
from app.routes.ahead import AHEAD, RENDERING, TURNS, ClientGone, is_ahead  # noqa: F401
from app.params import ParamsError, Problem, parse
from app.course import neighbours
from app.routes.answers import remember
from app.routes.openapi import problem_response, query_parameters
from app.routes.renamed import moved
from app.scene import Scene, cached_json, json_of, trace_of, traced
from app.templating import render
from app.view import PARAMETERS as VIEW_PARAMETERS, scene_box

JSON = "application/json"

VARY = ("HX-Request", "HX-History-Restore-Request")
"""The same URL answers a page, a stage fragment (htmx) or a whole page again for htmx's
history restore (which sends HX-Request too), so caches must tell the three apart: each has
its own ETag (app/http_cache.py)."""


def page_max_age(headers) -> int:
    """A stage fragment is kept as long as any answer; a whole page briefly (PAGE_MAX_AGE)."""
    return ANSWER_MAX_AGE if is_fragment_headers(headers) else PAGE_MAX_AGE


THEMES = ("light", "dark", "contrast", "auto")
"""The colour themes an address may ask for (static/js/theme.js)."""


def parse_frame(query: Mapping[str, str], frames: int, default: int = 0) -> int:
    raw = query.get("frame")
    if raw is None or raw == "":
        return default
    try:
        frame = int(raw)
    except ValueError:
        frame = -1
    if not 0 <= frame < frames:
        raise ParamsError([Problem("frame", f"frame must be an integer from 0 to {frames - 1} "
                                            f"(got {raw!r})")])
    return frame


def nearest_frame(query: Mapping[str, str], frames: int, default: int = 0) -> int:
    """A page's or embed's ``frame``: out of range, the nearest step (a link saved before the
    scene changed still opens); not a number, the default. /svg and /api stay strict."""
    try:
        frame = int(query.get("frame") or default)
    except ValueError:
        return default
    return max(0, min(frames - 1, frame))


def client_gone(request: Request) -> bool:
    """Whether the client of ``request`` (a sync handler's, in the thread pool) has left."""
    return anyio.from_thread.run(request.is_disconnected)


def json_error(error: ParamsError) -> Response:
    return Response(orjson.dumps(error.to_dict()), status_code=422, media_type=JSON)


def is_fragment_headers(headers) -> bool:
    return (headers.get("HX-Request") == "true"
            and headers.get("HX-History-Restore-Request") != "true")


def is_fragment(request: Request) -> bool:
    return is_fragment_headers(request.headers)


def scene_router(scene: Scene) -> APIRouter:
    router = APIRouter(tags=[f"{scene.chapter}. {scene.title}"])
    with_frame = {"parameters": query_parameters(scene.params, frame=True) + VIEW_PARAMETERS}
    without_frame = {"parameters": query_parameters(scene.params)}
    errors = problem_response()

    def real_run(request: Request, params) -> dict:
        return ({"verify_info": request.app.state.runner.info(scene.verify, params)}
                if scene.verify is not None else {})

    def page_kept(request: Request, params, box, embed: bool, block: str | None) -> str | None:
        """The rendered page if it is kept (its trace kept, and the page of that frame and
        box)."""
        trace = traced.kept(scene.simulate, params)
        if trace is None:
            return None
        frame = nearest_frame(request.query_params, scene.frame_count(trace))
        return PAGES.get((scene.slug, params, frame, embed, block, box,
                          repr(real_run(request, params))))

    def html(request: Request, embed: bool, block: str | None) -> tuple[str, int]:
        """The page (or its block) and its status. A page is a pure function of its params,
        frame and the server's real-run settings, so what was rendered is kept (dragging a
        slider back and forth revisits the same states), per box bucket where the deck is laid
        out for its box (app/view.py); bad input renders the raw values and the problems,
        uncached."""
        query = request.query_params
        base = {"scene": scene, "embed": embed, **scene.form(),
                **neighbours(getattr(request.app.state, "scenes", ()), scene)}
        try:
            box = scene_box(scene, query, embed=embed)
            params = parse(scene.params, query)
            kept = page_kept(request, params, box, embed, block)
            if kept is not None:
                return kept, 200
            # a state not rendered yet: in this process's turn (unless its asker has gone)
            # (a state fetched ahead stops between its trace, its deck and its page when
            # someone's own move comes meanwhile: TURNS.give_way)
            with TURNS.turn(lambda: client_gone(request), ahead=is_ahead(request.headers)):
                trace = trace_of(scene, params)
                frame = nearest_frame(query, scene.frame_count(trace))
                extra = real_run(request, params)
                key = (scene.slug, params, frame, embed, block, box, repr(extra))
                cached = PAGES.get(key)
                if cached is None:
                    TURNS.give_way()
                    drawn = scene.page_context(params, trace, frame, box)
                    TURNS.give_way()
                    ctx = {**base, "params": params, "values": params.model_dump(),
                           "trace": trace, "problems": [], "frame": frame, "box": box, **extra,
                           **drawn}
                    cached = render(scene.template, block, **ctx)
                    PAGES.put(key, cached)
        except ParamsError as error:
            values = {**_defaults(scene), **dict(query)}
            ctx = {**base, "params": None, "values": values, "trace": None,
                   "problems": error.problems, "frame": 0, "box": None}
            return render(scene.template, block, **ctx), 422
        return cached, 200

    @router.get(f"/{scene.slug}", response_class=HTMLResponse, openapi_extra=with_frame,
                responses=errors, summary=f"{scene.title}: the page (block \"stage\" alone "
                                          f"with HX-Request)")
    @pure(vary=VARY, max_age=page_max_age)
    def page(request: Request):
        # (a state fetched ahead while another render is in flight was answered 204 before
        # routing: app/routes/ahead.py)
        if (old := moved(request, scene.params)) is not None:
            return old
        fragment = is_fragment(request)
        ahead = fragment and is_ahead(request.headers)
        start = time.perf_counter()
        try:
            with RENDERING:
                body, status = html(request, embed=False, block="stage" if fragment else None)
        except ClientGone:  # nobody is waiting for this answer any more
            return Response(status_code=204, headers={"Cache-Control": "no-store"})
        # what the server spent (the bench splits a jump's time with it: bench/jump_split.py)
        headers = {"Server-Timing": f"render;dur={(time.perf_counter() - start) * 1000:.1f}"}
        if ahead and status == 422:
            headers.update({"X-Stage-Status": "422", "Cache-Control": "no-store"})
            status = 200
        return HTMLResponse(body, status_code=status, headers=headers)

    @router.get(f"/embed/{scene.slug}", response_class=HTMLResponse, openapi_extra=with_frame,
                responses=errors, summary=f"{scene.title}: the deck and player, frameable")
    @pure(max_age=PAGE_MAX_AGE)
    def embed(request: Request):
        if (old := moved(request, scene.params)) is not None:
            return old
        try:
            body, status = html(request, embed=True, block=None)
        except ClientGone:
            return Response(status_code=204, headers={"Cache-Control": "no-store"})
        return HTMLResponse(body, status_code=status)

    @router.get(f"/api/{scene.slug}", openapi_extra=without_frame, responses=errors,
                summary=f"{scene.title}: the trace as JSON (DESIGN.md's contract)")
    @pure()
    async def api(request: Request):
        # async: a cached trace is answered on the event loop without a thread hop; a new one
        # is simulated in the thread pool so a large request never blocks other clients
        try:
            params = parse(scene.params, request.query_params)
        except ParamsError as error:
            return json_error(error)
        body = cached_json(scene, params)
        if body is None:
            body = await run_in_threadpool(json_of, scene, params)
        remember(request.scope, body)
        return Response(body, media_type=JSON)

    @router.get(f"/svg/{scene.slug}", openapi_extra=with_frame, responses=errors,
                summary=f"{scene.title}: one step as a standalone SVG file")
    @pure()
    def svg(request: Request):
        if (old := moved(request, scene.params)) is not None:
            return old
        try:
            box = scene_box(scene, request.query_params, export=True)
            params = parse(scene.params, request.query_params)
            trace = trace_of(scene, params)
            frame = parse_frame(request.query_params, scene.frame_count(trace))
        except ParamsError as error:
            return json_error(error)
        body = frame_svg(scene, params, trace, frame, describe=True, box=box)
        name = f"shardscope-{scene.slug}-frame{frame}.svg"
        return Response(body, media_type="image/svg+xml",
                        headers={"Content-Disposition": f'inline; filename="{name}"'})

    @router.get(f"/{scene.slug}/handout", response_class=HTMLResponse,
                openapi_extra={"parameters": without_frame["parameters"] + VIEW_PARAMETERS},
                responses=errors, summary=f"{scene.title}: every step with its caption, to print")
    @pure(max_age=PAGE_MAX_AGE)
    def handout(request: Request):
        if (old := moved(request, scene.params)) is not None:
            return old
        try:
            box = scene_box(scene, request.query_params, export=True)
            params = parse(scene.params, request.query_params)
            trace = trace_of(scene, params)
        except ParamsError as error:
            return json_error(error)
        # each step's drawing without its caption: the handout prints the caption once, as text
        steps = [(k, frame.caption, drawing(scene, params, trace, k, box).split("?>", 1)[-1])
                 for k, frame in enumerate(trace.frames)]
        return HTMLResponse(render("handout.html", scene=scene, params=params, steps=steps,
                                   embed=True))

    @router.get(f"/{scene.slug}/presenter", response_class=HTMLResponse,
                openapi_extra=with_frame, responses=errors,
                summary=f"{scene.title}: the presenter view (current and next step, notes, "
                        f"timer), in step with the presenting window")
    @pure(max_age=PAGE_MAX_AGE)
    def presenter(request: Request):
        if (old := moved(request, scene.params)) is not None:
            return old
        try:
            params = parse(scene.params, request.query_params)
            trace = trace_of(scene, params)
        except ParamsError as error:
            return HTMLResponse(render("presenter.html", scene=scene, params=None, trace=None,
                                       frame=0, problems=error.problems, embed=True),
                                status_code=422)
        frame = nearest_frame(request.query_params, scene.frame_count(trace))
        theme = request.query_params.get("theme", "")     # the two frames take the view's
        return HTMLResponse(render("presenter.html", scene=scene, params=params, trace=trace,
                                   frame=frame, problems=[], embed=True,
                                   theme=theme if theme in THEMES else ""))

    @router.get(f"/{scene.slug}/key-stops", openapi_extra=without_frame, responses=errors,
                summary=f"{scene.title}: the stops of the key parameter "
                        f"({scene.key_slider or 'none'}) this state accepts")
    @pure()
    def stops(request: Request):
        try:
            params = parse(scene.params, request.query_params)
        except ParamsError as error:
            return json_error(error)
        found = key_stops(params)
        return Response(orjson.dumps({"name": scene.key_slider,
                                      "stops": found.split() if found else None}),
                        media_type=JSON)

    return router


def _defaults(scene: Scene) -> dict:
    """Each field's default, for refilling the controls when the query is invalid."""
    return {name: field.default for name, field in scene.params.model_fields.items()}
