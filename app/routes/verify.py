"""Verification jobs over HTTP (DESIGN.md's contract), as JSON and as htmx fragments.

    POST /api/verify/{slug}?<scene query>   → 202 {"job": id, "status": "queued"}
    GET  /api/verify/jobs/{id}              → {"status", "backend", "world", "max_abs_diff", "detail", …}
    POST /verify/{slug}?<scene query>       → the job's status as HTML (polls itself until done)
    GET  /verify/jobs/{id}                  → the same fragment, refreshed
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import json
from urllib.parse import parse_qsl, urlsplit

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.params import ParamsError, Problem, parse
from app.routes.openapi import problem_response, query_parameters
from app.routes.scenes import JSON, json_error
from app.scene import Scene, trace_of
from app.templating import render
from app.jobs.runner import ClientBusy, JobRunner, QueueFull

MAX_REPORT_BYTES = 8 * 2**20
NO_STORE = {"Cache-Control": "no-store"}
"""Jobs, reports and uploads are never kept by a browser or a proxy (DESIGN.md, HTTP caching):
POSTs get it from app/http_cache.py, the GETs of a job's status here."""


def verify_router(scenes: tuple[Scene, ...], runner: JobRunner) -> APIRouter:
    router = APIRouter()
    by_slug = {s.slug: s for s in scenes if s.verify is not None}

    def submit(slug: str, request: Request):
        """Start a job, or raise ParamsError / QueueFull / KeyError / CrossSite."""
        refuse_cross_site(request)
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
        return runner.submit(slug, scene.verify, params, trace_of(scene, params),
                             client=client_of(request),
                             query=request.scope.get("query_string", b"").decode("latin-1"))

    def resolve(slug: str, query: str):
        """A job another worker process admitted, rebuilt from its scene and query string
        exactly as that process parsed it (app/jobs/runner.py runs it here)."""
        scene = by_slug[slug]
        params = parse(scene.params, dict(parse_qsl(query, keep_blank_values=True)))
        return scene.verify, params, trace_of(scene, params), ()

    runner.resolve = resolve

    def api_submit(slug: str, request: Request):
        try:
            job = submit(slug, request)
        except KeyError:
            return _json({"detail": f"no verification for {slug!r}; scenes with one: "
                                    f"{', '.join(sorted(by_slug))}"}, 404)
        except ParamsError as error:
            return json_error(error)
        except CrossSite as error:
            return _json({"detail": str(error)}, 403)
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
            return _json({"detail": f"no job {job_id!r} (jobs are kept for a while only)"}, 404,
                         headers=NO_STORE)
        return _json(job.to_dict(), 200, headers=NO_STORE)

    @router.get("/api/verify/jobs/{job_id}/trace")
    def api_job_trace(job_id: str):
        """The job's measured timeline as Chrome Trace Event JSON (Perfetto, chrome://tracing)."""
        job = runner.get(job_id)
        if job is None:
            return _json({"detail": f"no job {job_id!r} (jobs are kept for a while only)"}, 404,
                         headers=NO_STORE)
        if job.trace is None:
            return _json({"detail": f"job {job_id!r} has no measured timeline "
                                    f"({'not finished yet' if not job.done else 'its scene records none'})"},
                         404)
        return Response(orjson.dumps(job.trace), media_type=JSON, headers={
            "Content-Disposition": f'attachment; filename="{job.scene}.trace.json"', **NO_STORE})

    @router.post("/verify/{slug}", response_class=HTMLResponse, include_in_schema=False)
    def html_submit(slug: str, request: Request):
        try:
            job = submit(slug, request)
        except KeyError:
            return _fragment_message(f"No verification for {slug}.", 404)
        except ParamsError as error:
            return _fragment_message(str(error), 422)
        except CrossSite as error:
            return _fragment_message(str(error), 403)
        except ClientBusy as error:
            return _fragment_message(f"One at a time: {error}.", 429)
        except QueueFull as error:
            return _fragment_message(f"The server is busy: {error}.", 429)
        return _fragment(job)

    def judge_report(slug: str, request: Request, body: bytes):
        """The finished job for an uploaded report, or raise ReportRefused / KeyError /
        ParamsError / CrossSite."""
        refuse_cross_site(request)
        scene = by_slug[slug]
        params = parse(scene.params, request.query_params)
        check = scene.verify
        if len(body) > MAX_REPORT_BYTES:
            raise ReportRefused(f"the report is {len(body):,} bytes; at most "
                                f"{MAX_REPORT_BYTES:,} are accepted", 413)
        try:
            report = json.loads(body)
        except (ValueError, UnicodeDecodeError) as error:
            raise ReportRefused(f"the report is not JSON ({error})") from None
        if not isinstance(report, dict):
            raise ReportRefused("the report is not a JSON object")
        if "digest" not in report:
            raise ReportRefused("the report has no digest: it was not written by this "
                                "version's workers (run the command shown on the page)")
        if report["digest"] != report_digest(report):
            raise ReportRefused("the report was edited after the run: its digest does not "
                                "match its contents")
        differs = argv_mismatch(check.args(params), report.get("argv"))
        if differs:
            raise ReportRefused(f"the report ran other parameters than this page's: {differs}; "
                                f"open the page for its parameters or run this page's command")
        world = check.world(params)
        if report.get("world") != world:
            raise ReportRefused(f"the report ran {report.get('world')} ranks, this page's run "
                                f"has {world}")
        try:
            verdict = check.compare(params, trace_of(scene, params), report)
        except Exception as error:  # a report that lacks what compare reads
            raise ReportRefused(f"the report lacks what the comparison reads "
                                f"({type(error).__name__}: {error})") from None
        return runner.record(slug, verdict, world=world,
                             backend=str(report.get("backend", "?")),
                             device=str(report.get("device", "?")))

    async def api_report(slug: str, request: Request):
        body = await request.body()
        try:
            job = judge_report(slug, request, body)
        except KeyError:
            return _json({"detail": f"no verification for {slug!r}"}, 404)
        except ParamsError as error:
            return json_error(error)
        except CrossSite as error:
            return _json({"detail": str(error)}, 403)
        except ReportRefused as error:
            return _json({"detail": f"refused: {error}"}, error.status)
        return _json(job.to_dict(), 200)

    for scene in by_slug.values():
        router.add_api_route(
            f"/api/verify/{scene.slug}/report", _bound(api_report, scene.slug, aware=True),
            methods=["POST"], tags=[f"{scene.chapter}. {scene.title}"],
            summary=f"{scene.title}: judge the report of a run on your own cluster",
            description="The body is the JSON report that the page's torchrun command wrote "
                        "(`--out report.json`); the query is the page's.",
            openapi_extra={"parameters": query_parameters(scene.params)},
            responses={**problem_response(), "403": {"description": "cross-site"},
                       "413": {"description": "too large"}})

    @router.post("/verify/{slug}/report", response_class=HTMLResponse, include_in_schema=False)
    async def html_report(slug: str, request: Request):
        body = await request.body()
        try:
            job = judge_report(slug, request, uploaded_file(request, body))
        except KeyError:
            return _fragment_message(f"No verification for {slug}.", 404)
        except ParamsError as error:
            return _fragment_message(str(error), 422)
        except CrossSite as error:
            return _fragment_message(str(error), 403)
        except ReportRefused as error:
            return _fragment_message(f"Report refused: {error}.", error.status)
        return _fragment(job)

    @router.get("/verify/jobs/{job_id}", response_class=HTMLResponse, include_in_schema=False)
    def html_job(job_id: str):
        job = runner.get(job_id)
        if job is None:
            return _fragment_message("This job is no longer kept; run it again.", 404)
        return _fragment(job)

    return router


