"""An event that races a client's leaving is dropped, not a crash with a traceback.

The chaos test caught it (2026-11-23): the operator's socket dropped while a ticket event
was on its way; uvicorn refused the consumer's send ("Unexpected ASGI message
'websocket.send', after sending 'websocket.close' …") and the server log got a traceback.
Here the real ASGI application is driven by a stand-in for the server that keeps that
rule: once the connection is closed, a send raises.
"""
from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from agents.runtime import events
from kairos_web.asgi import application
from tests.websockets import session_headers

pytestmark = pytest.mark.django_db(transaction=True)

REFUSED = "Unexpected ASGI message 'websocket.send', after sending 'websocket.close' or " \
          "response already completed."


class ClosingServer:
    """The server side of one socket: ``close()`` is the client leaving."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.sent: list[dict] = []
        self.closed = False
        self.accepted = asyncio.Event()

    async def receive(self) -> dict:
        return await self.inbox.get()

    async def send(self, message: dict) -> None:
        if self.closed:
            raise RuntimeError(REFUSED)
        self.sent.append(message)
        if message["type"] == "websocket.accept":
            self.accepted.set()

    def close(self) -> None:
        self.closed = True


async def test_an_operator_event_sent_after_the_client_left_is_dropped(demo):
    headers = await database_sync_to_async(session_headers)(demo["operator"])
    scope = {"type": "websocket", "path": "/ws/operator/", "raw_path": b"/ws/operator/",
             "query_string": b"", "headers": headers, "subprotocols": [],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}
    server = ClosingServer()
    await server.inbox.put({"type": "websocket.connect"})
    app = asyncio.ensure_future(application(scope, server.receive, server.send))
    await asyncio.wait_for(server.accepted.wait(), 5)

    server.close()  # the client has gone; the server has not told the consumer yet
    await get_channel_layer().group_send(events.OPERATORS_GROUP, {
        "type": "kairos.event", "event": {"type": "ticket.opened", "ticket": {}}})
    await server.inbox.put({"type": "websocket.disconnect", "code": 1006})

    await asyncio.wait_for(app, 5)  # ends cleanly: no exception for the server to log
    assert [m["type"] for m in server.sent] == ["websocket.accept"]
