"""The exercises: every chapter's problems as JSON, pages, printable sheets and answer keys.

    GET  /api/exercises                         every template: id, chapter, scene, title
    GET  /api/exercises/{id}?seed=S             one problem — never its answer
    POST /api/exercises/{id}/check?seed=S       {"answer": …, "reveal": false} → verdict, hint,
                                                and with a right answer or reveal the solution
    GET  /exercises                             all chapters, progress kept in localStorage
    GET  /exercises/{chapter}?seed=S            one chapter's problem set
    GET  /exercises/{id}?seed=S                 one problem (a permalink); POST checks a form
    GET  /exercises/{chapter}/sheet.{html,pdf}?seed=S&n=8   a lecturer's sheet
    GET  /exercises/{chapter}/key.{html,pdf}?seed=S&n=8     its answer key
    GET  /api/predict/{scene}?<query>           what each step computes (the scenes' predict mode)

Handlers only parse, call app/exercises and render. An unknown id or chapter is a 404; a bad
seed, n, body or answer a 422 naming the field and what is accepted. GET answers are pure
functions of (path, query, app version); a check is ``no-store``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from urllib.parse import parse_qs

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from app.course import CHAPTERS
from app.exercises import template as find, templates
from app.exercises.check import check, parse_seed, problem
from app.exercises.model import BANK, Template
from app.exercises.predict import questions
from app.exercises.sheet import chapter_number, parse_count, sheet
from app.exercises.units import AnswerError, given_text
from app.params import ParamsError, parse
from app.scene import trace_of
from app.templating import render

JSON = "application/json"
NO_STORE = {"Cache-Control": "no-store"}
DEFAULT_SEED = 1


def _error(error: AnswerError, status: int = 422) -> Response:
    body = {"detail": [{"param": error.field, "message": error.message}],
            "message": error.message}
    return Response(orjson.dumps(body), status_code=status, media_type=JSON, headers=NO_STORE)


def _not_found(what: str) -> Response:
    text = f"{what} is not an exercise or a chapter with exercises; see /api/exercises"
    return Response(orjson.dumps({"detail": text, "message": text}), status_code=404,
                    media_type=JSON)


def read_body(raw: bytes) -> tuple[object, bool]:
    """(answer, reveal) from the check's JSON body."""
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        raise AnswerError('body must be a JSON object {"answer": …, "reveal": false}',
                          "body") from None
    if not isinstance(body, dict):
        raise AnswerError('body must be a JSON object {"answer": …, "reveal": false}', "body")
    reveal = body.get("reveal", False)
    if not isinstance(reveal, bool):
        raise AnswerError(f"reveal must be true or false (got {reveal!r})", "reveal")
    if "answer" not in body and not reveal:
        raise AnswerError('answer is missing: send {"answer": …} (a number, a string with a '
                          'unit, a choice, coordinates or a rank list), or {"reveal": true}')
    return body.get("answer"), reveal


def form_answer(t: Template, form: dict[str, list[str]]) -> object:
    """The answer a page's form carries: one field, or one per coordinate."""
    if t.kind == "coords":
        return {k: (form.get(f"coord_{k}") or [""])[0].strip() for k in t.keys}
    return (form.get("answer") or [""])[0]


@lru_cache(maxsize=4096)
def problem_json(id: str, seed: int) -> bytes:
    """A problem's JSON, kept: a pure function of (id, seed) and the app's version."""
    return orjson.dumps(problem(find(id), seed))


