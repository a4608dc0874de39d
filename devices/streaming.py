"""Fan-out of frames and events through the channel layer.

A frame is encoded once by the device host and sent once to the device's group; every
viewer's consumer receives the same bytes. Events from threads outside the server's event
loop (the embedded worker thread, the frame publisher) are handed to that loop: the
in-memory channel layer's queues are not thread-safe.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

from devices.protocol import Frame

logger = logging.getLogger(__name__)

_server_loop: asyncio.AbstractEventLoop | None = None
_device_ids: dict[str, str] = {}
_ids_lock = threading.Lock()


def set_server_loop(loop: asyncio.AbstractEventLoop | None) -> None:
    """Register the event loop that serves WebSockets (the ``serve`` command does)."""
    global _server_loop
    _server_loop = loop


_sender_loop: asyncio.AbstractEventLoop | None = None
_sender_lock = threading.Lock()


def _layer_sender_loop() -> asyncio.AbstractEventLoop:
    """One long-lived loop per process for a network channel layer (Redis).

    ``async_to_sync`` would start a fresh loop, and channels-redis a fresh connection, for
    every event; a worker sends several per step.
    """
    global _sender_loop
    with _sender_lock:
        if _sender_loop is None or _sender_loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, daemon=True,
                             name="channel-layer-sender").start()
            _sender_loop = loop
        return _sender_loop


def send_to_group(group: str, message: dict[str, Any]) -> None:
    """``group_send`` from synchronous code, safe from any thread. Never raises."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        if not isinstance(layer, InMemoryChannelLayer) and _server_loop is None:
            future = asyncio.run_coroutine_threadsafe(layer.group_send(group, message),
                                                      _layer_sender_loop())
            future.result(timeout=5)
            return
        loop = _server_loop
        if loop is not None and loop.is_running():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                loop.create_task(layer.group_send(group, message))
                return
            future = asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop)
            future.result(timeout=5)
            return
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # a lost event must not break the step that caused it
        logger.exception("could not send %s to %s", message.get("type"), group)


def device_group(device_id: str) -> str:
    return f"device.{device_id}"


def device_id_for(name: str) -> str | None:
    with _ids_lock:
        if name in _device_ids:
            return _device_ids[name]
    from devices.models import Device

    found = Device.objects.filter(name=name).values_list("id", flat=True).first()
    if found is None:
        return None
    with _ids_lock:
        _device_ids[name] = str(found)
    return str(found)


def publish_frame(name: str, frame: Frame) -> None:
    device_id = device_id_for(name)
    if device_id is None:
        return
    send_to_group(device_group(device_id), {
        "type": "screen.frame", "number": frame.number, "jpeg": frame.jpeg,
        "width": frame.width, "height": frame.height,
    })
