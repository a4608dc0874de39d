"""The JSON API: authentication, JSON 4xx errors with a detail, and the ticket flow."""
from __future__ import annotations


import pytest

from agents.brain.backends.base import Proposal
from agents.runtime.models import Ticket
from devices.actions import Action

pytestmark = pytest.mark.django_db(transaction=True)


def low_confidence_click(ctx):
    return Proposal(Action("CLICK", x=100, y=100), confidence=1.0)


def test_the_api_requires_authentication(api):
    status, body = api("get", "/api/devices", user=None)
    assert status == 401 and body["detail"]


def test_devices_are_listed_with_their_screen_size(api):
    status, body = api("get", "/api/devices")
    assert status == 200
    assert {d["name"] for d in body} == {"sim-1", "sim-2"}
    assert all(d["width"] == 1080 and d["height"] == 2400 for d in body)


@pytest.mark.parametrize("payload, status, fragment", [
    ({"instruction": "Turn on Wi-Fi", "device": "no-such-phone"}, 404, "unknown device"),
    ({"instruction": "Turn on Wi-Fi", "device": "sim-1", "threshold": 7}, 400, "between 0 and 5"),
    ({"instruction": "Turn on Wi-Fi", "device": "sim-1", "threshold": -1}, 400, "between 0 and 5"),
    ({"instruction": "   ", "device": "sim-1"}, 400, "empty"),
    ({"instruction": "x" * 100_000, "device": "sim-1"}, 400, "at most 2000"),
    ({"device": "sim-1"}, 400, "instruction"),
])
def test_bad_task_requests_get_a_json_error(api, payload, status, fragment):
    code, body = api("post", "/api/tasks", body=payload)
    assert code == status
    assert fragment in body["detail"]


def test_a_task_is_created_by_device_name_and_shown(api, phones, inline_steps):
    status, body = api("post", "/api/tasks", user="user",
                       body={"instruction": "Turn on Wi-Fi", "device": "sim-1"})
    assert status == 201 and body["status"] == "running" and body["threshold"] == 4.0
    status, shown = api("get", f"/api/tasks/{body['id']}", user="user")
    assert status == 200 and shown["instruction"] == "Turn on Wi-Fi"
    assert shown["steps"] == [] and shown["tickets"] == []


def test_end_users_do_not_see_other_peoples_tasks_or_tickets(api, phones, inline_steps, demo):
    _, body = api("post", "/api/tasks", user="operator",
                  body={"instruction": "Turn on Wi-Fi", "device": "sim-1"})
    status, _ = api("get", f"/api/tasks/{body['id']}", user="user")
    assert status == 404
    status, detail = api("get", "/api/tickets?status=open", user="user")
    assert status == 403 and "operators" in detail["detail"]


def test_resolving_with_an_invalid_action_is_a_400_and_a_second_resolve_a_409(
        api, phones, inline_steps, scripted):
    scripted([low_confidence_click, lambda ctx: Proposal(Action("COMPLETE"), confidence=5.0)])
    api("post", "/api/tasks", body={"instruction": "Tap the corner", "device": "sim-1",
                                    "backend": "scripted"})
    inline_steps.drain()
    status, tickets = api("get", "/api/tickets?status=open")
    assert status == 200 and len(tickets) == 1
    ticket = tickets[0]
    assert ticket["kind"] == "intervention" and ticket["reason"] == "low_confidence"
    assert ticket["proposed_action"] == {"type": "CLICK", "x": 100, "y": 100}

    url = f"/api/tickets/{ticket['id']}/resolve"
    status, body = api("post", url, body={"decision": "edit", "action": {"type": "SWIPE_LEFT"}})
    assert status == 400 and "unknown action type" in body["detail"]
    status, body = api("post", url, body={"decision": "maybe"})
    assert status == 400 and "decision" in body["detail"]

    status, body = api("post", url, body={"decision": "approve"})
    assert status == 200 and body["status"] == "resolved"
    status, body = api("post", url, body={"decision": "approve"})
    assert status == 409 and "no longer open" in body["detail"]


def test_claim_by_a_second_operator_is_a_409(api, phones, inline_steps, scripted, demo):
    from django.contrib.auth.models import Group, User

    second = User.objects.create_user("operator2", password="x" * 12)
    second.groups.add(Group.objects.get(name="operators"))
    demo["operator2"] = second
    scripted([low_confidence_click])
    api("post", "/api/tasks", body={"instruction": "Tap the corner", "device": "sim-1",
                                    "backend": "scripted"})
    inline_steps.drain()
    ticket = Ticket.objects.get()
    assert api("post", f"/api/tickets/{ticket.id}/claim")[0] == 200
    status, body = api("post", f"/api/tickets/{ticket.id}/claim", user="operator2")
    assert status == 409 and "operator holds this ticket" in body["detail"]


def test_the_openapi_document_describes_the_api(client):
    response = client.get("/api/openapi.json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert "/api/tasks" in paths and "/api/tickets/{ticket_id}/resolve" in paths


def test_healthz_reports_each_component(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"db": "ok", "broker": "ok", "channel_layer": "ok"}
