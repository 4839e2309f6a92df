"""The documentation site (mkdocs.yml, docs/): it builds with `mkdocs build --strict` (a broken
link, a missing anchor or a page left out of the nav fails), the built pages reference no other
origin (no CDN, no web fonts, no analytics), every scene has its chapter page, the README stays
a front page whose links land on the site's pages, and `make bench` writes into the Performance
page's markers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from app.main import SCENES
from bench import run as bench_run

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_LINES = 250
URL_ATTRS = {"src", "href", "srcset", "poster", "action", "data", "formaction"}


class _Urls(HTMLParser):
    """Every URL-valued attribute of a page, as (tag, attribute, value)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in URL_ATTRS and value is not None:
                urls = [u.strip().split(" ")[0] for u in value.split(",")] if name == "srcset" else [value]
                self.found += [(tag, name, u) for u in urls if u]


def same_site(url: str) -> bool:
    """A relative URL, a path on this site, a fragment or inline data; nothing with a host."""
    parts = urlsplit(url)
    return (parts.scheme in ("", "data")) and not parts.netloc and not url.startswith("//")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    try:
        import mkdocs  # noqa: F401
        import material  # noqa: F401
    except ImportError:
        pytest.fail("MkDocs and its Material theme are missing: `make setup-test` installs the "
                    "`docs` extra of pyproject.toml")
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                            str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stderr[-4000:]}"
    return out


def test_every_reference_of_the_built_site_stays_on_the_site(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 25, [p.name for p in pages]
    foreign = []
    for page in pages:
        parser = _Urls()
        parser.feed(page.read_text())
        foreign += [(str(page.relative_to(site)), tag, attr, url)
                    for tag, attr, url in parser.found if not same_site(url)]
    for sheet in site.rglob("*.css"):
        for url in re.findall(r"""url\(\s*['"]?([^'")]+)""", sheet.read_text()):
            if not same_site(url):
                foreign.append((str(sheet.relative_to(site)), "css", "url", url))
        foreign += [(str(sheet.relative_to(site)), "css", "@import", m)
                    for m in re.findall(r"@import\s+[^;]*", sheet.read_text())]
    assert not foreign, f"the built site references other origins: {foreign[:20]}"
    index = (site / "index.html").read_text()
    assert "fonts.googleapis" not in index and "fonts.gstatic" not in index


def nav_files(items) -> list[str]:
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            for value in item.values():
                out += nav_files(value) if isinstance(value, list) else [value]
    return out


def _mkdocs_config() -> dict:
    # mkdocs.yml uses no !!python tags; a plain YAML load reads its nav
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def test_the_nav_lists_every_page_under_its_sections():
    nav = nav_files(_mkdocs_config()["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(set(nav)) == pages, "mkdocs.yml's nav and docs/*.md differ"
    top = [next(iter(item)) for item in _mkdocs_config()["nav"]]
    for section in ("Course", "Teaching", "Building", "Performance", "Reliability"):
        assert section in top, top


def test_every_scene_has_its_chapter_page():
    """From app.main.SCENES: each scene's path is in the title of a page under docs/course/,
    in the course index and in the README's course table."""
    titles = {p.name: p.read_text().splitlines()[0] for p in (DOCS / "course").glob("*.md")}
    index = (DOCS / "course" / "index.md").read_text()
    readme = README.read_text()
    for scene in SCENES:
        path = f"/{scene.slug}"
        assert any(f"`{path}`" in t for t in titles.values()), (path, titles)
        assert f"`{path}`" in index, path
        assert f"(http://127.0.0.1:8000{path})" in readme, path
        numbers = {int(n) for t in titles.values() if f"`{path}`" in t
                   for n in re.findall(r"\d+", t.split("—")[0])}
        assert {scene.chapter, *scene.also_in} <= numbers, (scene.slug, scene.chapter, numbers)


def test_readme_is_a_front_page_whose_links_land_on_the_site():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    nav = set(nav_files(_mkdocs_config()["nav"]))
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", "\n".join(lines))
    local = [link for link in links if not urlsplit(link).scheme]
    assert local, "the README links nowhere"
    for link in local:
        assert (ROOT / link).exists(), f"README.md links to {link}, which is not there"
        if link.endswith(".md"):
            assert link.startswith("docs/") and link[len("docs/"):] in nav, (
                f"README.md links to {link}, which is not a page of the docs site's nav")
    for command in ("make run", "make test", "make bench", "make docs"):
        assert command in README.read_text(), command


BENCH = "| measure | budget | result |\n|---|---|---|\n| a | b | c |"
SPLIT = "| scene | jump |\n|---|---|\n| `/x` | 1 |"


def test_bench_writes_between_the_performance_page_markers(tmp_path):
    page = tmp_path / "performance.md"
    original = (DOCS / "performance.md").read_text()
    page.write_text(original)
    bench_run.update_docs(BENCH, SPLIT, page=page)
    written = page.read_text()
    assert f"<!-- bench:start -->\n{BENCH}\n<!-- bench:end -->" in written
    assert f"<!-- jump-split:start -->\n{SPLIT}\n<!-- jump-split:end -->" in written
    outside = re.compile(r"<!-- (bench|jump-split):start -->.*?<!-- \1:end -->", re.S)
    assert outside.sub("", written) == outside.sub("", original), "text outside the markers moved"
    bench_run.update_docs(BENCH, "", page=page)  # no split measured: its table is kept
    assert page.read_text() == written
    assert bench_run.PERFORMANCE_PAGE == DOCS / "performance.md"
    assert "bench:start" not in README.read_text()


def test_bench_says_when_the_page_has_lost_its_markers(tmp_path):
    page = tmp_path / "performance.md"
    page.write_text("# Performance\n\nno markers here\n")
    with pytest.raises(SystemExit, match="bench:start"):
        bench_run.update_docs(BENCH, SPLIT, page=page)
    assert page.read_text() == "# Performance\n\nno markers here\n"


@pytest.fixture(scope="module")
def site_server(site):
    """The built site over HTTP on 127.0.0.1 (search runs in a worker, which file:// refuses)."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [(1280, 720), (390, 844)], ids=["1280x720", "phone"])
def test_the_site_reads_offline_in_chromium(browser, site_server, viewport):
    """Home, a chapter and the Performance page: no request leaves the site, no console error,
    every picture loads, nothing scrolls sideways on a phone; search answers offline."""
    phone = viewport[0] < 600
    context = browser.new_context(viewport=dict(zip(("width", "height"), viewport)),
                                  has_touch=phone, is_mobile=phone)
    page = context.new_page()
    foreign, errors = [], []
    page.on("request", lambda r: None if r.url.startswith((site_server, "data:", "blob:"))
            else foreign.append(r.url))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        for path in ("index.html", "course/memory.html", "performance.html"):
            page.goto(f"{site_server}/{path}")
            page.wait_for_load_state("networkidle")
            broken = page.evaluate("[...document.images].filter(i => !i.complete || "
                                   "!i.naturalWidth).map(i => i.src)")
            assert not broken, (path, broken)
            overflow = page.evaluate("document.scrollingElement.scrollWidth - innerWidth")
            assert overflow <= 0, f"{path} scrolls {overflow} px sideways at {viewport}"
        if not phone:
            page.goto(f"{site_server}/index.html")
            page.fill("input[data-md-component='search-query']", "pipeline")
            page.wait_for_selector(".md-search-result__item", timeout=15_000)
            assert page.locator(".md-search-result__item").count() > 0
    finally:
        context.close()
    assert not foreign, f"requests left the site: {foreign}"
    assert not errors, f"console errors: {errors}"
