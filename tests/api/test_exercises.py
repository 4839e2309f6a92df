"""The exercises over HTTP and on the command line: the contract's fields, 404 and 422 with the
field named, no-store on checks, the pages, the sheets (the same seeds give the same PDF bytes)
and — the rule that matters most — an unanswered problem's page and JSON never contain its
answer, in any formatting."""

from __future__ import annotations

import re

import pytest

from app.cli import main
from app.exercises import templates
from app.exercises.check import expected_text
from app.exercises.model import BANK
from app.exercises.units import PROBLEM_UNITS, amount, given_text, num

PROBLEM_FIELDS = {"id", "seed", "chapter", "prompt", "given", "unit", "kind", "scene_url"}


def test_the_list_names_every_template(client):
    body = client.get("/api/exercises").json()
    rows = body["exercises"]
    assert [r["id"] for r in rows] == [t.id for t in templates()]
    assert all({"id", "chapter", "scene", "title"} <= set(r) for r in rows)
    assert len(rows) >= 70


@pytest.mark.parametrize("id_", ["zero-model-states", "fp16-flush", "layout-rank-coords",
                                 "layout-group"])
def test_a_problem_has_the_contracts_fields_and_no_answer(client, id_):
    body = client.get(f"/api/exercises/{id_}?seed=5").json()
    assert PROBLEM_FIELDS <= set(body)
    assert body["id"] == id_ and body["seed"] == 5
    assert not {"answer", "expected", "solution", "expected_text"} & set(body)
    if body["kind"] == "choice":
        assert body["choices"]
    assert client.get(f"/api/exercises/{id_}?seed=5").content == \
        client.get(f"/api/exercises/{id_}?seed=5").content


def test_check_right_wrong_and_reveal(client):
    t = BANK.templates["ring-allreduce-bytes"]
    expected = t.solve(t.given(3)).answer
    right = client.post("/api/exercises/ring-allreduce-bytes/check?seed=3",
                        json={"answer": expected, "reveal": False})
    assert right.status_code == 200 and right.headers["cache-control"] == "no-store"
    body = right.json()
    assert body["correct"] and body["expected"] == expected and body["solution"]
    assert {"step", "formula", "value"} <= set(body["solution"][0])
    wrong = client.post("/api/exercises/ring-allreduce-bytes/check?seed=3",
                        json={"answer": f"{expected / 2:.6g}"}).json()
    assert not wrong["correct"] and "hint" in wrong
    assert "expected" not in wrong and "solution" not in wrong
    shown = client.post("/api/exercises/ring-allreduce-bytes/check?seed=3",
                        json={"reveal": True}).json()
    assert shown["expected"] == expected and not shown["correct"]


@pytest.mark.parametrize("path,body,field,words", [
    ("/api/exercises/mfu?seed=abc", None, "seed", ["0 to 2147483647"]),
    ("/api/exercises/mfu?seed=-3", None, "seed", ["integer"]),
    ("/api/exercises/mfu/check?seed=1", {"answer": "lots"}, "answer", ["number"]),
    ("/api/exercises/mfu/check?seed=1", {"answer": "3 ms"}, "answer", ["time", "fraction"]),
    ("/api/exercises/zero-model-states/check?seed=1", {"answer": "2 s"}, "answer",
     ["time", "bytes"]),
    ("/api/exercises/mfu/check?seed=1", {}, "answer", ["missing"]),
    ("/api/exercises/mfu/check?seed=1", {"answer": 1, "reveal": "yes"}, "reveal", ["true"]),
    ("/api/exercises/fp16-flush/check?seed=1", {"answer": "maybe"}, "answer", ["normal"]),
    ("/api/exercises/layout-group/check?seed=1", {"answer": "all of them"}, "answer",
     ["list of rank"]),
])
def test_bad_input_is_a_422_naming_the_field(client, path, body, field, words):
    response = client.get(path) if body is None else client.post(path, json=body)
    assert response.status_code == 422
    problem = response.json()["detail"][0]
    assert problem["param"] == field
    for word in words:
        assert word in problem["message"]


def test_a_body_that_is_not_json_is_a_422(client):
    response = client.post("/api/exercises/mfu/check?seed=1", content=b"{nope",
                           headers={"content-type": "application/json"})
    assert response.status_code == 422 and response.json()["detail"][0]["param"] == "body"


@pytest.mark.parametrize("path", ["/api/exercises/nope", "/exercises/nope",
                                  "/exercises/12/sheet.pdf", "/exercises/5/sheet.docx"])
def test_unknown_ids_and_chapters_are_404(client, path):
    assert client.get(path).status_code == 404
    assert client.post("/api/exercises/nope/check", json={"answer": 1}).status_code == 404


def test_pages_render(client):
    index = client.get("/exercises")
    assert index.status_code == 200
    for chapter in range(1, 12):
        assert f'href="/exercises/{chapter}?seed=1"' in index.text
    chapter = client.get("/exercises/7?seed=3")
    assert chapter.status_code == 200 and chapter.text.count('class="answer-form"') == len(
        BANK.chapter(7))
    page = client.get("/exercises/pipeline-bubble?seed=3")
    assert page.status_code == 200 and 'action="/exercises/pipeline-bubble?seed=3"' in page.text


def test_the_form_checks_without_javascript(client):
    t = BANK.templates["moe-capacity"]
    expected = t.solve(t.given(2)).answer
    page = client.post("/exercises/moe-capacity?seed=2", data={"answer": str(expected),
                                                                "action": "check"})
    assert page.status_code == 200 and "✓ Right" in page.text
    assert page.headers["cache-control"] == "no-store"
    fragment = client.post("/exercises/moe-capacity?seed=2", data={"answer": "1",
                                                                    "action": "check"},
                           headers={"HX-Request": "true"})
    assert "Not yet" in fragment.text and "<html" not in fragment.text
    coords = client.post("/exercises/layout-rank-coords?seed=2", data={"action": "reveal"},
                         headers={"HX-Request": "true"})
    assert 'class="solution"' in coords.text
    unread = client.post("/exercises/mfu?seed=2", data={"answer": "3 parsecs",
                                                         "action": "check"})
    assert "Could not read that" in unread.text and 'value="3 parsecs"' in unread.text


