"""Tickets: opened when a person is needed, claimed, released, reassigned and resolved.

A claim lapses after ``KAIROS_CLAIM_TIMEOUT`` without a sign of life, so anyone may take
it. Resolving — approve, edit, take over, answer or abort, exactly one resolution winning
— moves the task on: the step made ready and scheduled (a worker runs it,
:mod:`.steps`), the task taken over, answered or ended; what the decision teaches is
recorded (:mod:`.labels`). ``resolve_with_oracle`` resolves as the simulator's oracle
would (``run_task --operator oracle``).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from access.errors import Conflict, Forbidden, ServiceError
from access.roles import is_admin, is_operator
from agents.brain import loop
from agents.runtime import events
from agents.runtime.models import (
    DecidedBy, Decision, Message, Step, StepStatus, Task, TaskStatus, Ticket, TicketKind,
    TicketReason, TicketStatus,
)
from agents.runtime.services.labels import _learn_from_ticket, _record_training
from agents.runtime.services.lifecycle import finish_task, schedule_step
from agents.runtime.services.validation import check_message_text
from devices.actions import Action, ActionError, validate_action
from devices.host import get_device_client
from devices.uitree import nodes_from_json


def open_ticket(task: Task, step: Step | None, kind: str, reason: str, *, note: str = "",
                question: str = "", options: list[str] | None = None,
                set_status: bool = True) -> Ticket:
    waiting = TaskStatus.WAITING_USER if kind == TicketKind.CLARIFICATION \
        else TaskStatus.WAITING_OPERATOR
    with transaction.atomic():
        if set_status:
            Task.objects.filter(id=task.id, status=TaskStatus.RUNNING).update(status=waiting)
        counter = "clarifications" if kind == TicketKind.CLARIFICATION else "interventions"
        Task.objects.filter(id=task.id).update(**{counter: F(counter) + 1})
        ticket = Ticket.objects.create(task=task, step=step, kind=kind, reason=reason,
                                       note=note[:2000], question=question,
                                       options=options or [])
        task.refresh_from_db()
        if kind != TicketKind.CLARIFICATION:
            # A question goes to the user first; operators see it only once it is
            # escalated (escalate_clarification), as docs/end-users.md promises.
            events.ticket_opened(ticket)
        events.task_updated(task)
    return ticket


def _stale_claim() -> Q:
    """A claim whose holder has shown no sign of life for KAIROS_CLAIM_TIMEOUT seconds.

    An operator's open ticket page renews its claim while they work; a closed laptop or a
    crashed browser cannot release it, so after the timeout anyone may take it.
    """
    cutoff = timezone.now() - timedelta(seconds=float(settings.KAIROS_CLAIM_TIMEOUT))
    return Q(status=TicketStatus.CLAIMED, claimed_at__lt=cutoff)


def claim_ticket(ticket: Ticket, user: Any) -> Ticket:
    """Take ``ticket`` for ``user``; the holder claiming again renews the claim."""
    with transaction.atomic():
        won = Ticket.objects.filter(
            Q(status=TicketStatus.OPEN) | Q(status=TicketStatus.CLAIMED, assignee=user)
            | _stale_claim(), id=ticket.id,
        ).update(status=TicketStatus.CLAIMED, assignee=user, claimed_at=timezone.now())
        was = (ticket.status, ticket.assignee_id)
        ticket.refresh_from_db()
        if not won:
            if ticket.status == TicketStatus.CLAIMED:
                raise Conflict(f"{ticket.assignee} holds this ticket")
            raise Conflict(f"this ticket is already {ticket.status}")
        if was != (TicketStatus.CLAIMED, user.pk):
            events.ticket_claimed(ticket)
    return ticket


def reassign_ticket(ticket: Ticket, admin: Any, to_user: Any) -> Ticket:
    """An admin gives a still-open ticket to ``to_user`` (an operator), whoever holds it."""
    if not is_admin(admin):
        raise Forbidden("only admins reassign tickets")
    if to_user is None or not is_operator(to_user):
        raise ServiceError("tickets can only be given to an operator")
    with transaction.atomic():
        won = Ticket.objects.filter(
            id=ticket.id, status__in=(TicketStatus.OPEN, TicketStatus.CLAIMED),
        ).update(status=TicketStatus.CLAIMED, assignee=to_user, claimed_at=timezone.now())
        ticket.refresh_from_db()
        if not won:
            raise Conflict(f"this ticket is already {ticket.status}")
        events.ticket_claimed(ticket)
    return ticket


def release_ticket(ticket: Ticket, user: Any) -> Ticket:
    with transaction.atomic():
        won = Ticket.objects.filter(id=ticket.id, status=TicketStatus.CLAIMED,
                                    assignee=user).update(status=TicketStatus.OPEN,
                                                          assignee=None, claimed_at=None)
        ticket.refresh_from_db()
        if not won:
            raise Conflict("you do not hold this ticket")
        events.ticket_claimed(ticket)
    return ticket


@dataclass
class Resolution:
    decision: str
    action: Action | None = None
    answer: str = ""


def check_resolution(ticket: Ticket, decision: Any, action: Any = None,
                     answer: Any = None) -> Resolution:
    """Validate a resolution with the same rules as the agent's own actions."""
    choices = {c.value for c in Decision}
    if decision not in choices:
        raise ServiceError(f"decision must be one of {', '.join(sorted(choices))}")
    if decision == Decision.ANSWER:
        return Resolution(decision, answer=check_message_text(answer))
    if decision == Decision.APPROVE:
        if ticket.kind == TicketKind.CLARIFICATION:
            raise Conflict("a clarification is resolved with an answer, not approved")
        if ticket.reason == TicketReason.TAKEOVER_LAPSED:
            return Resolution(decision)  # the agent goes on from the phone's screen
        proposed = ticket.step.proposed_action if ticket.step else None
        checked = validate_action(proposed) if proposed else None
        if not isinstance(checked, Action):
            raise Conflict("there is no valid proposed action to approve; edit it instead")
        return Resolution(decision, action=checked)
    if decision == Decision.EDIT:
        if ticket.step is None:
            raise Conflict("this ticket has no step to edit: approve to let the agent go on, "
                           "or take over")
        device = ticket.task.device
        checked = validate_action(action, (device.width, device.height))
        if isinstance(checked, ActionError):
            raise ServiceError(f"invalid action: {checked.message}")
        if ticket.step is not None and ticket.step.ui_nodes:
            checked = loop.shown_name(checked, nodes_from_json(ticket.step.ui_nodes))
        return Resolution(decision, action=checked)
    if decision == Decision.ABORT and isinstance(answer, str) and answer.strip():
        # An abort may say why; the user reads it in their chat.
        return Resolution(decision, answer=check_message_text(answer))
    return Resolution(decision)


