"""An operator in control of a phone: take-over inputs, the hand-back, idle take-overs.

The holder of a task's latest take-over sends inputs, each recorded as an operator step
and serialised per task across the phone's action (``input_lock``); inputs a dead server
left executing are settled from the device host's record (``settle_inputs``). The holder
(or an admin) hands the phone back to the agent; a take-over without an input for
``KAIROS_TAKEOVER_TIMEOUT`` lapses into an open ticket.
"""
from __future__ import annotations

import logging
import threading
import uuid
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Iterator

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from access.errors import Conflict, DeviceUnavailable, Forbidden, ServiceError
from access.roles import is_admin
from agents.brain import loop
from agents.runtime import events
from agents.runtime.models import (
    DecidedBy, Decision, Step, StepStatus, Task, TaskStatus, Ticket, TicketKind, TicketReason,
)
from agents.runtime.services.labels import _label_takeover, _learn_from_takeover_input
from agents.runtime.services.lifecycle import schedule_step
from agents.runtime.services.steps import _origin, _outcome
from agents.runtime.services.tickets import open_ticket
from devices.actions import TERMINAL_TYPES, Action, ActionError, ActionOutcome, validate_action
from devices.host import DeviceError, get_device_client
from devices.uitree import nodes_from_json

logger = logging.getLogger(__name__)


def lapse_idle_takeovers(now: Any = None, timeout: float | None = None) -> list[str]:
    """Take-overs without an input for ``KAIROS_TAKEOVER_TIMEOUT`` seconds go back to the
    queue as an open ticket that says why (issue 26, item 1): an operator who pressed T and
    closed the browser must not hold the phone, and the tasks queued behind it, for ever.

    Each lapse is a conditional UPDATE on the task's ``progressed_at`` (set at the
    take-over and at every input), so an input that lands meanwhile keeps the take-over
    and several sweepers lapse a task once. Returns the ids of the lapsed tasks.
    """
    now = now or timezone.now()
    timeout = float(settings.KAIROS_TAKEOVER_TIMEOUT) if timeout is None else timeout
    cutoff = now - timedelta(seconds=timeout)
    idle = Task.objects.filter(status=TaskStatus.TAKEN_OVER).filter(
        Q(progressed_at__lt=cutoff) | Q(progressed_at=None))
    lapsed = []
    for task_id, seen in idle.values_list("id", "progressed_at")[:100]:
        with transaction.atomic():
            claim = Task.objects.filter(id=task_id, status=TaskStatus.TAKEN_OVER)
            claim = claim.filter(progressed_at=seen) if seen else claim.filter(progressed_at=None)
            if not claim.update(status=TaskStatus.WAITING_OPERATOR, progressed_at=now):
                continue
            task = Task.objects.select_related("device").get(id=task_id)
            holder = task.tickets.filter(decision=Decision.TAKEOVER).order_by(
                "-resolved_at").select_related("resolved_by").first()
            who = holder.resolved_by.get_username() if holder and holder.resolved_by else \
                "an operator"
            open_ticket(task, None, TicketKind.INTERVENTION, TicketReason.TAKEOVER_LAPSED,
                        set_status=False, note=(
                            f"The take-over by {who} lapsed: no input for {timeout:g} s. "
                            "Approve lets the agent go on from the phone's current screen; "
                            "take over to drive the phone again, or abort."))
        lapsed.append(str(task_id))
    return lapsed


def check_takeover_holder(task: Task, user: Any) -> Ticket:
    """The take-over ``user`` holds on ``task``: the task's *latest* take-over, still on.

    An operator who took over earlier and handed back must not keep control once
    someone else took over at a later ticket.
    """
    ticket = task.tickets.filter(decision=Decision.TAKEOVER).order_by("-resolved_at").first()
    if task.status != TaskStatus.TAKEN_OVER or ticket is None or \
            ticket.resolved_by_id != getattr(user, "pk", None):
        raise Forbidden("you do not hold the take-over of this task")
    return ticket


