"""Fixtures shared by every test: an in-process client, a live server, and a Chromium page that
fails the test on console errors or on any request leaving the server's origin."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.jobs.runner import JobRunner, kill_tree

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"

# Every app a test builds without a runner of its own (create_app()) keeps its jobs in this
# session's own data directory, never in the user's state directory: another checkout's server
# may be using that one. A server a test starts gets a folder of its own (one runner per folder).
DATA = Path(tempfile.mkdtemp(prefix="shardscope-test-data-"))
os.environ["SHARDSCOPE_DATA"] = str(DATA)


def pytest_unconfigure(config):
    shutil.rmtree(DATA, ignore_errors=True)


@pytest.fixture(scope="session")
def runner():
    runner = JobRunner(concurrency=1, queue_limit=8, timeout_s=90, max_world=8)
    yield runner
    runner.shutdown()


@pytest.fixture(scope="session")
def client(runner):
    with TestClient(create_app(runner)) as client:
        yield client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def live_server():
    """The app under uvicorn on 127.0.0.1 and a free port; stopped by its own pid."""
    port = free_port()
    # a data directory of its own, so that a server another test starts runs its own jobs
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SHARDSCOPE_DATA": str(DATA / "live")}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory",
                             "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
                            cwd=ROOT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(base + "/", timeout=1).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                kill_tree(proc.pid)
                raise RuntimeError("the live server did not start")
            time.sleep(0.2)
    yield base
    kill_tree(proc.pid)


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync",
                 "--disable-quic"]


def launch_chromium(playwright):
    """Debian's Chromium where it exists; Playwright's own browser elsewhere."""
    if Path(CHROMIUM).exists():
        return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    subprocess.run([sys.executable, "-m", "playwright", "install", "chromium"], check=False)
    return playwright.chromium.launch(args=CHROMIUM_ARGS)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server, request):
    """A fresh page. After the test: no console errors, no request to another origin."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    errors: list[str] = []
    foreign: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def check_origin(req):
        url = req.url
        if not (url.startswith(live_server) or url.startswith(("data:", "blob:", "about:"))):
            foreign.append(url)
    page.on("request", check_origin)
    page.base = live_server
    page.console_errors = errors
    expected: list[str] = []
    # A test that provokes an error response on purpose names it: Chromium logs every 4xx
    # load as a console error, and a prefetch of the same bad state may land after the test.
    page.expect_console_error = expected.append
    yield page
    if request.node.rep_call.failed if hasattr(request.node, "rep_call") else False:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert not foreign, f"requests left the origin: {foreign}"
    unexpected = [e for e in errors if not any(x in e for x in expected)]
    assert not unexpected, f"console errors: {unexpected}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)
