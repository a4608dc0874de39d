"""A task's life around its steps: created, queued, started, its steps scheduled, ended.

One task drives a phone at a time; the others queue, first come first served, and the
oldest starts when the phone frees (``start_next_queued``). Steps go to a Celery worker
by the registered task name ``agents.run_step`` (agents/runtime/tasks.py imports the
services, never the other way round), or inline where ``set_step_scheduler`` says so
(``run_task``, the tests). A task ends once (``finish_task``, ``abort_task``), with a
closing line in its chat; an operator may send an idle phone to its home screen
(``reset_to_home``).

Every status change is a conditional UPDATE (``filter(status=…).update(…)``): a race has
exactly one winner and a redelivered Celery task does nothing twice. Events go out after
commit.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from access.errors import Conflict, DeviceUnavailable, Forbidden, ServiceError
from access.roles import is_operator
from agents.runtime import events
from agents.runtime.models import (
    ACTIVE_TASK_STATUSES, DecidedBy, Message, Step, StepStatus, Task, TaskStatus, Ticket,
    TicketStatus,
)
from agents.runtime.task_names import RUN_STEP, enqueue
from agents.runtime.services.validation import (
    check_backend, check_device_online, check_instruction, check_threshold,
)
from devices.actions import PRESS_HOME, TERMINAL_TYPES, Action
from devices.host import DeviceError, get_device_client
from devices.models import Device

logger = logging.getLogger(__name__)


def reset_to_home(user: Any, device: Device) -> Device:
    """An operator sends an idle phone to its home screen, so the next task does not start
    wherever the last one left it (issue 26). Refused while a task drives the phone."""
    if not is_operator(user):
        raise Forbidden("only operators reset phones")
    check_device_online(device)
    with transaction.atomic():
        _lock_device(device.id)  # no task starts on it meanwhile
        driving = Task.objects.driving(device.id).first()
        if driving is not None:
            raise Conflict(f"a task is using '{device.name}' ({driving.get_status_display().lower()}); "
                           "reset it once the phone is idle")
        try:
            get_device_client().perform(device.name, Action(PRESS_HOME))
        except DeviceError as exc:
            raise DeviceUnavailable(str(exc)) from None
    logger.info("%s reset %s to its home screen", user, device.name)
    return device


# --- creating and starting tasks -----------------------------------------------------

def create_task(
    owner: Any, device: Device, instruction: Any, *, threshold: Any = None,
    backend: str | None = None, suite: str = "", suite_task: str = "",
    max_steps: int | None = None, start: bool = True,
) -> Task:
    instruction = check_instruction(instruction)
    if not device.enabled:
        raise Conflict(f"the phone '{device.name}' is disabled by an admin")
    threshold = check_threshold(threshold, device)
    backend = check_backend(backend, device)
    check_device_online(device)
    if backend == "oracle" and not suite:
        raise ServiceError("the oracle backend needs a suite task")
    with transaction.atomic():
        # The phone's row is locked before the task is inserted, so two tasks created at
        # once for a free phone cannot both see it free and both start.
        _lock_device(device.id)
        task = Task.objects.create(
            owner=owner, device=device, instruction=instruction, threshold=threshold,
            backend=backend, suite=suite, suite_task=suite_task,
            max_steps=max_steps or settings.KAIROS_MAX_STEPS,
        )
        # One task drives a phone at a time; the others queue, first come first served.
        if start and start_next_queued(device.id) is None:
            events.task_updated(task)  # queued: it starts when the phone frees
    task.refresh_from_db()
    return task


def _lock_device(device_id: Any) -> None:
    """Serialise who drives a phone (call inside a transaction). ``FOR NO KEY UPDATE``:
    it does not wait for the key-share locks that inserting a task for it takes."""
    list(Device.objects.select_for_update(no_key=True).filter(id=device_id).values_list("id"))


def start_next_queued(device_id: Any) -> Task | None:
    """The phone has freed: start the oldest task queued for it, if any (FIFO)."""
    with transaction.atomic():
        _lock_device(device_id)
        if Task.objects.driving(device_id).exists():
            return None
        task = Task.objects.queued_on(device_id).select_related("device").first()
        if task is None:
            return None
        try:
            start_task(task)
        except DeviceError as exc:
            # The phone cannot be prepared (its device host is down): the task keeps its
            # place, and the workers' stall sweep tries again (agents/runtime/recovery.py).
            logger.warning("task %s stays queued: %s", task.id, exc)
            return None
        for waiting in Task.objects.queued_on(device_id).select_related("device"):
            events.task_updated(waiting)  # everyone behind moved up one place
        return task


def start_task(task: Task) -> None:
    """QUEUED → RUNNING, then the first step is scheduled after commit. The caller has
    checked that the phone is free (``create_task``, ``start_next_queued``)."""
    if task.suite and task.suite_task:
        # A suite task starts from its own initial state, like AndroidWorld's set-up.
        get_device_client().reset(task.device.name, task.suite, task.suite_task)
    won = Task.objects.filter(id=task.id, status=TaskStatus.QUEUED).update(
        status=TaskStatus.RUNNING, started_at=timezone.now()
    )
    if won:
        task.refresh_from_db()
        schedule_step(task.id, task.cursor)
        events.task_updated(task)


# --- scheduling ----------------------------------------------------------------------

def _celery_scheduler(task_id: str, index: int) -> None:
    enqueue(RUN_STEP, args=(task_id, index))


_scheduler: Callable[[str, int], None] = _celery_scheduler


def set_step_scheduler(scheduler: Callable[[str, int], None] | None
                       ) -> Callable[[str, int], None]:
    """``run_task`` drives steps inline instead of through Celery; returns the old one."""
    global _scheduler
    previous, _scheduler = _scheduler, scheduler or _celery_scheduler
    return previous


def schedule_step(task_id: Any, index: int) -> None:
    """Send step ``index`` to a worker after commit, and mark the task as moving.

    ``progressed_at`` is what the stall sweep (agents/runtime/recovery.py) reads: a message lost
    with a killed worker leaves it behind, and the sweep schedules the step again.
    """
    Task.objects.filter(id=task_id).update(progressed_at=timezone.now())
    scheduler = _scheduler
    transaction.on_commit(lambda: scheduler(str(task_id), index))


def closing_summary(task: Task, by: Any = None) -> str:
    """The last line of a finished task's chat: what happened, and why it ended."""
    steps = task.steps.filter(status=StepStatus.DONE).exclude(executed_action=None)
    done = steps.count()
    helped = steps.filter(decided_by=DecidedBy.OPERATOR).count()
    count = f"{done} step{'s' if done != 1 else ''}" + (
        f", {helped} of them by an operator" if helped else "")
    if task.status == TaskStatus.SUCCEEDED:
        # What was done, in the steps' own words, and what the agent saw at the end
        # ("'Wi-Fi' is already on"): "Done in 3 steps" alone told the user nothing.
        rows = list(steps.order_by("index").values_list("summary", "executed_action", "thought"))
        acts = [summary or str(action.get("type")) for summary, action, _ in rows
                if action.get("type") not in TERMINAL_TYPES]
        text = f"Done in {count}"
        if acts:
            text += ": " + "; ".join(acts[:6]) + ("; …" if len(acts) > 6 else "")
        text += "."
        if rows and rows[-1][1].get("type") in TERMINAL_TYPES and rows[-1][2]:
            text += f" {rows[-1][2]}"
        return text
    if task.status == TaskStatus.ABORTED:
        prefix = f"aborted by {by}: " if by is not None else ""
        why = f" Reason: {task.error[len(prefix):]}" if prefix and \
            task.error.startswith(prefix) else ""
        if by is not None and getattr(by, "pk", None) == task.owner_id:
            return f"You stopped this task after {count}.{why}"
        if by is not None:
            return f"An operator ({by.get_username()}) stopped this task after {count}.{why}"
        return f"This task was stopped after {count}: {task.error or 'no reason given'}."
    return f"Could not finish after {count}: {task.error or 'no reason given'}."