@contextmanager
def input_lock(task_id: Any, *, wait: bool = True) -> Iterator[bool]:
    """Serialise a task's take-over inputs, its hand-back and the settling of inputs a dead
    server left, *across the phone's action* (issue 23, item 1).

    An input's step is committed before the phone acts, so no transaction's row lock can
    span the action. PostgreSQL: a session advisory lock on the task, which PostgreSQL
    releases when the holding process dies (``kill -9`` of ``serve``). Other databases
    (SQLite: the embedded default, one process): a lock of this process. Yields whether
    the lock is held (always, with ``wait``).
    """
    from django.db import connection

    if connection.vendor == "postgresql":
        key = int.from_bytes(uuid.UUID(str(task_id)).bytes[:8], "big", signed=True)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)" if wait
                           else "SELECT pg_try_advisory_lock(%s)", [key])
            held = True if wait else bool(cursor.fetchone()[0])
        try:
            yield held
        finally:
            if held:
                try:
                    with connection.cursor() as cursor:
                        cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
                except Exception:  # the session is broken: closing it frees its locks
                    connection.close()
        return
    # Striped: a bounded set of locks, one picked by the task's id (two tasks sharing one
    # only wait for each other's inputs now and then).
    lock = _input_locks[uuid.UUID(str(task_id)).int % len(_input_locks)]
    held = lock.acquire(blocking=wait)
    try:
        yield held
    finally:
        if held:
            lock.release()


_input_locks = tuple(threading.Lock() for _ in range(64))


def _orphaned_inputs(task_id: Any):
    """Take-over inputs still marked executing though no request runs them any more (call
    under :func:`input_lock`): their server died, or their phone stopped answering, while
    the phone acted. An input's index is below the task's cursor from the moment it is
    reserved; an agent's executing step is always at the cursor."""
    return Step.objects.filter(task_id=task_id, status=StepStatus.EXECUTING,
                               decided_by=DecidedBy.OPERATOR, proposed_action__isnull=True,
                               index__lt=F("task__cursor"))


def settle_inputs(task: Task) -> int:
    """Record what the phone did for each orphaned input of ``task`` (under the input lock).

    The device host is asked, as for a worker that died mid-action, whether it performed
    the step (it answers in turn with the phone's other requests, after the step's own
    perform has run or expired): performed, the step is done with the phone's outcome;
    not performed, it is cancelled. Raises DeviceError when the host cannot be asked (the
    step stays as it is, to be settled later). Returns how many steps were settled.
    """
    client = get_device_client()
    settled = 0
    for step in _orphaned_inputs(task.id):
        action = validate_action(step.executed_action)
        recorded = client.performed(task.device.name, _origin(task, step))
        if recorded is not None and isinstance(action, Action):
            _record_input(task, step, action, _outcome(recorded))
        else:
            Step.objects.filter(id=step.id, status=StepStatus.EXECUTING).update(
                status=StepStatus.CANCELLED,
                outcome="not run: the server stopped before the phone acted")
        settled += 1
    return settled


def settle_orphaned_inputs() -> dict[str, str]:
    """The stall sweep's part (agents/runtime/recovery.py): settle the inputs a dead server left on
    every task whose inputs nobody is sending right now."""
    done: dict[str, str] = {}
    task_ids = set(Step.objects.filter(
        status=StepStatus.EXECUTING, decided_by=DecidedBy.OPERATOR,
        proposed_action__isnull=True, index__lt=F("task__cursor"),
    ).values_list("task_id", flat=True)[:100])
    for task in Task.objects.filter(id__in=task_ids).select_related("device"):
        with input_lock(task.id, wait=False) as held:
            if not held:
                continue  # an input is being sent: its own request records it
            try:
                if settled := settle_inputs(task):
                    done[str(task.id)] = f"settled {settled} orphaned input(s)"
            except DeviceError as exc:
                logger.warning("task %s: cannot settle its orphaned inputs yet: %s",
                               task.id, exc)
    return done


def _record_input(task: Task, step: Step, action: Action, outcome: ActionOutcome) -> bool:
    nodes = nodes_from_json(step.ui_nodes) if step.ui_nodes else []
    target = loop.target_node(action, nodes)
    entry = loop.history_entry(step.index, action, DecidedBy.OPERATOR, outcome.changed, target)
    # A refused input (TYPE with no field focused) is recorded as failed, as the agent's
    # are.
    return bool(Step.objects.filter(id=step.id, status=StepStatus.EXECUTING).update(
        status=StepStatus.DONE, screen_changed=outcome.changed, summary=entry.summary[:255],
        outcome=("changed" if outcome.changed else "unchanged") if outcome.ok
        else f"error: {outcome.error}"[:255],
        executed_at=timezone.now()))


