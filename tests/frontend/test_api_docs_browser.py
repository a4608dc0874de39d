"""``/api/docs`` works on a machine without internet (issue 15.11): Swagger UI's files
come from the app, and the page lists the API's operations in a real Chromium whose every
request off this server is refused."""
from __future__ import annotations

from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_the_api_docs_render_with_no_internet(browser, kairos_server):
    context = browser.new_context()
    outside: list[str] = []
    here = urlparse(kairos_server.url).netloc

    def only_this_server(route):
        if urlparse(route.request.url).netloc == here:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_this_server)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(kairos_server.url + "/api/docs")
        expect(page.locator(".swagger-ui .info .title"), str(errors)).to_contain_text("Kairos API")
        expect(page.locator(".opblock-summary-path", has_text="/api/tasks/{task_id}/abort")
               ).to_be_visible()
        assert outside == []
    finally:
        context.close()
