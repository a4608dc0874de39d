"""Connecting to the real ASGI application's WebSockets as a logged-in user."""
from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from kairos_web.asgi import application


def session_headers(user: Any | None) -> list[tuple[bytes, bytes]]:
    """An allowed Origin, plus the session cookie of ``user`` (anonymous when None)."""
    headers = [(b"origin", b"http://127.0.0.1")]
    if user is not None:
        client = Client()
        client.force_login(user)
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
    return headers


async def connect(path: str, user: Any | None, *, refused: bool = False,
                  origin: bytes = b"http://127.0.0.1") -> tuple[WebsocketCommunicator, Any]:
    """Open ``path``; returns the communicator and True.

    With ``refused=True`` it expects the socket to be refused as CONTRACT says — accepted,
    then closed — and returns the close code; a socket refused at the handshake instead
    (an HTTP 403 to a browser) returns the string "handshake refused".
    """
    headers = await database_sync_to_async(session_headers)(user)
    headers = [(b"origin", origin)] + [h for h in headers if h[0] != b"origin"]
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect(timeout=5)
    if not connected:
        return communicator, "handshake refused"
    if not refused:
        return communicator, True
    output = await communicator.receive_output(timeout=5)
    assert output["type"] == "websocket.close", f"expected a close, got {output}"
    return communicator, output.get("code")
