"""Verification jobs over HTTP (DESIGN.md's contract), as JSON and as htmx fragments.

    POST /api/verify/{slug}?<scene query>   → 202 {"job": id, "status": "queued"}
    GET  /api/verify/jobs/{id}              → {"status", "backend", "world", "max_abs_diff", "detail", …}
    POST /verify/{slug}?<scene query>       → the job's status as HTML (polls itself until done)
    GET  /verify/jobs/{id}                  → the same fragment, refreshed
"""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.params import ParamsError, Problem, parse
from app.routes.openapi import problem_response, query_parameters
from app.routes.scenes import JSON, json_error
from app.scene import Scene, trace_of
from app.templating import render
from app.jobs.runner import JobRunner, QueueFull


def verify_router(scenes: tuple[Scene, ...], runner: JobRunner) -> APIRouter:
    router = APIRouter()
    by_slug = {s.slug: s for s in scenes if s.verify is not None}

    def submit(slug: str, request: Request):
        """Start a job, or raise ParamsError / QueueFull / KeyError."""
        scene = by_slug[slug]
        params = parse(scene.params, request.query_params)
        world = scene.verify.world(params)
        if world > runner.max_world:
            raise ParamsError([Problem("world", f"world ({world}) must be at most "
                                                f"{runner.max_world} for a real run on this "
                                                f"server")])
        why = scene.verify.unsupported(params) if scene.verify.unsupported else None
        if why is not None:
            raise ParamsError([Problem(*why)])
        return runner.submit(slug, scene.verify, params, trace_of(scene, params))

    def api_submit(slug: str, request: Request):
        try:
            job = submit(slug, request)
        except KeyError:
            return _json({"detail": f"no verification for {slug!r}; scenes with one: "
                                    f"{', '.join(sorted(by_slug))}"}, 404)
        except ParamsError as error:
            return json_error(error)
        except QueueFull as error:
            return _json({"detail": str(error)}, 429)
        # the contract's answer: accepted into the queue (a free runner may already have it)
        return _json({"job": job.id, "status": "queued"}, 202)

    for scene in by_slug.values():
        router.add_api_route(
            f"/api/verify/{scene.slug}", _bound(api_submit, scene.slug), methods=["POST"],
            tags=[f"{scene.chapter}. {scene.title}"], status_code=202,
            summary=f"{scene.title}: run it for real (torchrun) and compare with the trace",
            openapi_extra={"parameters": query_parameters(scene.params)},
            responses={**problem_response(), "429": {"description": "the queue is full"}})

    @router.post("/api/verify/{slug}", include_in_schema=False)
    def api_submit_unknown(slug: str, request: Request):
        return api_submit(slug, request)

    @router.get("/api/verify/jobs/{job_id}")
    def api_job(job_id: str):
        job = runner.get(job_id)
        if job is None:
            return _json({"detail": f"no job {job_id!r} (jobs are kept for a while only)"}, 404)
        return _json(job.to_dict(), 200)

    @router.post("/verify/{slug}", response_class=HTMLResponse, include_in_schema=False)
    def html_submit(slug: str, request: Request):
        try:
            job = submit(slug, request)
        except KeyError:
            return _fragment_message(f"No verification for {slug}.", 404)
        except ParamsError as error:
            return _fragment_message(str(error), 422)
        except QueueFull as error:
            return _fragment_message(f"The server is busy: {error}.", 429)
        return _fragment(job)

    @router.get("/verify/jobs/{job_id}", response_class=HTMLResponse, include_in_schema=False)
    def html_job(job_id: str):
        job = runner.get(job_id)
        if job is None:
            return _fragment_message("This job is no longer kept; run it again.", 404)
        return _fragment(job)

    return router


def _bound(handler, slug: str):
    def submit(request: Request):
        return handler(slug, request)
    return submit


def _json(body: dict, status: int) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type=JSON)


def _fragment(job) -> HTMLResponse:
    return HTMLResponse(render("_partials/job.html", job=job))


def _fragment_message(text: str, status: int) -> HTMLResponse:
    # 200 so that htmx swaps it in: the message is the answer the user needs to see
    return HTMLResponse(render("_partials/job.html", job=None, message=text), status_code=200,
                        headers={"X-Status": str(status)})
