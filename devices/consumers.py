"""``/ws/devices/<id>/screen/``: live frames, and take-over input from the operator in control."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async

from access.errors import ServiceError
from access.roles import is_operator
from devices.host import DeviceError, get_device_client
from devices.models import Device
from devices.occupancy import occupancy
from devices.sockets import (
    CLOSE_FORBIDDEN, CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED, KairosJsonConsumer,
)
from devices.streaming import device_group

logger = logging.getLogger(__name__)


def _viewable_device(user: Any, device_id: Any) -> tuple[Device, bool] | int:
    """The device ``user`` may watch and whether they are an operator, or the close code
    refusing it.

    One trip to the database thread: every consumer's ORM work queues on that one thread,
    and a grid of viewers connecting at once must each get its first frame quickly.
    """
    device = Device.objects.filter(id=device_id).first()
    if device is None:
        return CLOSE_NOT_FOUND
    if is_operator(user):
        return device, True
    if occupancy().on_screen_for(user, device.id):
        return device, False
    return CLOSE_FORBIDDEN


class ScreenConsumer(KairosJsonConsumer):
    """One viewer of one phone's screen.

    Frames arrive from the device's group, encoded once by the device host. A viewer whose
    socket is slow must not build up a backlog (it would watch the past, ever later), so
    while one frame is being written only the newest pending frame is kept: older ones are
    overwritten and never sent.

    An end user may watch only while their task is on the phone: every change of a task
    on this phone (``screen.access``, sent when a task on it changes) re-checks
    that, before any later frame is sent, and closes the socket with 4403 when it no
    longer holds — the next user's task must not be seen.
    """

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_UNAUTHENTICATED)
            return
        device_id = self.scope["url_route"]["kwargs"]["device_id"]
        found = await database_sync_to_async(_viewable_device)(user, device_id)
        if isinstance(found, int):
            await self.refuse(found)
            return
        device, self.is_operator = found
        self.device = device
        self.group = device_group(str(device.id))
        self.last_number = -1
        self.pending: dict[str, Any] | None = None
        self.writer: asyncio.Task | None = None
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.watch_access()
        await self.accept()
        await self.send_json({"type": "screen.meta", "width": device.width,
                              "height": device.height, "device": device.name})
        try:
            frame = await asyncio.to_thread(get_device_client().latest_frame, device.name)
        except DeviceError as exc:
            await self.send_json({"type": "screen.error", "detail": str(exc)})
            return
        if frame is not None:
            self._offer({"number": frame.number, "jpeg": frame.jpeg})

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)
        await self.unwatch_access()
        writer = getattr(self, "writer", None)
        if writer is not None and not writer.done():
            writer.cancel()

    async def recheck_access(self, user: Any) -> int | None:
        found = await database_sync_to_async(_viewable_device)(user, self.device.id)
        if isinstance(found, int):
            return found
        self.is_operator = found[1]
        return None

    async def on_access_lost(self) -> None:
        self.pending = None  # a frame waiting to be written is never sent
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def screen_access(self, message: dict[str, Any]) -> None:
        if self.is_operator or getattr(self, "closed", False):
            return
        allowed = await database_sync_to_async(occupancy().on_screen_for)(
            self.scope["user"], self.device.id)
        if not allowed:
            self.closed = True
            self.pending = None
            await self.close(code=CLOSE_FORBIDDEN)

    async def screen_frame(self, message: dict[str, Any]) -> None:
        if getattr(self, "closed", False):
            return
        # Return at once, so the consumer keeps draining its channel while a write is slow.
        self._offer(message)

    def _offer(self, message: dict[str, Any]) -> None:
        # Frames only move forward: an older frame arriving late is dropped; an unchanged
        # screen publishes nothing, so nothing is sent.
        newest = self.pending["number"] if self.pending else self.last_number
        if message["number"] <= newest:
            return
        self.pending = message
        if self.writer is None or self.writer.done():
            self.writer = asyncio.get_running_loop().create_task(self._write_frames())

    async def _write_frames(self) -> None:
        while self.pending is not None:
            message, self.pending = self.pending, None
            if message["number"] <= self.last_number:
                continue
            self.last_number = message["number"]
            try:
                await self.send(bytes_data=message["jpeg"])
            except Exception:  # the viewer went away mid-write; disconnect() follows
                self.pending = None
                return

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if getattr(self, "closed", False):
            return
        if not isinstance(content, dict) or content.get("type") != "input":
            await self.send_error("only {\"type\": \"input\"} is accepted")
            return
        try:
            step = await database_sync_to_async(self._input)(content.get("action"))
        except ServiceError as exc:  # a refused input is reported, the stream goes on
            await self.send_error(exc.detail)
            return
        except DeviceError as exc:
            await self.send_error(f"the phone is unavailable: {exc}"[:500])
            return
        except Exception:
            logger.exception("take-over input on %s failed", self.device.name)
            await self.send_error("the input failed on the server")
            return
        await self.send_json({"type": "input.done", "step": step.index,
                              "action": step.executed_action, "changed": step.screen_changed})

    def _input(self, action: Any) -> Any:
        return occupancy().take_over_input(self.device, self.scope["user"], action)
