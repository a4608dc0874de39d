"""A task for a busy phone waits its turn, visibly, and starts by itself (issue 11, item 3).

A real Chromium against a real ``manage.py serve``.
"""
from __future__ import annotations

import pytest

from tests.frontend.conftest import free_phone
from tests.frontend.test_task_browser import LATTE, start_task

pytestmark = pytest.mark.browser

def test_a_queued_task_shows_its_position_and_starts_when_the_phone_frees(login, kairos_server):
    from playwright.sync_api import expect

    operator = kairos_server.token("operator")
    free_phone(kairos_server, "sim-1")
    # An order that leaves the sweetness open: the task asks and keeps the phone meanwhile.
    code, first = kairos_server.api("POST", "/api/tasks", operator, {
        "instruction": LATTE, "device": "sim-1", "threshold": 0})
    assert code == 201 and first["status"] == "running"

    page = login("user")
    task_id = start_task(page, kairos_server, "sim-1")
    expect(page.locator("#task-status")).to_have_text("Queued")
    expect(page.locator("#task-now")).to_have_text(
        "Queued, position 1 — waiting for the phone.")

    kairos_server.api("POST", f"/api/tasks/{first['id']}/abort", operator)

    # No reload: the page hears that its task started.
    expect(page.locator("#task-status")).not_to_have_text("Queued", timeout=20_000)
    expect(page.locator("#task-now")).not_to_contain_text("Queued")
    _, mine = kairos_server.api("GET", f"/api/tasks/{task_id}", operator)
    assert mine["status"] != "queued" and mine["queue_position"] is None
    kairos_server.api("POST", f"/api/tasks/{task_id}/abort", operator)