def exercises_router(scenes) -> APIRouter:
    router = APIRouter(tags=["Exercises"])
    titles = {s.slug: s.title for s in scenes}
    by_slug = {s.slug: s for s in scenes}

    def chapters() -> list[dict]:
        return [{"number": c.number, "title": c.title, "templates": BANK.chapter(c.number)}
                for c in CHAPTERS if BANK.chapter(c.number)]

    @router.get("/api/predict/{slug}", summary="What each step of a scene computes, for its "
                                              "predict mode (the values, to reveal)",
                responses={"404": {"description": "unknown scene"},
                           "422": {"description": "bad query"}})
    def predict(slug: str, request: Request):
        scene = by_slug.get(slug)
        if scene is None:
            return _not_found(repr(slug))
        try:
            params = parse(scene.params, request.query_params)
        except ParamsError as error:
            return Response(orjson.dumps(error.to_dict()), status_code=422, media_type=JSON)
        trace = trace_of(scene, params)
        return Response(orjson.dumps({"scene": slug, "frames": scene.frame_count(trace),
                                      "questions": questions(slug, params, trace)}),
                        media_type=JSON)

    @router.get("/api/exercises", summary="Every problem template, in course order")
    def list_exercises():
        return Response(orjson.dumps({"exercises": [
            {"id": t.id, "chapter": t.chapter, "scene": t.scene, "title": t.title,
             "kind": t.kind, "unit": t.unit} for t in templates()]}), media_type=JSON)

    @router.get("/api/exercises/{id}", summary="One problem (never its answer)",
                responses={"404": {"description": "unknown id"},
                           "422": {"description": "bad seed"}})
    def get_exercise(id: str, request: Request):
        t = find(id)
        if t is None:
            return _not_found(repr(id))
        try:
            seed = parse_seed(request.query_params.get("seed"), DEFAULT_SEED)
        except AnswerError as error:
            return _error(error)
        return Response(problem_json(t.id, seed), media_type=JSON)

    @router.post("/api/exercises/{id}/check", summary="Check an answer; reveal the solution",
                 responses={"404": {"description": "unknown id"},
                            "422": {"description": "bad seed, body or answer"}})
    async def check_exercise(id: str, request: Request):
        t = find(id)
        if t is None:
            return _not_found(repr(id))
        try:
            seed = parse_seed(request.query_params.get("seed"), DEFAULT_SEED)
            answer, reveal = read_body(await request.body())
            verdict = check(t, seed, answer, reveal)
        except AnswerError as error:
            return _error(error)
        return Response(orjson.dumps(verdict), media_type=JSON, headers=NO_STORE)

    # --- pages ----------------------------------------------------------------------------

    @router.get("/exercises", response_class=HTMLResponse, include_in_schema=False)
    def index():
        return HTMLResponse(render("exercises/index.html", embed=False, chapters=chapters(),
                                   scenes=titles, seed=DEFAULT_SEED))

    def problem_page(request: Request, t: Template, seed: int, result: dict | None = None,
                     answer: object = None) -> Response:
        fragment = request.headers.get("HX-Request") == "true"
        body = problem(t, seed)
        siblings = BANK.chapter(t.chapter)
        i = siblings.index(t)
        ctx = {"embed": False, "t": t, "p": body, "seed": seed, "result": result,
               "given_rows": [(k, given_text(v)) for k, v in body["given"].items()],
               "answer": answer, "scene_title": titles.get(t.scene, t.scene),
               "chapter": CHAPTERS[t.chapter - 1],
               "prev": siblings[i - 1] if i > 0 else None,
               "next": siblings[i + 1] if i + 1 < len(siblings) else None}
        if fragment and result is not None:
            return HTMLResponse(render("exercises/_result.html", **ctx), headers=NO_STORE)
        headers = NO_STORE if result is not None else {}
        return HTMLResponse(render("exercises/problem.html", **ctx), headers=headers)

    @router.get("/exercises/{item}", response_class=HTMLResponse, include_in_schema=False)
    def exercise_page(item: str, request: Request):
        try:
            seed = parse_seed(request.query_params.get("seed"), DEFAULT_SEED)
        except AnswerError as error:
            return HTMLResponse(render("exercises/error.html", embed=False,
                                       message=error.message), status_code=422)
        number = chapter_number(item)
        if number is not None:
            return HTMLResponse(render("exercises/chapter.html", embed=False,
                                       chapter=CHAPTERS[number - 1], seed=seed,
                                       problems=[(t, problem(t, seed))
                                                 for t in BANK.chapter(number)],
                                       scenes=titles))
        t = find(item)
        if t is None:
            return HTMLResponse(render("exercises/error.html", embed=False,
                                       message=f"There is no exercise or chapter "
                                               f"“{item}”."), status_code=404)
        return problem_page(request, t, seed)

    @router.post("/exercises/{id}", response_class=HTMLResponse, include_in_schema=False)
    async def check_form(id: str, request: Request):
        t = find(id)
        if t is None:
            return HTMLResponse(render("exercises/error.html", embed=False,
                                       message=f"There is no exercise “{id}”."),
                                status_code=404)
        form = parse_qs((await request.body()).decode("utf-8", "replace"),
                        keep_blank_values=True)
        reveal = (form.get("action") or ["check"])[0] == "reveal"
        answer = form_answer(t, form)
        try:
            seed = parse_seed(request.query_params.get("seed"), DEFAULT_SEED)
        except AnswerError as error:
            return HTMLResponse(render("exercises/error.html", embed=False,
                                       message=error.message), status_code=422)
        blank = answer in ("", None) or (isinstance(answer, dict) and not any(answer.values()))
        try:
            if blank and not reveal:
                raise AnswerError("Type an answer first — or show the solution.")
            result = check(t, seed, None if blank else answer, reveal)
        except AnswerError as error:
            # the page says what could not be read, and keeps what was typed; asking for the
            # solution shows it whatever was typed
            result = check(t, seed, None, True) if reveal else {"error": error.message}
        return problem_page(request, t, seed, result, answer)

    # --- sheets ---------------------------------------------------------------------------

    @router.get("/exercises/{item}/{name}", include_in_schema=False)
    async def sheet_file(item: str, name: str, request: Request):
        number = chapter_number(item)
        kinds = {"sheet.html": (False, "html"), "sheet.pdf": (False, "pdf"),
                 "key.html": (True, "html"), "key.pdf": (True, "pdf")}
        if number is None or name not in kinds:
            return _not_found(repr(f"{item}/{name}"))
        key, fmt = kinds[name]
        try:
            seed = parse_seed(request.query_params.get("seed"), DEFAULT_SEED)
            n = parse_count(request.query_params.get("n"))
        except AnswerError as error:
            return _error(error)
        made = sheet(number, seed, n)
        base = str(request.base_url).rstrip("/")
        if fmt == "html":
            return HTMLResponse(render("exercises/sheet.html", embed=True, sheet=made, key=key,
                                       base=base))
        from app.exercises.pdf import render as pdf_render
        body = await run_in_threadpool(pdf_render, made, key, base)
        filename = f"shardscope-chapter{number}-{'key' if key else 'sheet'}-seed{seed}.pdf"
        return Response(body, media_type="application/pdf",
                        headers={"Content-Disposition": f'inline; filename="{filename}"'})

    return router
