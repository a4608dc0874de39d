"""Who may see a task and who may handle a ticket, on the roles of :mod:`access.roles`.

Changes nothing: every page, API call and socket that reads a task or a ticket by id asks
here first, and refuses with :mod:`access.errors` (``NotFound``, ``Forbidden``). Which
phones a user may run tasks on is :mod:`access.devices`.
"""
from __future__ import annotations

from typing import Any

from access.errors import Forbidden, NotFound
from access.roles import is_operator
from agents.runtime.models import Task, Ticket


def visible_tasks(user: Any):
    tasks = Task.objects.select_related("device", "owner")
    return tasks if is_operator(user) else tasks.filter(owner=user)


def access_task(user: Any, task_id: Any) -> Task:
    try:
        task = visible_tasks(user).filter(id=task_id).first()
    except Exception:
        task = None
    if task is None:
        raise NotFound("no such task")
    return task


def access_ticket(user: Any, ticket_id: Any) -> Ticket:
    if not is_operator(user):
        raise Forbidden("only operators handle tickets")
    try:
        ticket = Ticket.objects.select_related("task", "task__device", "step", "assignee").filter(
            id=ticket_id).first()
    except Exception:
        ticket = None
    if ticket is None:
        raise NotFound("no such ticket")
    return ticket
