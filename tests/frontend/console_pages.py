"""What the console's browser tests share: finding a ticket's queue row, claiming it,
adding an operator to a running server."""
from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.frontend.conftest import PASSWORD

TIMEOUT = 20_000  # ms; the first step includes a cold device observation


def queue_row(page: Any, task: dict[str, Any], exclude: str | None = None) -> Any:
    """The queue row of ``task``'s open ticket, waiting for it to arrive live."""
    rows = page.locator("#queue tbody tr[data-ticket-id]", has_text=task["instruction"][:59])
    if exclude:
        rows = rows.locator(f"xpath=self::*[not(@data-ticket-id='{exclude}')]")
    expect(rows.first).to_be_visible(timeout=TIMEOUT)
    return rows.first


def open_ticket(page: Any, row: Any) -> str:
    ticket_id = row.get_attribute("data-ticket-id")
    row.locator("a").click()
    expect(page).to_have_url(re.compile(rf"/console/tickets/{ticket_id}/$"))
    # Opening a ticket only shows it; Claim takes it.
    page.get_by_role("button", name="Claim", exact=True).click()
    expect(page.locator("#holder")).to_contain_text("held by you", timeout=TIMEOUT)
    return ticket_id


def add_operator(kairos_server: Any, username: str) -> None:
    kairos_server.manage("shell", "-c", (
        "from django.contrib.auth.models import Group, User\n"
        f"u, _ = User.objects.get_or_create(username='{username}')\n"
        f"u.set_password('{PASSWORD}'); u.save()\n"
        "u.groups.add(Group.objects.get(name='operators'))\n"))
