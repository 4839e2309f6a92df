"""/api/docs in Chromium under the CSP: Swagger UI renders every scene's operations with their
parameters, and nothing leaves the origin (the `page` fixture fails on either)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_swagger_ui_lists_a_scene_with_its_parameters(page):
    page.goto(page.base + "/api/docs")
    # Swagger UI reads and lays out the whole ~860 KB schema before it draws a tag: on 2 busy
    # cores that can take longer than Playwright's default 5 s
    expect(page.locator(".opblock-tag", has_text="Pipeline parallelism")).to_be_visible(timeout=30_000)
    page.locator(".opblock-tag", has_text="Pipeline parallelism").click()
    page.locator(".opblock-summary-path", has_text="/api/pipeline").first.click()
    expect(page.locator(".parameters tr[data-param-name='microbatches']")).to_be_visible()
    assert "1024" in page.locator(".parameters tr[data-param-name='microbatches']").inner_text()
