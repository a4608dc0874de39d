"""WebSocket consumers for operators and task owners: thin, ORM work off the loop."""
from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from agents import events, services

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_BAD_REQUEST = 4400


class KairosConsumer(AsyncJsonWebsocketConsumer):
    groups_joined: list[str]

    async def join(self, *groups: str) -> None:
        self.groups_joined = list(groups)
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def kairos_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])


class OperatorConsumer(KairosConsumer):
    """``/ws/operator/``: ticket.opened / claimed / resolved and task.updated."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await database_sync_to_async(services.is_operator)(user):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        await self.join(events.OPERATORS_GROUP)
        await self.accept()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})


class TaskConsumer(KairosConsumer):
    """``/ws/tasks/<id>/``: the task's owner and operators; the owner answers in the chat."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        task_id = self.scope["url_route"]["kwargs"]["task_id"]
        try:
            self.task = await database_sync_to_async(services.access_task)(user, task_id)
        except services.ServiceError:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        await self.join(events.task_group(self.task.id))
        await self.accept()
        await self.send_json({"type": "task.updated",
                              "task": await database_sync_to_async(events.task_summary)(self.task)})

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None,
                      **kwargs: Any) -> None:
        # Malformed input is answered with an error; it must not close the chat.
        if text_data is None:
            await self.send_json({"type": "error", "detail": "send JSON text, not binary"})
            return
        try:
            content = await self.decode_json(text_data)
        except ValueError:
            await self.send_json({"type": "error", "detail": "the message is not valid JSON"})
            return
        await self.receive_json(content, **kwargs)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict) or content.get("type") != "chat.message":
            await self.send_json({"type": "error", "detail": "send {\"type\": \"chat.message\", \"text\": …}"})
            return
        try:
            await database_sync_to_async(self._post)(content.get("text"), content.get("ticket"))
        except services.ServiceError as exc:
            await self.send_json({"type": "error", "detail": exc.detail,
                                  "text": content.get("text") if isinstance(
                                      content.get("text"), str) else None})

    def _post(self, text: Any, ticket_id: Any) -> None:
        task = services.access_task(self.scope["user"], self.task.id)
        services.post_message(task, self.scope["user"], text,
                              ticket_id=ticket_id if isinstance(ticket_id, str) else None)