def operator_input(task: Task, user: Any, action: Any) -> Step:
    """One input of an operator in control, executed and recorded as an operator step.

    Inputs are serialised per task (:func:`input_lock`): three sent at once used to pick the
    same step index, and two of them failed on the unique index and were lost (issue 11,
    item 8). Each now waits its turn and runs in the order it got the lock, as the phone
    executes them anyway.

    The step is committed, with its index, *before* the phone acts, and marked done after
    (issue 23, item 1): a server killed while the phone acts used to roll the step back,
    hand its index to the next input, and the device host — which runs each step at most
    once — answered that input with the old outcome and did nothing. A step left executing
    so is settled (:func:`settle_inputs`) by the next input, the hand-back or the stall
    sweep, from the host's own record of what it performed.
    """
    takeover = check_takeover_holder(task, user)
    checked = validate_action(action, (task.device.width, task.device.height))
    if isinstance(checked, ActionError):
        raise ServiceError(f"invalid action: {checked.message}")
    if checked.type in TERMINAL_TYPES:
        raise ServiceError("hand the task back, or abort it, instead of COMPLETE/IMPOSSIBLE")
    client = get_device_client()
    with input_lock(task.id):
        with transaction.atomic():
            task = Task.objects.select_for_update(of=("self",)).select_related("device").get(
                id=task.id)
            check_takeover_holder(task, user)  # again, under the lock: it may have just ended
            try:
                settle_inputs(task)
                observation = client.observe(task.device.name)
            except DeviceError as exc:
                raise DeviceUnavailable(str(exc)) from None
            checked = loop.shown_name(checked, observation.nodes)  # "Navigate up", not node-2
            last = task.steps.order_by("-index").values_list("index", flat=True).first()
            index = max(0 if last is None else last + 1, task.cursor)
            step = Step.objects.create(
                task=task, index=index, frame=observation.frame,
                screen_width=observation.width, screen_height=observation.height,
                app=observation.app, ui_nodes=[n.to_json() for n in observation.nodes],
                proposed_action=None, executed_action=checked.to_json(),
                decided_by=DecidedBy.OPERATOR, status=StepStatus.EXECUTING,
            )
            step.screenshot.save(f"{task.id}-{index}.jpg", ContentFile(observation.jpeg),
                                 save=True)
            Task.objects.filter(id=task.id).update(cursor=index + 1)
        # Committed: whatever happens from here on, the step and its index survive.
        try:
            outcome = client.perform(task.device.name, checked,
                                     origin={"task": str(task.id), "step": index})
        except DeviceError as exc:
            # The phone may still act: the step stays executing, and is settled from the
            # host's record once it answers again. Its index is never handed out again.
            error: DeviceUnavailable | None = DeviceUnavailable(str(exc))
        else:
            error = None
            _record_input(task, step, checked, outcome)
            _label_takeover(takeover, checked)
            step.refresh_from_db()
            _learn_from_takeover_input(task, step, user)
        # An input renews the take-over (lapse_idle_takeovers).
        Task.objects.filter(id=task.id).update(progressed_at=timezone.now())
        task.refresh_from_db()
        events.task_updated(task)
    if error is not None:
        raise error
    step.refresh_from_db()
    return step


def hand_back(task: Task, user: Any, *, as_admin: bool = False) -> Task:
    """The holder gives the phone back to the agent; ``as_admin``: an admin does it for
    whoever holds it (the caller records it in the audit trail)."""
    if as_admin:
        if not is_admin(user):
            raise Forbidden("only admins hand back another operator's take-over")
        if task.status != TaskStatus.TAKEN_OVER:
            raise Conflict(f"the task is not taken over "
                           f"({task.get_status_display().lower()})")
    else:
        check_takeover_holder(task, user)
    with input_lock(task.id):
        try:
            # An input a dead server left is recorded before the agent looks again.
            settle_inputs(task)
        except DeviceError as exc:  # the stall sweep settles it once the phone answers
            logger.warning("task %s: handed back with an input not settled yet: %s",
                           task.id, exc)
        with transaction.atomic():
            # Under the task's lock, like inputs: the next step's index is after the last
            # step, inputs a dead server left included, so it is never an input's again.
            task = Task.objects.select_for_update(of=("self",)).select_related("device").get(
                id=task.id)
            last = task.steps.order_by("-index").values_list("index", flat=True).first()
            next_index = max(0 if last is None else last + 1, task.cursor)
            won = Task.objects.filter(id=task.id, status=TaskStatus.TAKEN_OVER).update(
                status=TaskStatus.RUNNING, cursor=next_index)
            if not won:
                raise Conflict(f"the task is not taken over any more "
                               f"({task.get_status_display().lower()})")
            schedule_step(task.id, next_index)
            task.refresh_from_db()
            events.task_updated(task)
    return task