def resolve_ticket(ticket: Ticket, user: Any, decision: Any, action: Any = None,
                   answer: Any = None) -> Ticket:
    """Approve / edit / take over / answer / abort. Exactly one resolution wins."""
    from agents.runtime.training.labels import judge

    resolution = check_resolution(ticket, decision, action, answer)
    now = timezone.now()
    human_action = resolution.action.to_json() if resolution.action else None
    step = ticket.step
    # What the decision says about the proposal: an edit that changes nothing labels it
    # right; a take-over is wrong until its first input says otherwise (operator_input).
    right = judge(resolution.decision, step.proposed_action if step else None, human_action,
                  step.ui_nodes if step else None)
    with transaction.atomic():
        won = Ticket.objects.filter(
            Q(status=TicketStatus.OPEN) | Q(status=TicketStatus.CLAIMED, assignee=user)
            | _stale_claim(), id=ticket.id,
        ).update(status=TicketStatus.RESOLVED, decision=resolution.decision,
                 human_action=human_action, agent_right=right,
                 answer=resolution.answer, resolved_by=user, resolved_at=now,
                 assignee=user)
        ticket.refresh_from_db()
        if not won:
            if ticket.status == TicketStatus.CLAIMED:
                raise Conflict(f"{ticket.assignee} holds this ticket")
            raise Conflict(f"this ticket is no longer open (it is {ticket.status})")
        task = Task.objects.select_related("device").get(id=ticket.task_id)
        goal = task.goal  # as the agent had it, before this resolution's answer
        _learn_from_ticket(ticket, task, resolution, user)
        _apply_resolution(ticket, task, resolution, user)
        if ticket.reason != TicketReason.TAKEOVER_LAPSED:  # no agent action to label
            # After the commit, and after the step it schedules is handed to a worker
            # (on_commit runs in order): the training copy of the screen and history is
            # not on the path from approve to action (bench tickets, issue 26).
            step = ticket.step
            transaction.on_commit(lambda: _record_training(ticket, task, user, step, goal))
        events.ticket_resolved(ticket)
        if resolution.decision in (Decision.APPROVE, Decision.EDIT, Decision.TAKEOVER):
            # A new label: refit the calibrator once KAIROS_REFIT_EVERY have come in.
            from agents.runtime.learning import schedule_due_refits

            transaction.on_commit(schedule_due_refits)
        task.refresh_from_db()
        events.task_updated(task)
    return ticket


