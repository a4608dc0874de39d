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


async def connect(path: str, user: Any | None) -> tuple[WebsocketCommunicator, Any]:
    """Open ``path``; returns the communicator and True, or the close code it was refused with."""
    headers = await database_sync_to_async(session_headers)(user)
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect(timeout=5)
    return communicator, (True if connected else code)
