"""HTTP caching by the book (issue 29; RFC 9110 §8.8.3 and §13.1.2, RFC 9111 §5.2): every page,
fragment, embed, /api, /svg and /export answer carries a strong ETag and a public max-age, an
If-None-Match that names it is a 304 computed before anything is parsed or rendered, a changed
query or a new version of the app never matches an old tag, and jobs, reports and uploads are
no-store. Static files under the current asset version never change."""

from __future__ import annotations

import re

import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient

from app import http_cache
from app.caches import LAYERS
from app.http_cache import ANSWER_MAX_AGE, PAGE_MAX_AGE, canonical_query, pure
from app.jobs.runner import JobRunner
from app.main import SCENES, create_app
from app.templating import asset_version

HX = {"HX-Request": "true"}
RESTORE = {**HX, "HX-History-Restore-Request": "true"}

KINDS = [  # (what, URL, request headers, max-age)
    ("page", "/collective?world=5", {}, PAGE_MAX_AGE),
    ("fragment", "/collective?world=5", HX, ANSWER_MAX_AGE),
    ("history restore", "/collective?world=5", RESTORE, PAGE_MAX_AGE),
    ("embed", "/embed/pipeline?stages=3", {}, PAGE_MAX_AGE),
    ("api", "/api/zero?dp=6", {}, ANSWER_MAX_AGE),
    ("svg", "/svg/pipeline?stages=3&frame=2", {}, ANSWER_MAX_AGE),
    ("export", "/export/collective.html?world=3&count=6", {}, ANSWER_MAX_AGE),
    ("handout", "/memory/handout?dp=4", {}, PAGE_MAX_AGE),
    ("home", "/", {}, PAGE_MAX_AGE),
]


def tokens(header: str) -> set[str]:
    return {v.strip().lower() for v in header.split(",") if v.strip()}


def strong_tag(response) -> str:
    tag = response.headers["etag"]
    assert re.fullmatch(r'"[0-9a-f]{10}-[0-9a-f]{24}"', tag), tag  # quoted, never W/
    return tag


