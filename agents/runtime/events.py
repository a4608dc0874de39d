"""Domain events, sent to the channel layer after the transaction commits.

Groups: ``operators`` (every operator console), ``task.<id>`` (the task's page and chat).
Event types are dotted (``ticket.opened``); consumers forward them as ``{"type": …}``.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction

from devices.streaming import device_group, send_to_group

OPERATORS_GROUP = "operators"


def task_group(task_id: Any) -> str:
    return f"task.{task_id}"


def _send_on_commit(group: str, event: dict[str, Any]) -> None:
    transaction.on_commit(lambda: send_to_group(group, {"type": "kairos.event", "event": event}))


def ticket_json(ticket: Any) -> dict[str, Any]:
    step = ticket.step
    task = ticket.task
    return {
        "id": str(ticket.id), "kind": ticket.kind, "reason": ticket.reason,
        "task": str(ticket.task_id), "step": step.index if step else None,
        "status": ticket.status,
        "proposed_action": step.proposed_action if step else None,
        "confidence": step.confidence if step else None,
        "question": ticket.question, "options": list(ticket.options or []),
        "note": ticket.note,
        "assignee": ticket.assignee.get_username() if ticket.assignee_id else None,
        "device": task.device.name, "device_id": str(task.device_id),
        "instruction": task.instruction, "escalated": ticket.escalated,
        "decision": ticket.decision or None, "answer": ticket.answer or None,
        "resolved_by": ticket.resolved_by.get_username() if ticket.resolved_by_id else None,
        "answered_by_user": bool(ticket.decision == "answer" and ticket.resolved_by_id
                                 and ticket.resolved_by_id == task.owner_id),
        "created_at": ticket.created_at.isoformat() if ticket.created_at else None,
    }


def task_summary(task: Any) -> dict[str, Any]:
    return {
        "id": str(task.id), "status": task.status, "instruction": task.instruction,
        "device": task.device.name, "device_id": str(task.device_id),
        "threshold": task.threshold, "success": task.success, "cursor": task.cursor,
        "interventions": task.interventions, "clarifications": task.clarifications,
        "error": task.error, "queue_position": task.queue_position,
    }


def ticket_opened(ticket: Any) -> None:
    _send_on_commit(OPERATORS_GROUP, {"type": "ticket.opened", "ticket": ticket_json(ticket)})


def ticket_claimed(ticket: Any) -> None:
    _send_on_commit(OPERATORS_GROUP, {"type": "ticket.claimed", "ticket": ticket_json(ticket)})


def ticket_resolved(ticket: Any) -> None:
    _send_on_commit(OPERATORS_GROUP, {"type": "ticket.resolved", "ticket": ticket_json(ticket)})


def task_updated(task: Any) -> None:
    event = {"type": "task.updated", "task": task_summary(task)}
    _send_on_commit(OPERATORS_GROUP, event)
    _send_on_commit(task_group(task.id), event)
    # The phone's screen viewers re-check who may watch (devices.consumers.ScreenConsumer).
    group = device_group(str(task.device_id))
    transaction.on_commit(lambda: send_to_group(group, {"type": "screen.access"}))


def message_json(message: Any) -> dict[str, Any]:
    return {
        "id": message.id, "sender": message.sender, "text": message.text,
        "author": message.author.get_username() if message.author_id else None,
        "ticket": str(message.ticket_id) if message.ticket_id else None,
        "options": list(message.options or []),
        "created_at": message.created_at.isoformat() if message.created_at else None,
    }


def chat_message(message: Any) -> None:
    event = {"type": "chat.message", "task": str(message.task_id),
             "message": message_json(message)}
    _send_on_commit(task_group(message.task_id), event)
    _send_on_commit(OPERATORS_GROUP, event)