def _apply_resolution(ticket: Ticket, task: Task, resolution: Resolution, user: Any) -> None:
    step = ticket.step
    waiting = (TaskStatus.WAITING_OPERATOR, TaskStatus.WAITING_USER)
    if resolution.decision == Decision.ABORT:
        why = f": {resolution.answer}" if resolution.answer else ""
        finish_task(task, TaskStatus.ABORTED, error=f"aborted by {user}{why}", by=user)
        return
    if resolution.decision == Decision.ANSWER:
        Task.objects.filter(id=task.id).update(answers=list(task.answers) + [resolution.answer])
        if ticket.kind == TicketKind.CLARIFICATION and task.owner_id != getattr(user, "pk", None):
            # The owner sees in the chat that someone answered for them, and what.
            message = Message.objects.create(
                task=task, sender=Message.Sender.OPERATOR, author=user, ticket=ticket,
                text=f"An operator answered for you: {resolution.answer}")
            events.chat_message(message)
        if step is not None:
            Step.objects.filter(id=step.id, status=StepStatus.WAITING).update(
                status=StepStatus.ANSWERED, outcome="clarified")
        _resume(task, waiting, next_index=(step.index + 1) if step else task.cursor)
        return
    if resolution.decision == Decision.TAKEOVER:
        if step is not None:
            Step.objects.filter(id=step.id, status=StepStatus.WAITING).update(
                status=StepStatus.CANCELLED, outcome="taken over")
        # progressed_at counts the take-over's idle time from here (lapse_idle_takeovers).
        Task.objects.filter(id=task.id, status__in=waiting).update(
            status=TaskStatus.TAKEN_OVER, progressed_at=timezone.now())
        return
    if resolution.action is None:  # approving a lapsed take-over: the agent goes on
        _resume(task, waiting, next_index=_next_step_index(task))
        return
    # approve / edit: the step runs the chosen action, then the loop goes on.
    assert resolution.action is not None
    by = DecidedBy.AGENT if resolution.decision == Decision.APPROVE else DecidedBy.OPERATOR
    if step is None or step.status != StepStatus.WAITING:
        raise Conflict("the step of this ticket is no longer waiting")
    Step.objects.filter(id=step.id, status=StepStatus.WAITING).update(
        status=StepStatus.READY, executed_action=resolution.action.to_json(), decided_by=by)
    _resume(task, waiting, next_index=step.index)


def _resume(task: Task, from_statuses: tuple, next_index: int) -> None:
    if task.tickets.filter(status__in=(TicketStatus.OPEN, TicketStatus.CLAIMED)).exists():
        return  # another person is still needed before the agent can go on
    won = Task.objects.filter(id=task.id, status__in=from_statuses).update(
        status=TaskStatus.RUNNING, cursor=next_index)
    if won:
        schedule_step(task.id, next_index)


def _next_step_index(task: Task) -> int:
    last = task.steps.order_by("-index").values_list("index", flat=True).first()
    return 0 if last is None else last + 1


# --- the simulated operator ----------------------------------------------------------

def resolve_with_oracle(ticket: Ticket, user: Any) -> Ticket:
    """Resolve a ticket as the simulator's oracle would (run_task --operator oracle).

    Approve a proposal on a shortest path, else edit it to the oracle's next action;
    answer a clarification with the task's hidden preference.
    """
    task = ticket.task
    if not (task.suite and task.suite_task):
        raise ServiceError("the oracle operator needs a suite task")
    client = get_device_client()
    name = task.device.name
    if ticket.kind == TicketKind.CLARIFICATION:
        answer = client.oracle_answer(name, task.suite, task.suite_task, ticket.question)
        return resolve_ticket(ticket, user, Decision.ANSWER, answer=answer)
    proposed = validate_action(ticket.step.proposed_action) if ticket.step and \
        ticket.step.proposed_action else None
    if isinstance(proposed, Action) and ticket.step.status == StepStatus.WAITING and \
            client.oracle_judge(name, task.suite, task.suite_task, proposed):
        return resolve_ticket(ticket, user, Decision.APPROVE)
    if ticket.step is None or ticket.step.status != StepStatus.WAITING:
        return resolve_ticket(ticket, user, Decision.ABORT)
    choices = client.oracle_next(name, task.suite, task.suite_task)
    if not choices:
        # A dead end: no path to success is left (something the agent did cannot be
        # undone). A person would stop here, as evaluate's simulated operator does.
        return resolve_ticket(ticket, user, Decision.ABORT)
    return resolve_ticket(ticket, user, Decision.EDIT, action=choices[0].to_json())
