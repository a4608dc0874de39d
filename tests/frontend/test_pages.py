"""Server-rendered pages: who sees which surface."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_the_login_page_works_without_javascript(client):
    response = client.get("/login/")
    assert response.status_code == 200
    assert b'name="username"' in response.content and b'name="password"' in response.content


def test_pages_carry_an_icon_and_favicon_ico_leads_to_it(client):
    icon = client.get("/login/").content
    assert b'rel="icon"' in icon and b"favicon.svg" in icon
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response.url.endswith("/frontend/favicon.svg")


def test_anonymous_visitors_are_sent_to_login(client):
    response = client.get("/tasks/")
    assert response.status_code == 302 and response.url.startswith("/login/")


def test_end_users_are_offered_only_their_own_surfaces(client, demo):
    client.force_login(demo["user"])
    page = client.get("/tasks/").content.decode()
    assert "My tasks" in page
    assert 'href="/console/"' not in page and 'href="/review/"' not in page
    assert client.get("/console/").status_code == 403
    assert client.get("/review/").status_code == 403


def test_operators_see_the_console_and_admins_the_review(client, demo):
    client.force_login(demo["operator"])
    page = client.get("/console/").content.decode()
    assert 'href="/console/"' in page and 'href="/review/"' not in page
    client.force_login(demo["admin"])
    page = client.get("/review/").content.decode()
    assert 'href="/review/"' in page and "Handoffs" in page


@pytest.mark.django_db(transaction=True)
def test_only_an_admin_reassigns_a_ticket_and_only_to_an_operator(client, demo, scripted,
                                                                   inline_steps):
    from agents.brain.backends.base import Proposal
    from agents.runtime.models import Ticket
    from agents.runtime.services import lifecycle, tickets
    from devices.actions import Action
    from devices.models import Device

    scripted([lambda ctx: Proposal(Action("PRESS_HOME"), confidence=1.0)])
    lifecycle.create_task(demo["user"], Device.objects.get(name="sim-1"), "Go home",
                          backend="scripted")
    inline_steps.drain()
    ticket = Ticket.objects.get()
    tickets.claim_ticket(ticket, demo["operator"])
    url = f"/console/tickets/{ticket.id}/act"

    client.force_login(demo["operator"])  # an operator may not take it from another
    page = client.post(url, {"decision": "reassign", "assignee": "operator"}, follow=True)
    assert "only admins reassign tickets" in page.content.decode()
    client.force_login(demo["admin"])
    page = client.post(url, {"decision": "reassign", "assignee": "user"}, follow=True)
    assert "tickets can only be given to an operator" in page.content.decode()
    page = client.post(url, {"decision": "reassign", "assignee": "nobody"}, follow=True)
    assert "tickets can only be given to an operator" in page.content.decode()
    ticket.refresh_from_db()
    assert ticket.assignee == demo["operator"]  # nothing changed

    page = client.post(url, {"decision": "reassign", "assignee": "admin"}, follow=True)
    assert "Ticket given to admin" in page.content.decode()
    ticket.refresh_from_db()
    assert ticket.assignee == demo["admin"]
    assert client.get(f"/console/tickets/{ticket.id}/").content.decode().count(
        'id="reassign"') == 1  # admins see the form
    client.force_login(demo["operator"])
    assert 'id="reassign"' not in client.get(f"/console/tickets/{ticket.id}/").content.decode()
