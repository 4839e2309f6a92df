"""The planner's routes beyond the scene's own four: its accuracy ledger and the model-shape
reader every page with a model uses.

    GET  /api/planner/ledger   the ledger as JSON (DESIGN.md's contract), computed at start
    GET  /planner/accuracy     the ledger as a page: the scatter, every row, what is left out
    POST /api/model-shape      a Hugging Face config.json → the shape fields (no-store)

Routes only parse, call and render: the ledger is :func:`app.sim.planner.ledger.ledger`, the
reader :func:`app.sim.planner.hf_config.shape_of`.
"""

from __future__ import annotations

import hashlib
from functools import cache

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.scenes.planner import accuracy
from app.sim.planner.hf_config import MAX_BYTES, ConfigError, shape_of
from app.sim.planner.ledger import ledger
from app.templating import render

JSON = "application/json"
CACHE = "public, max-age=600"
NO_STORE = "no-store"


@cache
def _ledger_body() -> tuple[bytes, str]:
    body = orjson.dumps(ledger().to_dict())
    return body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


@cache
def _accuracy_page() -> tuple[str, str]:
    body = render("scenes/planner_accuracy.html", embed=False, **accuracy.view(ledger()))
    return body, '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'


def _cached(request: Request, body, etag: str, media_type: str) -> Response:
    headers = {"ETag": etag, "Cache-Control": CACHE}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=media_type, headers=headers)


def _problem(status: int, param: str, message: str) -> Response:
    """The 4xx every route answers: the message names the field (never echoes the upload)."""
    return Response(orjson.dumps({"detail": [{"param": param, "message": message}],
                                  "message": message}),
                    status_code=status, media_type=JSON, headers={"Cache-Control": NO_STORE})


def planner_router() -> APIRouter:
    router = APIRouter(tags=["11. Choosing the best mix for a cluster"])

    @router.get("/api/planner/ledger", summary="The planner against published runs: every "
                "row's prediction with the published layout pinned, its error and rank")
    def ledger_json(request: Request):
        return _cached(request, *_ledger_body(), JSON)

    @router.get("/planner/accuracy", response_class=HTMLResponse, include_in_schema=False)
    def accuracy_page(request: Request):
        body, etag = _accuracy_page()
        return _cached(request, body, etag, "text/html; charset=utf-8")

    @router.post("/api/model-shape", summary="A Hugging Face config.json as the shape fields "
                 "of every scene with a model (Llama, Mistral, Qwen2, Mixtral, Qwen-MoE, "
                 "DeepSeek-V3, GPT-2)",
                 responses={413: {"description": "the body is over 1 MB"},
                            422: {"description": "not JSON, not a config, or an unknown "
                                                 "model_type: `detail` names the field"}})
    async def model_shape(request: Request):
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BYTES:
            return _problem(413, "body", f"a config.json must be at most {MAX_BYTES:,} bytes "
                                         f"(this one is {int(declared):,})")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BYTES:
                return _problem(413, "body", f"a config.json must be at most {MAX_BYTES:,} "
                                             "bytes")
        try:
            config = orjson.loads(bytes(body))
        except orjson.JSONDecodeError as error:
            return _problem(422, "body", f"the body is not JSON ({error.args[0].split(':')[0]})")
        try:
            answer = shape_of(config)
        except ConfigError as error:
            return _problem(422, error.key, str(error))
        return Response(orjson.dumps(answer.to_dict()), media_type=JSON,
                        headers={"Cache-Control": NO_STORE})

    return router
