"""WebSocket consumers for operators and task owners: thin, ORM work off the loop."""
from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from access.errors import Forbidden, ServiceError
from access.roles import is_operator
from agents.runtime import events, presence
from agents.runtime.models import Task
from agents.runtime.services import access, chat
from devices.socket_access import session_user
from devices.sockets import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED, KairosJsonConsumer


class KairosConsumer(KairosJsonConsumer):
    groups_joined: list[str]

    async def join(self, *groups: str) -> None:
        self.groups_joined = list(groups)
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.watch_access()

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)
        await self.unwatch_access()

    async def on_access_lost(self) -> None:
        # Leave the groups first: no event of theirs may reach a user who lost access.
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def kairos_event(self, message: dict[str, Any]) -> None:
        if getattr(self, "closed", False):
            return
        await self.send_json(message["event"])


class OperatorConsumer(KairosConsumer):
    """``/ws/operator/``: ticket.opened / claimed / resolved and task.updated."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_UNAUTHENTICATED)
            return
        if not await database_sync_to_async(is_operator)(user):
            await self.refuse(CLOSE_FORBIDDEN)
            return
        await self.join(events.OPERATORS_GROUP)
        await self.accept()
        self.present = user.get_username()
        await database_sync_to_async(presence.arrive)(self.present)
        await self._announce_presence()

    async def disconnect(self, code: int) -> None:
        await super().disconnect(code)
        if getattr(self, "present", None):
            await database_sync_to_async(presence.leave)(self.present)
            await self._announce_presence()

    async def _announce_presence(self) -> None:
        """Every console learns who is online now (``operators.online``)."""
        online = await database_sync_to_async(presence.online)()
        await self.channel_layer.group_send(events.OPERATORS_GROUP, {
            "type": "kairos.event", "event": {"type": "operators.online", "online": online}})

    async def recheck_access(self, user: Any) -> int | None:
        allowed = await database_sync_to_async(is_operator)(user)
        return None if allowed else CLOSE_FORBIDDEN

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})
        else:
            await self.send_error("only {\"type\": \"ping\"} is accepted here")


class TaskConsumer(KairosConsumer):
    """``/ws/tasks/<id>/``: the task's owner and operators; the owner answers in the chat."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_UNAUTHENTICATED)
            return
        task_id = self.scope["url_route"]["kwargs"]["task_id"]
        try:
            self.task = await database_sync_to_async(access.access_task)(user, task_id)
        except ServiceError:
            await self.refuse(CLOSE_FORBIDDEN)
            return
        await self.join(events.task_group(self.task.id))
        await self.accept()
        # Read again now that the socket is in the group: a change between the access
        # check and the join sent its event to a group this socket was not in yet.
        summary = await database_sync_to_async(self._summary)()
        if summary is None:  # deleted in between
            await self.close(code=CLOSE_FORBIDDEN)
            return
        await self.send_json({"type": "task.updated", "task": summary})

    def _summary(self) -> dict[str, Any] | None:
        try:
            self.task.refresh_from_db()
        except Task.DoesNotExist:
            return None
        return events.task_summary(self.task)

    async def recheck_access(self, user: Any) -> int | None:
        try:
            await database_sync_to_async(access.access_task)(user, self.task.id)
        except ServiceError:
            return CLOSE_FORBIDDEN
        return None

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if getattr(self, "closed", False):
            return
        if not isinstance(content, dict) or content.get("type") != "chat.message":
            await self.send_json({"type": "error", "detail": "send {\"type\": \"chat.message\", \"text\": …}"})
            return
        try:
            await database_sync_to_async(self._post)(content.get("text"), content.get("ticket"))
        except ServiceError as exc:
            await self.send_json({"type": "error", "detail": exc.detail,
                                  "text": content.get("text") if isinstance(
                                      content.get("text"), str) else None})

    def _post(self, text: Any, ticket_id: Any) -> None:
        # The user as the session holds them now: a message sent after a logout, before
        # its access.changed arrived, is refused too.
        user = session_user(getattr(self.scope.get("session"), "session_key", None))
        if not user.is_authenticated or user.pk != self.scope["user"].pk:
            raise Forbidden("you are no longer logged in")
        task = access.access_task(user, self.task.id)
        chat.post_message(task, user, text,
                          ticket_id=ticket_id if isinstance(ticket_id, str) else None)
