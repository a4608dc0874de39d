"""An admin sees in real Chromium what the installation learned from a task its operator
decided, and forgets the app (issue 25)."""
from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.frontend.conftest import save_screenshot

pytestmark = pytest.mark.browser
SETTINGS = "com.kairos.settings"


def test_an_admin_sees_what_was_learned_and_forgets_the_app(login, kairos_server):
    # The oracle plays the operator at γ = 5: every step is asked and decided on a ticket,
    # so each decision is remembered.
    result = json.loads(kairos_server.manage(
        "run_task", "--suite", "toggles", "--task", "wifi_on", "--threshold", "5",
        "--operator", "oracle", "--device", "sim-2", "--json"))
    assert result["interventions"] >= 1
    page = login("admin")
    page.goto(kairos_server.url + "/review/")
    page.get_by_role("link", name="Experience").click()
    row = page.locator(f'#experience-apps tr[data-app="{SETTINGS}"]')
    expect(row).to_be_visible()
    row.get_by_role("link", name=SETTINGS).click()
    decisions = page.locator("#experience-decisions")
    expect(decisions).to_contain_text("Turn wifi on")
    save_screenshot(page, "review-experience")

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f'#experience-apps tr[data-app="{SETTINGS}"]').get_by_role(
        "button", name="Forget").click()
    expect(page.locator(".flash").first).to_contain_text(
        f"of {SETTINGS}")
    expect(page.locator(f'#experience-apps tr[data-app="{SETTINGS}"]')).to_have_count(0)
