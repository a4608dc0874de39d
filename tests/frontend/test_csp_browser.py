"""With ``KAIROS_CSP=1`` the pages still work in a real Chromium: the console's inline
start-up script carries the nonce, its sockets connect and live frames show (issue 11.5)."""
from __future__ import annotations

from typing import Iterator

import pytest
from playwright.sync_api import expect

from tests.frontend.conftest import PASSWORD, KairosServer, running_server

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def csp_server(tmp_path_factory) -> Iterator[KairosServer]:
    with running_server(tmp_path_factory.mktemp("kairos-csp"), KAIROS_CSP="1") as server:
        yield server


def test_the_console_runs_under_the_content_security_policy(browser, csp_server):
    context = browser.new_context()
    page = context.new_page()
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text)
            if "Content Security Policy" in m.text else None)
    try:
        response = page.goto(csp_server.url + "/login/")
        assert "nonce-" in response.headers["content-security-policy"]
        page.fill("input[name=username]", "operator")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url("**/console/")
        # Live frames reach the phone tiles: the inline start-up script ran (nonce), the
        # screen sockets connected (connect-src) and blob images show (img-src).
        expect(page.locator("#devices img[src^='blob:']").first).to_be_attached()
        assert violations == []
    finally:
        context.close()