@pytest.mark.parametrize("what,url,headers,age", KINDS, ids=[k[0] for k in KINDS])
def test_every_pure_answer_has_a_strong_tag_a_max_age_and_a_304(client, what, url, headers, age):
    first = client.get(url, headers=headers)
    assert first.status_code == 200, first.text[:300]
    tag = strong_tag(first)
    assert first.headers["cache-control"] == f"public, max-age={age}"
    again = client.get(url, headers={**headers, "If-None-Match": tag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == tag
    assert again.headers["cache-control"] == first.headers["cache-control"]
    assert tokens(again.headers["vary"]) == tokens(first.headers["vary"])
    # a list of tags, a weak form of it, and * match too (RFC 9110 §13.1.2)
    for header in (f'"nope", {tag}', f"W/{tag}", "*"):
        assert client.get(url, headers={**headers, "If-None-Match": header}).status_code == 304
    assert client.get(url, headers={**headers, "If-None-Match": '"other"'}).status_code == 200


@pytest.mark.parametrize("slug", [s.slug for s in SCENES])
def test_page_fragment_and_restore_are_three_representations(client, slug):
    page = client.get(f"/{slug}")
    fragment = client.get(f"/{slug}", headers=HX)
    restore = client.get(f"/{slug}", headers=RESTORE)
    assert fragment.text.lstrip().startswith('<section id="stage"')
    assert "<html" in page.text and "<html" in restore.text
    assert len({strong_tag(page), strong_tag(fragment), strong_tag(restore)}) == 3
    for response in (page, fragment, restore):
        assert {"hx-request", "hx-history-restore-request", "accept-encoding"} <= tokens(
            response.headers["vary"])
    # the fragment's tag does not answer for the page (a browser asks with the tag it holds)
    assert client.get(f"/{slug}", headers={"If-None-Match": fragment.headers["etag"]}
                      ).status_code == 200


@pytest.mark.parametrize("what,url,headers,age", KINDS[:8], ids=[k[0] for k in KINDS[:8]])
def test_a_304_is_answered_before_anything_is_parsed_or_rendered(client, monkeypatch, what, url,
                                                                 headers, age):
    tag = strong_tag(client.get(url, headers=headers))
    for layer in LAYERS:
        layer.clear()  # nothing kept: a render now would have to simulate from scratch

    def forbidden(*args, **kwargs):
        raise AssertionError("parsed or rendered for a request its tag answers")

    import app.routes.export as export_routes
    import app.routes.scenes as scene_routes
    for module, name in ((scene_routes, "parse"), (scene_routes, "render"),
                         (scene_routes, "trace_of"), (export_routes, "parse"),
                         (export_routes, "export")):
        monkeypatch.setattr(module, name, forbidden)
    assert client.get(url, headers={**headers, "If-None-Match": tag}).status_code == 304
    head = client.head(url, headers={**headers, "If-None-Match": tag})
    assert head.status_code == 304 and head.headers["etag"] == tag


CHANGES = [("/collective?world=5", "/collective?world=6", HX),
           ("/collective?world=5", "/collective?world=5&frame=1", HX),
           ("/pipeline?stages=4", "/pipeline?stages=4&schedule=gpipe", {}),
           ("/api/zero?dp=6", "/api/zero?dp=7", {}),
           ("/svg/pipeline?stages=3&frame=2", "/svg/pipeline?stages=3&frame=1", {}),
           ("/api/collective?world=4&world=5", "/api/collective?world=5&world=4", {}),
           ("/export/collective.png?world=3&count=6", "/export/collective.png?world=4&count=8", {})]


@pytest.mark.parametrize("old,new,headers", CHANGES, ids=[c[1] for c in CHANGES])
def test_a_changed_query_never_gets_an_old_body(client, old, new, headers):
    before = client.get(old, headers=headers)
    after = client.get(new, headers={**headers, "If-None-Match": before.headers["etag"]})
    assert after.status_code == 200
    assert after.content != before.content
    assert strong_tag(after) != before.headers["etag"]


def test_the_same_pairs_in_another_order_are_one_state(client):
    a = client.get("/api/collective?world=5&count=10")
    b = client.get("/api/collective?count=10&world=5", headers={"If-None-Match": a.headers["etag"]})
    assert b.status_code == 304
    # one key's values keep their order: the last is the one read
    assert canonical_query(b"b=2&a=1&a=3") == "a=1&a=3&b=2"
    assert canonical_query(b"a=3&a=1") != canonical_query(b"a=1&a=3")


def test_gzipped_and_plain_answers_have_their_own_tags(client):
    plain = client.get("/collective?world=5", headers={**HX, "Accept-Encoding": "identity"})
    zipped = client.get("/collective?world=5", headers={**HX, "Accept-Encoding": "gzip"})
    assert "content-encoding" not in plain.headers
    assert zipped.headers["content-encoding"] == "gzip"
    assert strong_tag(plain) != strong_tag(zipped)  # a strong tag names the bytes sent
    assert zipped.text == plain.text  # (httpx decodes the gzip)


def test_the_same_url_renders_the_same_bytes_after_the_caches_are_emptied(client):
    # a strong tag promises byte-identical answers: a render must be a pure function of the URL
    urls = [("/pipeline?stages=5", HX), ("/moe", {}), ("/api/memory?dp=3", {}),
            ("/svg/collective?world=7&frame=3", {})]
    first = [client.get(url, headers=h).content for url, h in urls]
    for layer in LAYERS:
        layer.clear()
    assert [client.get(url, headers=h).content for url, h in urls] == first


def test_a_new_version_of_the_app_changes_every_tag(client, monkeypatch):
    old = {what: client.get(url, headers=h).headers["etag"] for what, url, h, _ in KINDS}
    monkeypatch.setattr(http_cache, "code_version", lambda: "a newer version")
    # (a runner of its own: the app's shutdown stops its runner, not the session's)
    with TestClient(create_app(JobRunner())) as upgraded:
        for what, url, headers, _ in KINDS:
            answer = upgraded.get(url, headers={**headers, "If-None-Match": old[what]})
            assert answer.status_code == 200, what
            assert strong_tag(answer) != old[what], what


def test_the_version_hashes_the_code_templates_and_static_files(tmp_path):
    for folder in ("app", "templates", "static"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "f.txt").write_text("one")
    version = http_cache.code_version.__wrapped__
    first = version(tmp_path)
    for folder in ("app", "templates", "static"):
        (tmp_path / folder / "f.txt").write_text("two")
        assert version(tmp_path) != first, folder
        (tmp_path / folder / "f.txt").write_text("one")
    assert version(tmp_path) == first


def test_a_route_added_later_gets_tags_by_declaring_itself_pure():
    router = APIRouter()

    @router.get("/api/new-thing")
    @pure(max_age=30)
    def new_thing(n: int = 1):
        return {"n": n}

    @router.get("/api/not-declared")
    def not_declared():
        return {}

    app = create_app(JobRunner())
    app.include_router(router)
    with TestClient(app) as client:
        answer = client.get("/api/new-thing?n=2")
        assert answer.headers["cache-control"] == "public, max-age=30"
        assert client.get("/api/new-thing?n=2", headers={"If-None-Match": strong_tag(answer)}
                          ).status_code == 304
        assert "etag" not in client.get("/api/not-declared").headers


def test_jobs_reports_and_uploads_are_never_stored(client):
    posted = client.post("/api/verify/collective?world=9&count=9")  # 422: a rank too many
    assert posted.headers["cache-control"] == "no-store"
    report = client.post("/api/verify/collective/report?world=2&count=4", content=b"{}")
    assert report.headers["cache-control"] == "no-store"
    for url in ("/api/verify/jobs/nope", "/api/verify/jobs/nope/trace", "/verify/jobs/nope"):
        assert client.get(url).headers["cache-control"] == "no-store", url
        assert "etag" not in client.get(url).headers


def test_a_rejected_state_is_not_kept(client):
    bad = client.get("/collective?world=999", headers=HX)
    assert bad.status_code == 422
    assert "cache-control" not in bad.headers and "etag" not in bad.headers


@pytest.mark.parametrize("slug", [s.slug for s in SCENES])
def test_a_stage_fragment_brings_no_style_or_script(client, slug):
    # a stylesheet added and removed with every slider move restyles the whole page, and htmx
    # drops a fragment's scripts: what a stage needs is in the page's CSS and scripts
    fragment = client.get(f"/{slug}", headers=HX).text
    assert "<style" not in fragment and "<script" not in fragment


def test_versioned_assets_are_immutable_others_revalidate(client):
    page = client.get("/collective").text
    assets = re.findall(r'(?:href|src)="(/static/[^"]+\?v=[0-9a-f]+)"', page)
    assert any(a.startswith("/static/js/stage.js") for a in assets), assets
    for url in assets:
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.headers["cache-control"] == "public, max-age=31536000, immutable", url
    assert asset_version() in assets[0]
    for url in ("/static/js/stage.js", "/static/js/stage.js?v=0000000000"):
        assert "cache-control" not in client.get(url).headers, url

