"""The screen socket follows who may watch, while it is open (issue 11.2), and every
socket refuses as CONTRACT says and survives malformed frames (issues 11.5, 11.10)."""
from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import User

from agents.runtime.models import Task
from agents.runtime.services import lifecycle
from devices.models import Device
from devices.streaming import device_group
from tests.websockets import connect

pytestmark = pytest.mark.django_db(transaction=True)


def _task(user: User, name: str = "sim-1") -> Task:
    return lifecycle.create_task(user, Device.objects.get(name=name), "Turn on Wi-Fi")


async def _until_closed(communicator, timeout: float = 10) -> tuple[int | None, int]:
    """Read until the server closes; returns its close code and how many frames came."""
    frames = 0
    while True:
        output = await communicator.receive_output(timeout=timeout)
        if output["type"] == "websocket.close":
            return output.get("code"), frames
        frames += 1


async def test_an_end_user_whose_task_ended_stops_seeing_the_phone(demo, inline_steps):
    task = await database_sync_to_async(_task)(demo["user"])
    screen, ok = await connect(f"/ws/devices/{task.device_id}/screen/", demo["user"])
    assert ok is True
    assert (await screen.receive_json_from(timeout=5))["type"] == "screen.meta"

    await database_sync_to_async(lifecycle.abort_task)(task, demo["user"])
    code, _ = await _until_closed(screen)
    assert code == 4403

    # The next user's task on that phone, and its frames, reach nobody on the old socket.
    other = await database_sync_to_async(User.objects.create_user)("bob", password="x" * 12)
    await database_sync_to_async(_task)(other)
    await get_channel_layer().group_send(device_group(str(task.device_id)), {
        "type": "screen.frame", "number": 10**9, "jpeg": b"bob's screen", "width": 1,
        "height": 1})
    assert await screen.receive_nothing(timeout=0.3)


async def test_an_operator_keeps_watching_when_tasks_change(demo, inline_steps):
    task = await database_sync_to_async(_task)(demo["user"])
    screen, _ = await connect(f"/ws/devices/{task.device_id}/screen/", demo["operator"])
    await screen.receive_json_from(timeout=5)
    await database_sync_to_async(lifecycle.abort_task)(task, demo["user"])
    await get_channel_layer().group_send(device_group(str(task.device_id)), {
        "type": "screen.frame", "number": 10**9, "jpeg": b"still here", "width": 1,
        "height": 1})
    while (frame := await screen.receive_from(timeout=5)) != b"still here":
        assert isinstance(frame, bytes)  # the first frame of the phone may come first
    await screen.disconnect()


async def test_an_end_user_with_only_a_queued_task_is_refused(demo):
    from agents.runtime.models import TaskStatus

    task = await database_sync_to_async(lifecycle.create_task)(
        demo["user"], await database_sync_to_async(Device.objects.get)(name="sim-2"),
        "Turn on Wi-Fi", start=False)
    assert task.status == TaskStatus.QUEUED
    _, code = await connect(f"/ws/devices/{task.device_id}/screen/", demo["user"], refused=True)
    assert code == 4403


async def test_an_unknown_phone_is_refused_with_4404(demo):
    _, code = await connect("/ws/devices/00000000-0000-0000-0000-000000000000/screen/",
                            demo["operator"], refused=True)
    assert code == 4404


async def test_a_socket_from_another_sites_page_is_accepted_then_closed_with_4403(demo):
    _, code = await connect("/ws/operator/", demo["operator"], refused=True,
                            origin=b"https://evil.example")
    assert code == 4403


BAD_FRAMES = [("binary", {"bytes": b"\x00\xff"}), ("empty", {"text": ""}),
              ("blank", {"text": "   "}), ("not json", {"text": "{nope"}),
              ("deep", {"text": "[" * 100_000}), ("huge", {"text": "\"" + "x" * 70_000 + "\""}),
              ("a list", {"text": "[1, 2]"}), ("surrogate", {"text": '{"type": "\\ud800"}'}),
              ("nul", {"text": '{"type": "input", "action": {"type": "TYPE", "text": "\\u0000"}}'}),
              ("inf", {"text": '{"type": "input", "action": {"type": "CLICK", "x": "1e400", "y": 1}}'})]


@pytest.mark.parametrize("path", ["/ws/operator/", "/ws/devices/{device}/screen/",
                                  "/ws/tasks/{task}/"])
async def test_malformed_frames_get_an_error_and_the_socket_stays_open(demo, inline_steps, path):
    task = await database_sync_to_async(_task)(demo["user"])
    user = demo["operator"] if "operator" in path else demo["user"]
    socket, ok = await connect(path.format(device=task.device_id, task=task.id), user)
    assert ok is True
    for name, frame in BAD_FRAMES:
        await socket.send_input({"type": "websocket.receive", **frame})
        while True:  # events and frames may interleave; the error answer must come
            output = await socket.receive_output(timeout=5)
            assert output["type"] == "websocket.send", f"{name}: {output}"
            text = output.get("text")
            if text and '"error"' in text:
                break
    await socket.send_to(text_data='{"type": "ping"}')  # and it still answers
    while True:
        output = await socket.receive_output(timeout=5)
        assert output["type"] == "websocket.send"
        if output.get("text") and ('"pong"' in output["text"] or '"error"' in output["text"]):
            break
    await socket.disconnect()
