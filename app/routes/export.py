"""``GET /export/<scene>.<ext>?<the scene's query>``: a scene as a GIF, MP4, PDF, PPTX, offline
HTML or PNG for slide tools (app/export/). The scene's params are parsed as on /api; the
export's own options (``frame``, ``first``, ``last``, ``width``, ``scale``, ``fps``,
``caption``) apart. Bad input or an export beyond the bounds is a 422 naming the parameter; an
unknown scene or extension is a 404. Exports run in the thread pool and are cached
(app/caches.py, EXPORTS)."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Path, Request
from fastapi.responses import Response

from app.export import FORMATS, OPTION_HELP, export, filename, parse_options
from app.export.trace import TIMELINES, scene_trace
from app.params import ParamsError, parse
from app.routes.openapi import problem_response, query_parameters
from app.routes.renamed import moved
from app.routes.scenes import json_error
from app.scene import trace_of

EXPORT_CACHE = "private, max-age=600"


def export_router(scenes) -> APIRouter:
    router = APIRouter(tags=["Exports"])
    options = [{"name": name, "in": "query", "required": False, "description": text,
                "schema": {"type": "string"}} for name, text in OPTION_HELP.items()]
    for scene in scenes:
        extra = {"parameters": [*query_parameters(scene.params), *options]}
        router.add_api_route(
            f"/export/{scene.slug}.{{ext}}", handler(scene), methods=["GET"],
            openapi_extra=extra, response_class=Response,
            responses={**problem_response(), "404": {"description": "unknown format"}},
            summary=f"{scene.title}: GIF, MP4, PDF, PPTX, offline HTML or PNG"
                    + (" — or its timeline as Chrome Trace JSON (trace)"
                       if scene.slug in TIMELINES else ""))
    return router


def handler(scene):
    formats = [*FORMATS, *(["trace"] if scene.slug in TIMELINES else [])]

    def export_scene(request: Request,
                     ext: str = Path(description="the format: " + ", ".join(formats))):
        return answer(request, scene, ext)
    return export_scene


def answer(request: Request, scene, ext: str) -> Response:
    if ext == "trace" and scene.slug in TIMELINES:
        return timeline(request, scene)
    if ext not in FORMATS:
        return Response(f"unknown export format {ext!r}: one of {', '.join(FORMATS)}",
                        status_code=404, media_type="text/plain")
    if (old := moved(request, scene.params)) is not None:
        return old
    query = request.query_params
    try:
        opts = parse_options(query)
        params = parse(scene.params, query)
        trace = trace_of(scene, params)
        body = export(ext, scene, params, trace, opts, base_url=str(request.base_url))
    except ParamsError as error:
        return json_error(error)
    disposition = "inline" if ext in ("png", "gif") else "attachment"
    return Response(body, media_type=FORMATS[ext], headers={
        "Content-Disposition": f'{disposition}; filename="{filename(ext, scene, opts)}"',
        "Cache-Control": EXPORT_CACHE})


def timeline(request: Request, scene) -> Response:
    """``/export/<scene>.trace``: the scene's predicted timeline as Chrome Trace Event JSON
    (app/export/trace.py), for Perfetto."""
    try:
        params = parse(scene.params, request.query_params)
    except ParamsError as error:
        return json_error(error)
    body = orjson.dumps(scene_trace(scene.slug, trace_of(scene, params)))
    return Response(body, media_type="application/json", headers={
        "Content-Disposition": f'attachment; filename="{scene.slug}.trace.json"',
        "Cache-Control": EXPORT_CACHE})
