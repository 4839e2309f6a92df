"""``GET /export/<scene>.<ext>?<the scene's query>``: a scene as a GIF, MP4, PDF, PPTX, offline
HTML or PNG for slide tools (app/export/). The scene's params are parsed as on /api; the
export's own options (``frame``, ``first``, ``last``, ``width``, ``scale``, ``fps``,
``caption``) apart. Bad input or an export beyond the bounds is a 422 naming the parameter; an
unknown scene or extension is a 404. Exports run in the thread pool and are cached
(app/caches.py, EXPORTS)."""

from __future__ import annotations

from fastapi import APIRouter, Path, Request
from fastapi.responses import Response

from app.export import FORMATS, OPTION_HELP, export, filename, options_for
from app.params import ParamsError, parse
from app.routes.openapi import problem_response, query_parameters
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
            summary=f"{scene.title}: GIF, MP4, PDF, PPTX, offline HTML or PNG")
    return router


def handler(scene):
    def export_scene(request: Request,
                     ext: str = Path(description="the format: " + ", ".join(FORMATS))):
        return answer(request, scene, ext)
    return export_scene


def answer(request: Request, scene, ext: str) -> Response:
    if ext not in FORMATS:
        return Response(f"unknown export format {ext!r}: one of {', '.join(FORMATS)}",
                        status_code=404, media_type="text/plain")
    query = request.query_params
    try:
        opts = options_for(scene, query, ext)
        params = parse(scene.params, query)
        trace = trace_of(scene, params)
        body = export(ext, scene, params, trace, opts, base_url=str(request.base_url))
    except ParamsError as error:
        return json_error(error)
    disposition = "inline" if ext in ("png", "gif") else "attachment"
    return Response(body, media_type=FORMATS[ext], headers={
        "Content-Disposition": f'{disposition}; filename="{filename(ext, scene, opts)}"',
        "Cache-Control": EXPORT_CACHE})
