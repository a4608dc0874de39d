"""The owner's verdict in a real Chromium against a real ``manage.py serve`` (issue 24)."""
from __future__ import annotations

import pytest

from tests.frontend.conftest import free_phone, save_screenshot

pytestmark = pytest.mark.browser

NOTE = "It set an alarm for 7 pm, I asked for 7 am"


def test_the_owner_says_no_and_the_admin_sees_it_first_on_the_review(login, kairos_server):
    from playwright.sync_api import expect

    free_phone(kairos_server, "sim-5")
    code, task = kairos_server.api("POST", "/api/tasks", kairos_server.token("user"), {
        "instruction": "Set an alarm for 7 am", "device": "sim-5", "threshold": 5})
    assert code == 201, task
    page = login("user")
    page.goto(f"{kairos_server.url}/tasks/{task['id']}/")
    # Not finished: nothing to judge yet.
    expect(page.locator("#verdict-form")).to_be_hidden()
    # It ends (an operator stops it): the page asks, without a reload.
    code, _ = kairos_server.api("POST", f"/api/tasks/{task['id']}/abort",
                                kairos_server.token("operator"))
    assert code == 200
    form = page.locator("#verdict-form")
    expect(form).to_be_visible()
    expect(form).to_contain_text("Did Kairos do what you asked?")
    page.fill("#verdict-note", NOTE)
    page.click("#verdict-no")
    expect(page.locator("#verdict")).to_contain_text("did not do what you asked")
    expect(page.locator("#verdict-text")).to_have_text(NOTE)
    expect(page.locator("#verdict-form")).to_have_count(0)
    save_screenshot(page, "task-verdict-no")

    admin = login("admin")
    admin.goto(kairos_server.url + "/review/")
    said_no = admin.locator("#said-no")
    expect(said_no).to_be_visible()
    first = said_no.locator("li").first
    expect(first).to_contain_text("Set an alarm for 7 am")
    expect(first.locator(".verdict-note")).to_have_text(NOTE)
    # It is above the log of handoffs.
    box, log = said_no.bounding_box(), admin.locator("#log").bounding_box()
    assert box["y"] < log["y"]
    save_screenshot(admin, "review-said-no")
