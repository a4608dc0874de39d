"""Open sockets do not outlive the access they were opened with (issue 23.3).

Through the real ASGI application: a user's socket stays open across changes that keep
their access and closes — 4401 no longer logged in, 4403 no longer allowed — as soon as a
logout, a group change, a deactivation or a demotion takes it away, before any later
event of what they no longer may see.
"""
from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, User
from django.test import Client

from agents.runtime import events
from agents.runtime.services import lifecycle
from devices.models import Device
from devices.streaming import device_group
from kairos_web.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def _login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


async def _open(path: str, client: Client) -> WebsocketCommunicator:
    """``path`` opened with ``client``'s session, so the client's logout ends it."""
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    socket = WebsocketCommunicator(application, path, headers=[
        (b"origin", b"http://127.0.0.1"), (b"cookie", cookie)])
    connected, _ = await socket.connect(timeout=5)
    assert connected
    return socket


async def _close_code(socket: WebsocketCommunicator) -> int:
    """Read until the server closes the socket; its close code."""
    while True:
        output = await socket.receive_output(timeout=5)
        if output["type"] == "websocket.close":
            return output.get("code")


async def _operators_hear(text: str) -> None:
    await get_channel_layer().group_send(events.OPERATORS_GROUP, {
        "type": "kairos.event", "event": {"type": "ticket.opened", "ticket": {"note": text}}})


def _task(owner: User, device: str = "sim-1"):
    return lifecycle.create_task(owner, Device.objects.get(name=device), "Turn on Wi-Fi")


def _demote(user: User) -> None:
    user.groups.remove(Group.objects.get(name="operators"))
    user.groups.add(Group.objects.get_or_create(name="end_users")[0])


async def test_an_operator_console_closes_at_logout(demo):
    client = await database_sync_to_async(_login)(demo["operator"])
    socket = await _open("/ws/operator/", client)
    response = await database_sync_to_async(client.post)("/logout/")
    assert response.status_code == 302
    assert await _close_code(socket) == 4401
    await _operators_hear("someone else's instruction")
    assert await socket.receive_nothing(timeout=0.2)


async def test_a_logout_elsewhere_leaves_this_session_open(demo):
    here = await database_sync_to_async(_login)(demo["operator"])
    elsewhere = await database_sync_to_async(_login)(demo["operator"])
    socket = await _open("/ws/operator/", here)
    await database_sync_to_async(elsewhere.post)("/logout/")
    await _operators_hear("still on duty")
    event = await socket.receive_json_from(timeout=5)
    assert event["ticket"]["note"] == "still on duty"
    await socket.disconnect()


async def test_an_operator_removed_from_the_operators_group_is_closed_with_4403(demo):
    client = await database_sync_to_async(_login)(demo["operator"])
    socket = await _open("/ws/operator/", client)
    await database_sync_to_async(_demote)(demo["operator"])
    assert await _close_code(socket) == 4403
    await _operators_hear("someone else's instruction")
    assert await socket.receive_nothing(timeout=0.2)


async def test_a_deactivated_operator_is_closed_with_4401(demo):
    client = await database_sync_to_async(_login)(demo["operator"])
    socket = await _open("/ws/operator/", client)

    def deactivate():
        demo["operator"].is_active = False
        demo["operator"].save()

    await database_sync_to_async(deactivate)()
    assert await _close_code(socket) == 4401


async def test_a_superuser_whose_flag_is_taken_is_closed_with_4403(demo):
    def make_boss():
        boss = User.objects.create_user("boss", password="x" * 12, is_superuser=True)
        return boss, _login(boss)

    boss, client = await database_sync_to_async(make_boss)()
    socket = await _open("/ws/operator/", client)

    def demote():
        boss.is_superuser = False
        boss.save(update_fields=["is_superuser"])

    await database_sync_to_async(demote)()
    assert await _close_code(socket) == 4403


async def test_a_task_page_closes_at_its_owners_logout_and_takes_no_more_messages(demo):
    task = await database_sync_to_async(_task)(demo["user"])
    client = await database_sync_to_async(_login)(demo["user"])
    socket = await _open(f"/ws/tasks/{task.id}/", client)
    assert (await socket.receive_json_from(timeout=5))["type"] == "task.updated"
    await database_sync_to_async(client.post)("/logout/")
    assert await _close_code(socket) == 4401
    await get_channel_layer().group_send(events.task_group(task.id), {
        "type": "kairos.event", "event": {"type": "chat.message", "text": "operator chat"}})
    assert await socket.receive_nothing(timeout=0.2)
    await socket.send_json_to({"type": "chat.message", "text": "sent after logout"})
    assert await socket.receive_nothing(timeout=0.2)
    texts = await database_sync_to_async(
        lambda: list(task.messages.values_list("text", flat=True)))()
    assert "sent after logout" not in texts


async def test_an_operator_on_another_users_task_is_closed_when_demoted(demo):
    task = await database_sync_to_async(_task)(demo["user"])
    client = await database_sync_to_async(_login)(demo["operator"])
    socket = await _open(f"/ws/tasks/{task.id}/", client)
    await socket.receive_json_from(timeout=5)
    await database_sync_to_async(_demote)(demo["operator"])
    assert await _close_code(socket) == 4403


async def test_a_demoted_operator_stops_seeing_another_users_phone(demo):
    task = await database_sync_to_async(_task)(demo["user"])
    client = await database_sync_to_async(_login)(demo["operator"])
    socket = await _open(f"/ws/devices/{task.device_id}/screen/", client)
    assert (await socket.receive_json_from(timeout=5))["type"] == "screen.meta"
    await database_sync_to_async(_demote)(demo["operator"])
    assert await _close_code(socket) == 4403
    await get_channel_layer().group_send(device_group(str(task.device_id)), {
        "type": "screen.frame", "number": 10**9, "jpeg": b"the user's phone", "width": 1,
        "height": 1})
    assert await socket.receive_nothing(timeout=0.2)


async def test_a_group_emptied_from_the_group_side_closes_its_members(demo):
    client = await database_sync_to_async(_login)(demo["operator"])
    socket = await _open("/ws/operator/", client)
    await database_sync_to_async(
        lambda: Group.objects.get(name="operators").user_set.clear())()
    assert await _close_code(socket) == 4403


async def test_an_unrelated_change_keeps_the_socket_open(demo):
    client = await database_sync_to_async(_login)(demo["operator"])
    socket = await _open("/ws/operator/", client)

    def rename():
        demo["operator"].first_name = "Olga"
        demo["operator"].save()

    await database_sync_to_async(rename)()
    await _operators_hear("after the rename")
    while (event := await socket.receive_json_from(timeout=5))["type"] != "ticket.opened":
        pass
    assert event["ticket"]["note"] == "after the rename"
    await socket.disconnect()