def finish_task(task: Task, status: str, *, success: bool | None = None, error: str = "",
                by: Any = None) -> bool:
    """End an active task once (terminal ``status``); its phone goes to the next queued
    task. ``by`` is the person who stopped it, if one did."""
    with transaction.atomic():
        won = Task.objects.filter(id=task.id, status__in=ACTIVE_TASK_STATUSES).update(
            status=status, success=success, error=error, finished_at=timezone.now())
        if not won:
            return False
        transaction.on_commit(lambda: _start_next_after(task.device_id))
        # A step still waiting for a person will never run: say so instead of "waiting".
        Step.objects.filter(task=task, status=StepStatus.WAITING).update(
            status=StepStatus.CANCELLED, outcome="task ended")
        task.refresh_from_db()
        message = Message.objects.create(task=task, sender=Message.Sender.SYSTEM,
                                         text=closing_summary(task, by))
        events.chat_message(message)
        for ticket in Ticket.objects.filter(task=task, status__in=(TicketStatus.OPEN,
                                                                   TicketStatus.CLAIMED)):
            if Ticket.objects.filter(id=ticket.id, status=ticket.status).update(
                    status=TicketStatus.CANCELLED, resolved_at=timezone.now()):
                ticket.status = TicketStatus.CANCELLED
                events.ticket_resolved(ticket)
        task.refresh_from_db()
        events.task_updated(task)
    return True


def _start_next_after(device_id: Any) -> None:
    # After the finishing transaction commits, so a queued suite task's phone reset and
    # first step never hang on the transaction that freed the phone.
    try:
        start_next_queued(device_id)
    except Exception:  # the stall sweep starts it later; the finish itself stands
        logger.exception("could not start the next task queued for device %s", device_id)


def abort_task(task: Task, user: Any) -> Task:
    if not finish_task(task, TaskStatus.ABORTED, error=f"aborted by {user}", by=user):
        task.refresh_from_db()
        raise Conflict(f"the task has already ended ({task.get_status_display().lower()})")
    task.refresh_from_db()
    return task
