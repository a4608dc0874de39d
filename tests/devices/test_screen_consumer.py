"""``/ws/devices/<id>/screen/`` through the real ASGI application."""
from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, User

from devices.consumers import ScreenConsumer
from devices.models import Device
from devices.streaming import device_group
from tests.websockets import connect

JPEG_MAGIC = b"\xff\xd8\xff"


async def _connect(device: Device, user: User | None, refused: bool = False
                   ) -> tuple[WebsocketCommunicator, Any]:
    return await connect(f"/ws/devices/{device.id}/screen/", user, refused=refused)


def _phone() -> Device:
    return Device.objects.create(name="sim-1", width=1080, height=2400)


def _user(name: str, group: str) -> User:
    user = User.objects.create_user(name, password="x")
    user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


@pytest.mark.asyncio
async def test_an_operator_gets_the_meta_first_then_a_jpeg_frame_quickly(transactional_db):
    device = await database_sync_to_async(_phone)()
    operator = await database_sync_to_async(_user)("op", "operators")
    started = time.perf_counter()
    communicator, result = await _connect(device, operator)
    assert result is True
    meta = await communicator.receive_json_from(timeout=5)
    assert meta == {"type": "screen.meta", "width": 1080, "height": 2400, "device": "sim-1"}
    frame = await communicator.receive_from(timeout=5)
    elapsed_ms = (time.perf_counter() - started) * 1000
    assert isinstance(frame, bytes) and frame.startswith(JPEG_MAGIC)
    assert elapsed_ms < 3000  # generous for a cold simulator; the bench measures the 300 ms target
    await communicator.disconnect()


@pytest.mark.asyncio
async def test_a_published_frame_reaches_the_viewer_and_an_older_one_does_not(transactional_db):
    device = await database_sync_to_async(_phone)()
    operator = await database_sync_to_async(_user)("op", "operators")
    communicator, _ = await _connect(device, operator)
    await communicator.receive_json_from(timeout=5)
    await communicator.receive_from(timeout=5)
    layer = get_channel_layer()
    group = device_group(str(device.id))
    await layer.group_send(group, {"type": "screen.frame", "number": 10**6, "jpeg": b"new",
                                   "width": 1, "height": 1})
    assert await communicator.receive_from(timeout=5) == b"new"
    await layer.group_send(group, {"type": "screen.frame", "number": 5, "jpeg": b"old",
                                   "width": 1, "height": 1})
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


@pytest.mark.asyncio
async def test_it_refuses_an_anonymous_viewer_with_4401(transactional_db):
    device = await database_sync_to_async(_phone)()
    _, code = await _connect(device, None, refused=True)
    assert code == 4401


@pytest.mark.asyncio
async def test_it_refuses_an_end_user_with_no_task_on_the_phone_with_4403(transactional_db):
    device = await database_sync_to_async(_phone)()
    user = await database_sync_to_async(_user)("enduser", "end_users")
    _, code = await _connect(device, user, refused=True)
    assert code == 4403


@pytest.mark.asyncio
async def test_it_refuses_take_over_input_from_an_operator_not_in_control(transactional_db):
    device = await database_sync_to_async(_phone)()
    operator = await database_sync_to_async(_user)("op", "operators")
    communicator, _ = await _connect(device, operator)
    await communicator.receive_json_from(timeout=5)
    await communicator.receive_from(timeout=5)
    await communicator.send_json_to({"type": "input", "action": {"type": "PRESS_HOME"}})
    reply = await communicator.receive_json_from(timeout=5)
    assert reply["type"] == "error" and "taken over" in reply["detail"]
    await communicator.disconnect()


@pytest.mark.asyncio
async def test_a_slow_viewer_gets_the_newest_frame_not_a_backlog():
    consumer = ScreenConsumer()
    consumer.last_number = 0
    consumer.pending = None
    consumer.writer = None
    sent: list[bytes] = []
    gate = asyncio.Event()

    async def slow_send(bytes_data: bytes) -> None:
        sent.append(bytes_data)
        await gate.wait()  # the first write is stuck on a slow socket

    consumer.send = slow_send  # type: ignore[method-assign]
    await consumer.screen_frame({"number": 1, "jpeg": b"f1"})
    await asyncio.sleep(0)  # let the writer start its first send
    for number in range(2, 6):
        await consumer.screen_frame({"number": number, "jpeg": f"f{number}".encode()})
    assert sent == [b"f1"]
    gate.set()
    await consumer.writer
    assert sent == [b"f1", b"f5"]
    await consumer.screen_frame({"number": 5, "jpeg": b"f5"})  # unchanged screen
    assert consumer.writer.done() and sent == [b"f1", b"f5"]
