"""Issue 26 in real Chromium: what an operator, an admin and a user see.

This module runs its own server with a 5 s take-over timeout and a 1 s sweep, so a
take-over nobody uses lapses while the test watches.
"""
from __future__ import annotations

import re
import uuid
from typing import Any, Iterator

import pytest
from playwright.sync_api import expect

from tests.frontend.conftest import running_server
from tests.frontend.test_console_browser import add_operator, queue_row

pytestmark = pytest.mark.browser

TIMEOUT = 30_000


@pytest.fixture(scope="module")
def kairos_server(tmp_path_factory) -> Iterator[Any]:
    with running_server(tmp_path_factory.mktemp("kairos-i26"), KAIROS_TAKEOVER_TIMEOUT="5",
                        KAIROS_SWEEP_INTERVAL="1") as server:
        yield server


@pytest.fixture(scope="module")
def operator_token(kairos_server) -> str:
    return kairos_server.token("operator")


@pytest.fixture
def task_factory(kairos_server, operator_token):
    created: list[str] = []

    def _create(instruction: str = "Turn on Wi-Fi", device: str = "sim-1",
                threshold: float = 5) -> dict[str, Any]:
        text = f"{instruction} [{uuid.uuid4().hex[:6]}]"
        status, task = kairos_server.api("POST", "/api/tasks", operator_token, {
            "instruction": text, "device": device, "threshold": threshold})
        assert status == 201, task
        created.append(task["id"])
        return task

    yield _create
    for task_id in created:
        kairos_server.api("POST", f"/api/tasks/{task_id}/abort", operator_token)


def test_an_admin_who_reassigns_a_ticket_to_themselves_holds_it(
        login, kairos_server, operator_token, task_factory):
    """Item 2: 'admin' is the dropdown's default; the reassign used to free the ticket."""
    task = task_factory(device="sim-2")
    operator = login("operator")
    operator.goto(kairos_server.url + "/console/")
    row = queue_row(operator, task)
    ticket_id = row.get_attribute("data-ticket-id")
    row.locator("a").click()

    admin = login("admin")
    admin.goto(kairos_server.url + f"/console/tickets/{ticket_id}/")
    expect(admin.locator("#reassign-to")).to_have_value("admin")
    admin.get_by_role("button", name="Reassign", exact=True).click()
    expect(admin.locator("#holder")).to_contain_text("held by you")
    expect(operator.locator("#holder")).to_contain_text("held by admin")
    _, ticket = kairos_server.api("GET", f"/api/tickets/{ticket_id}", operator_token)
    assert ticket["status"] == "claimed" and ticket["assignee"] == "admin"
    expect(operator.locator("#holder")).to_contain_text("held by admin")
    operator.keyboard.press("a")  # the operator's A must not approve it under the admin
    _, ticket = kairos_server.api("GET", f"/api/tickets/{ticket_id}", operator_token)
    assert ticket["status"] == "claimed"


def test_an_unused_take_over_goes_back_to_the_queue_and_says_why(
        login, kairos_server, operator_token, task_factory):
    """Item 1: T, then the browser closed; the task comes back as a lapsed ticket."""
    task = task_factory(device="sim-3")
    add_operator(kairos_server, "operator2")
    first = login("operator")
    first.goto(kairos_server.url + "/console/")
    row = queue_row(first, task)
    ticket_id = row.get_attribute("data-ticket-id")
    row.locator("a").click()
    expect(first.locator("#holder")).to_contain_text("Ticket open")
    first.keyboard.press("t")
    expect(first.locator("#holder")).to_contain_text("You took over")
    first.context.close()  # the browser closed: nobody will hand back

    second = login("operator2")
    second.goto(kairos_server.url + "/console/")
    lapsed = queue_row(second, task, exclude=ticket_id)
    expect(lapsed).to_contain_text("Take-over lapsed", timeout=TIMEOUT)
    lapsed.locator("a").click()
    expect(second.locator(".note")).to_contain_text("The take-over by operator lapsed")
    second.get_by_role("button", name="Approve", exact=True).click()
    expect(second).to_have_url(kairos_server.url + "/console/")
    _, shown = kairos_server.api("GET", f"/api/tasks/{task['id']}", operator_token)
    assert shown["status"] != "taken_over"