def _bound(handler, slug: str, aware: bool = False):
    if aware:
        async def submit_async(request: Request):
            return await handler(slug, request)
        return submit_async

    def submit(request: Request):
        return handler(slug, request)
    return submit


class CrossSite(Exception):
    pass


class ReportRefused(Exception):
    def __init__(self, why: str, status: int = 422):
        super().__init__(why)
        self.status = status


def refuse_cross_site(request: Request) -> None:
    """Raise CrossSite when the browser says another site sent this request."""
    headers = request.headers
    if headers.get("sec-fetch-site", "").lower() == "cross-site":
        raise CrossSite("Refused: this request came from another site (Sec-Fetch-Site: "
                        "cross-site); start real runs from this server's own pages, or with "
                        "curl")
    origin = headers.get("origin")
    if origin is None:
        return  # curl, scripts, and same-origin GET-initiated navigations
    hosts = {headers.get("host", ""), *headers.get("x-forwarded-host", "").split(",")}
    if origin == "null" or urlsplit(origin).netloc not in {h.strip() for h in hosts if h}:
        raise CrossSite(f"Refused: this request came from another origin ({origin[:100]}); "
                        f"start real runs from this server's own pages, or with curl")


def client_of(request: Request) -> str:
    """The client a job counts against (its IP address)."""
    return request.client.host if request.client else "?"


def report_digest(report: dict) -> str:
    """workers/common.digest, recomputed here without importing torch."""
    body = {k: v for k, v in report.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def argv_mismatch(wanted: list[str], got) -> str:
    """Where the report's command line (its ``argv``, less the runner's options) leaves the
    page's ``worker_argv``, as text; "" when they are the same."""
    if not isinstance(got, list) or not all(isinstance(t, str) for t in got):
        return "the report does not say which command line it ran (no argv)"
    for i, (a, b) in enumerate(zip(wanted, got)):
        if a != b:
            option = next((t for t in reversed(wanted[:i + 1]) if t.startswith("--")), a)
            return f"{option}: the report ran {b!r} where this page runs {a!r}"
    if len(got) != len(wanted):
        extra = got[len(wanted):] or wanted[len(got):]
        side = "the report adds" if len(got) > len(wanted) else "the report lacks"
        return f"{side} {' '.join(extra)[:120]!r}"
    return ""


def uploaded_file(request: Request, body: bytes) -> bytes:
    """The ``report`` field of a multipart/form-data body (the panel's upload form), or the body
    itself when it is not multipart."""
    kind = request.headers.get("content-type", "")
    if not kind.startswith("multipart/form-data"):
        return body
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + kind.encode("latin-1") + b"\r\n\r\n" + body)
    for part in message.iter_parts():
        if part.get_param("name", header="content-disposition") == "report":
            return part.get_payload(decode=True) or b""
    raise ReportRefused("no report file was sent (choose the report.json your run wrote)")


def _json(body: dict, status: int, headers: dict | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type=JSON, headers=headers)


def _fragment(job) -> HTMLResponse:
    # a job's status changes while it runs: never kept (its polling asks again every 0.7 s)
    return HTMLResponse(render("_partials/job.html", job=job), headers=NO_STORE)


def _fragment_message(text: str, status: int) -> HTMLResponse:
    # 200 so that htmx swaps it in: the message is the answer the user needs to see
    return HTMLResponse(render("_partials/job.html", job=None, message=text), status_code=200,
                        headers={"X-Status": str(status), **NO_STORE})
