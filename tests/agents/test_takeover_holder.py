"""Only the operator holding the current take-over controls the phone (issue 11.1)."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from agents.brain.backends.base import Proposal
from agents.runtime.models import Task, TaskStatus
from devices.actions import Action

pytestmark = pytest.mark.django_db(transaction=True)


def low_confidence_click(ctx):
    return Proposal(Action("CLICK", x=100, y=100), confidence=1.0)


def test_an_operator_who_handed_back_cannot_send_input_once_another_took_over(
        api, demo, phones, inline_steps, scripted):
    second = User.objects.create_user("operator2", password="x" * 12)
    second.groups.add(Group.objects.get(name="operators"))
    demo["operator2"] = second
    scripted([low_confidence_click, low_confidence_click])
    _, task = api("post", "/api/tasks", body={"instruction": "Tap the corner",
                                              "device": "sim-1", "backend": "scripted"})
    inline_steps.drain()

    def take_over(user):
        _, tickets = api("get", "/api/tickets?status=open", user=user)
        assert api("post", f"/api/tickets/{tickets[0]['id']}/resolve", user=user,
                   body={"decision": "takeover"})[0] == 200

    take_over("operator")
    assert api("post", f"/api/tasks/{task['id']}/input",
               body={"action": {"type": "PRESS_HOME"}})[0] == 200
    assert api("post", f"/api/tasks/{task['id']}/hand_back")[0] == 200
    inline_steps.drain()
    take_over("operator2")

    status, body = api("post", f"/api/tasks/{task['id']}/input",
                       body={"action": {"type": "PRESS_BACK"}})
    assert status == 403 and "take-over" in body["detail"]
    status, body = api("post", f"/api/tasks/{task['id']}/hand_back")
    assert status == 403
    assert Task.objects.get(id=task["id"]).status == TaskStatus.TAKEN_OVER  # B keeps the phone
    assert api("post", f"/api/tasks/{task['id']}/input", user="operator2",
               body={"action": {"type": "PRESS_BACK"}})[0] == 200


async def test_the_screen_socket_refuses_input_from_an_earlier_holder(
        api, demo, phones, inline_steps, scripted):
    from channels.db import database_sync_to_async

    from tests.websockets import connect

    second = await database_sync_to_async(User.objects.create_user)("operator2", password="x" * 12)
    await database_sync_to_async(lambda: second.groups.add(Group.objects.get(name="operators")))()
    demo["operator2"] = second
    scripted([low_confidence_click, low_confidence_click])

    def set_up() -> str:
        _, task = api("post", "/api/tasks", body={"instruction": "Tap the corner",
                                                  "device": "sim-1", "backend": "scripted"})
        for holder in ("operator", "operator2"):
            inline_steps.drain()
            _, tickets = api("get", "/api/tickets?status=open", user=holder)
            api("post", f"/api/tickets/{tickets[0]['id']}/resolve", user=holder,
                body={"decision": "takeover"})
            if holder == "operator":
                assert api("post", f"/api/tasks/{task['id']}/hand_back")[0] == 200
        return task["device_id"]

    device_id = await database_sync_to_async(set_up)()
    screen, ok = await connect(f"/ws/devices/{device_id}/screen/", demo["operator"])
    assert ok is True
    await screen.send_json_to({"type": "input", "action": {"type": "PRESS_HOME"}})
    while True:
        output = await screen.receive_output(timeout=5)
        if output.get("text") and '"error"' in output["text"]:
            assert "take-over" in output["text"]
            break
        assert output["type"] == "websocket.send" and "input.done" not in (output.get("text") or "")
    await screen.disconnect()