def _forms_of(t, answer) -> set[str]:
    """The ways a page could spell the answer (only distinctive ones: digits enough not to
    occur by chance)."""
    forms: set[str] = set()
    if t.kind in ("number", "integer"):
        x = float(answer)
        texts = [repr(x), f"{x:g}", f"{x:.3g}", f"{x:.4g}", f"{x:.5g}", f"{x:e}", num(x),
                 num(x, 4), num(x, 3), amount(x, t.unit)]
        if x.is_integer():
            texts += [str(int(x)), f"{int(x):,}"]
        base = x * PROBLEM_UNITS[t.unit].factor
        for f in (1e3, 1e6, 1e9, 1e12, 2**20, 2**30, 2**40, 1e-3, 1e-6, 0.01):
            texts += [f"{base / f:.3g}", f"{base / f:.4g}"]
        texts += amount(x, t.unit).replace("(", " ").replace(")", " ").split("  ")
        forms = {s.strip() for s in texts if len(re.sub(r"\D", "", s)) >= 3}
    elif t.kind == "ranks" and len(answer) >= 3:
        forms = {", ".join(map(str, answer)), str(list(answer))}
    elif t.kind == "coords":
        forms = {expected_text(t, answer), str(answer)}
    return forms


@pytest.mark.parametrize("id_", [t.id for t in templates()])
def test_every_problem_reveals_and_checks_its_own_answer(client, id_):
    """The revealed answer and solution of every problem are JSON (no numpy scalar left in
    them: that was a 500), and the answer they reveal is judged right."""
    for seed in (0, 1):
        shown = client.post(f"/api/exercises/{id_}/check?seed={seed}", json={"reveal": True})
        assert shown.status_code == 200, (seed, shown.text[:200])
        expected = shown.json()["expected"]
        assert shown.json()["solution"], seed
        again = client.post(f"/api/exercises/{id_}/check?seed={seed}",
                            json={"answer": expected})
        assert again.status_code == 200 and again.json()["correct"], (seed, expected)


@pytest.mark.parametrize("id_", [t.id for t in templates()])
def test_an_unanswered_problem_never_contains_its_answer(client, id_):
    t = BANK.templates[id_]
    for seed in (0, 1, 2):
        worked = t.solve(t.given(seed))
        page = client.get(f"/exercises/{id_}?seed={seed}").text
        # the deck-box settings every page carries (sizes in px, not the problem's numbers)
        page = re.sub(r'<meta name="shardscope-box"[^>]*>', "", page)
        api = client.get(f"/api/exercises/{id_}?seed={seed}").text
        body = client.get(f"/api/exercises/{id_}?seed={seed}").json()
        said = " ".join([body["prompt"], body["scene_url"]]
                        + [given_text(v) for v in body["given"].values()]
                        + [str(v) for v in body["given"].values()])
        for text in (page, api):
            for marker in ('data-correct', 'class="solution"', '"expected"', "expected_text",
                           "data-answer"):
                assert marker not in text
            for form in _forms_of(t, worked.answer):
                if form in said:          # the givens themselves, not a leak
                    continue
                # as a number of its own, not digits inside another ("201" in "2019")
                pattern = r"(?<![\d.,])" + re.escape(form) + r"(?![\d])"
                assert not re.search(pattern, text), (seed, form)


def test_sheets_and_keys(client):
    sheet = client.get("/exercises/5/sheet.html?seed=4&n=8")
    key = client.get("/exercises/5/key.html?seed=4&n=8")
    assert sheet.status_code == key.status_code == 200
    assert sheet.text.count('class="sheet-problem"') == 8
    chapter = BANK.chapter(5)
    for i in range(8):
        t, seed = chapter[i % len(chapter)], 4 + i // len(chapter)
        assert f"/exercises/{t.id}?seed={seed}" in sheet.text
        shown = expected_text(t, t.solve(t.given(seed)).answer)
        assert shown in key.text and shown not in sheet.text
    first = client.get("/exercises/5/sheet.pdf?seed=4&n=8")
    again = client.get("/exercises/5/sheet.pdf?seed=4&n=8")
    assert first.headers["content-type"] == "application/pdf"
    assert first.content[:5] == b"%PDF-" and first.content == again.content
    assert client.get("/exercises/5/key.pdf?seed=4&n=8").content != first.content
    assert client.get("/exercises/5/sheet.pdf?seed=4&n=99").status_code == 422


def test_the_command_line_prints_a_problem_and_checks_an_answer(capsys):
    t = BANK.templates["zero-model-states"]
    answer = t.solve(t.given(7)).answer
    assert main(["exercise", "zero-model-states", "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert t.prompt(t.given(7)) in out and str(answer) not in out
    assert main(["exercise", "zero-model-states", "--seed", "7", "--answer",
                 f"{answer / 1e9} GB"]) == 0
    assert "right" in capsys.readouterr().out
    assert main(["exercise", "zero-model-states", "--seed", "7", "--answer", "1 GB"]) == 1
    assert main(["exercise", "zero-model-states", "--seed", "7", "--answer", "1 ms"]) == 2
    assert "time" in capsys.readouterr().err
    assert main(["exercise", "nope"]) == 2
    assert main(["exercise", "list"]) == 0
    assert "zero-model-states" in capsys.readouterr().out
