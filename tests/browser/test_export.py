"""The offline HTML export (issue 14) plays in Chromium with the network cut off: opened from a
file, nothing is requested, the player steps and the frame and caption change."""

from __future__ import annotations

import pytest

from tests.browser.helpers import caption, screenshot

pytestmark = pytest.mark.browser

QUERY = "schedule=1f1b&stages=2&microbatches=4"


def test_offline_html_plays_without_network(browser, client, tmp_path):
    captions = [f["caption"] for f in client.get(f"/api/pipeline?{QUERY}").json()["frames"]]
    r = client.get(f"/export/pipeline.html?{QUERY}&frame=1")
    assert r.status_code == 200
    path = tmp_path / "pipeline.html"
    path.write_bytes(r.content)

    context = browser.new_context(viewport={"width": 1400, "height": 900}, offline=True)
    requested: list[str] = []
    errors: list[str] = []

    def refuse(route):
        if not route.request.url.startswith(path.as_uri()):
            requested.append(route.request.url)
            return route.abort()
        return route.continue_()
    context.route("**/*", refuse)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda req: None if req.url.startswith(("file:", "data:", "about:"))
            else requested.append(req.url))
    try:
        page.goto(path.as_uri())
        assert caption(page).inner_text().strip() == captions[1].strip()
        current = page.locator("svg.deck g.frame.current")
        assert current.first.get_attribute("data-frame") == "1"
        page.click('[data-act="next"]')
        page.wait_for_function("document.querySelector('svg.deck g.frame.current')"
                               ".dataset.frame === '2'")
        assert caption(page).inner_text().strip() == captions[2].strip()
        page.click('[data-act="last"]')
        page.wait_for_function(f"document.querySelector('svg.deck g.frame.current')"
                               f".dataset.frame === '{len(captions) - 1}'")
        assert caption(page).inner_text().strip() == captions[-1].strip()
        # the styles are inlined: the deck is laid out, not an unstyled page
        box = page.locator("svg.deck").first.bounding_box()
        assert box["width"] > 400 and box["height"] > 200
    except Exception:
        screenshot(page, "offline_html")
        raise
    finally:
        page.screenshot(path=str(tmp_path / "shot.png"))
        context.close()
    assert not requested, f"the offline file asked for {requested}"
    assert not errors, f"console errors: {errors}"


def test_export_menu_follows_the_frame(page):
    page.goto(f"{page.base}/pipeline?{QUERY}")
    page.click('[data-act="next"]')
    page.click('[data-act="next"]')
    page.click(".export-menu > summary")
    link = page.locator("[data-export-frame]").first
    assert link.is_visible()
    href = link.get_attribute("href")
    assert href.startswith("/export/pipeline.png?") and href.endswith("&frame=2")
    with page.expect_download() as info:
        page.locator(".export-list a", has_text="PDF").click()
    assert info.value.suggested_filename == "shardscope-pipeline.pdf"
