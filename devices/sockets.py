"""What every Kairos WebSocket shares: close codes, refusing, and tolerant JSON frames.

CONTRACT: a refused socket is *accepted and then closed* with 4401 (not logged in) or 4403
(not allowed), so the browser's ``onclose`` sees why; closing before accepting would be an
HTTP 403 handshake, which a page cannot tell from a network failure. A frame that is not
a JSON text (binary, empty, malformed, too large) is answered with an ``error`` event and
the socket stays open, never dropped with a traceback.
"""
from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlparse

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.security.websocket import OriginValidator

logger = logging.getLogger(__name__)

CLOSE_BAD_REQUEST = 4400
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
MAX_FRAME_CHARS = 64 * 1024


class KairosJsonConsumer(AsyncJsonWebsocketConsumer):
    client_gone = False

    async def __call__(self, scope: dict, receive: Any, send: Any) -> Any:
        # A group event can be dispatched after the client has left but before the consumer
        # has handled the disconnect; the ASGI server then refuses the send ("Unexpected
        # ASGI message 'websocket.send', after sending 'websocket.close'") and the consumer
        # died with a traceback. The disconnect is noted the moment the server hands it
        # over, and later sends to nobody are dropped.
        async def noting_receive() -> dict:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                self.client_gone = True
            return message

        async def send_unless_gone(message: dict) -> None:
            if self.client_gone and message["type"] in ("websocket.send", "websocket.close"):
                return
            try:
                await send(message)
            except OSError:  # uvicorn's ClientDisconnected: the peer left mid-send
                self.client_gone = True
            except RuntimeError as exc:  # the server already closed the connection
                if "after sending 'websocket.close'" not in str(exc):
                    raise
                self.client_gone = True

        return await super().__call__(scope, noting_receive, send_unless_gone)

    async def watch_access(self) -> None:
        """Join the user's group, where every change of their access is announced
        (``devices.socket_access``); call before accepting."""
        from devices.socket_access import user_group

        self.access_group = user_group(self.scope["user"].pk)
        await self.channel_layer.group_add(self.access_group, self.channel_name)

    async def unwatch_access(self) -> None:
        if getattr(self, "access_group", None):
            await self.channel_layer.group_discard(self.access_group, self.channel_name)

    async def access_changed(self, message: dict[str, Any]) -> None:
        """The user's access changed: re-read them from the session store and re-check
        this socket's rule; close with 4401 / 4403 when it no longer holds."""
        from channels.db import database_sync_to_async

        from devices.socket_access import session_user

        if getattr(self, "closed", False):
            return
        session = self.scope.get("session")
        key = getattr(session, "session_key", None)
        if message.get("session_key") and message["session_key"] == key:
            code: int | None = CLOSE_UNAUTHENTICATED  # this very session logged out
        else:
            user = await database_sync_to_async(session_user)(key)
            if not user.is_authenticated or user.pk != self.scope["user"].pk:
                code = CLOSE_UNAUTHENTICATED
            else:
                self.scope["user"] = user  # the fresh copy (flags, groups) from now on
                code = await self.recheck_access(user)
        if code is not None:
            logger.info("closing %s of user %s with %s: their access changed",
                        self.scope.get("path"), self.scope["user"].pk, code)
            self.closed = True
            await self.on_access_lost()
            await self.close(code=code)

    async def recheck_access(self, user: Any) -> int | None:
        """None while ``user`` may still use this socket, else the close code."""
        return None

    async def on_access_lost(self) -> None:
        """Stop sending anything more before the close goes out."""

    async def refuse(self, code: int) -> None:
        await self.accept()
        await self.close(code=code)

    async def send_error(self, detail: str) -> None:
        await self.send_json({"type": "error", "detail": detail})

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None,
                      **kwargs: Any) -> None:
        if text_data is None:
            await self.send_error("send JSON text, not binary")
            return
        if len(text_data) > MAX_FRAME_CHARS:
            await self.send_error(f"the message is over {MAX_FRAME_CHARS} characters")
            return
        if not text_data.strip():
            await self.send_error("the message is empty; send a JSON object")
            return
        try:
            content = json.loads(text_data)
        except (ValueError, RecursionError):
            await self.send_error("the message is not valid JSON")
            return
        await self.receive_json(content, **kwargs)


class _RefusedOrigin(KairosJsonConsumer):
    async def connect(self) -> None:
        await self.refuse(CLOSE_FORBIDDEN)


class UnknownPath(KairosJsonConsumer):
    """Every socket path no route matches (``/ws/nope/``, ``/ws/operator`` without its
    slash, a task id that is no UUID): accepted, then closed with 4404, like a refused
    socket — not an exception in the router, which the server answers with HTTP 500."""

    async def connect(self) -> None:
        await self.refuse(CLOSE_NOT_FOUND)


class AllowedHostsOrigin(OriginValidator):
    """Channels' AllowedHostsOriginValidator (a socket from another site's page is
    refused), refusing the way every other Kairos socket does: accept, close 4403."""

    def __init__(self, application: Any):
        from django.conf import settings

        allowed = settings.ALLOWED_HOSTS
        if settings.DEBUG and not allowed:
            allowed = ["localhost", "127.0.0.1", "[::1]"]
        super().__init__(application, allowed)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> Any:
        origin = None
        for name, value in scope.get("headers", []):
            if name == b"origin":
                try:
                    origin = urlparse(value.decode("latin1"))
                except (UnicodeDecodeError, ValueError):
                    origin = None
        if scope["type"] == "websocket" and not self.valid_origin(origin):
            return await _RefusedOrigin.as_asgi()(scope, receive, send)
        return await self.application(scope, receive, send)
