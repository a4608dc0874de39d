"""The task's chat and its questions.

Messages: the owner's reply answers an open question (or an intervention it settles, or
refines the goal when nothing is asked); an operator may ask the owner from a ticket
(``ask_user``). The agent's own questions open as clarifications; one left unanswered
for ``KAIROS_CLARIFICATION_TIMEOUT`` goes to the operators, sent to a Celery worker by
the registered task name ``agents.escalate_clarification`` and caught up by the stall
sweep (``escalate_overdue_clarifications``).
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from access.errors import Conflict, Forbidden, NotFound, ServiceError
from access.roles import is_operator
from agents.brain import loop
from agents.runtime import events
from agents.runtime.models import (
    Decision, Message, Step, StepStatus, Task, Ticket, TicketKind, TicketReason, TicketStatus,
)
from agents.runtime.services.tickets import open_ticket, resolve_ticket
from agents.runtime.services.validation import check_message_text, check_text
from agents.runtime.task_names import ESCALATE_CLARIFICATION, enqueue
from devices.uitree import nodes_from_json


def post_message(task: Task, user: Any, text: Any, ticket_id: Any = None) -> Message:
    """A chat message; from the task's owner it answers an open clarification.

    ``ticket_id`` names the question a quick reply answers: when that question is closed
    the reply is refused (409) rather than posted as a stray message.
    """
    text = check_message_text(text)
    is_owner = task.owner_id == user.pk
    if not is_owner and not is_operator(user):
        raise Forbidden("this is not your task")
    task.refresh_from_db(fields=["status"])
    if task.is_finished:
        # Nobody reads the chat of a finished task: refuse rather than lose the message.
        raise Conflict("this task has finished; the chat is closed (start a new task instead)")
    with transaction.atomic():
        open_questions = task.tickets.filter(kind=TicketKind.CLARIFICATION, status__in=(
            TicketStatus.OPEN, TicketStatus.CLAIMED))
        named = None
        if ticket_id:
            try:
                named = task.tickets.filter(id=ticket_id).first()
            except Exception:  # not a UUID
                named = None
            # A question: the agent's, or one an operator asked from a ticket (ask_user).
            if named is None or (named.kind != TicketKind.CLARIFICATION
                                 and not _operator_asked(named)):
                raise NotFound("no such question in this task")
            if not named.is_open:
                raise Conflict("this question is already closed; write a new message instead")
        ticket = named or open_questions.order_by("created_at").first()
        message = Message.objects.create(
            task=task, sender=Message.Sender.USER if is_owner else Message.Sender.OPERATOR,
            author=user, text=text, ticket=ticket if is_owner else None)
        events.chat_message(message)
        if ticket is None and is_owner:
            ticket = _answered_intervention(task, text)
            if ticket is not None:
                Message.objects.filter(id=message.id).update(ticket=ticket)
            else:
                # No question is open, yet a reply is an answer all the same (to an
                # operator's chat question, or said ahead): it refines the goal the agent
                # reads at its next choices (RecAgent Eq. 6), e.g. "medium" for the size.
                Task.objects.filter(id=task.id).update(answers=list(
                    Task.objects.filter(id=task.id).values_list("answers", flat=True)[0]
                ) + [text])
        if ticket is not None and is_owner:
            # The owner knows their own preference best: an operator who claimed the
            # escalated question loses the claim, and their later resolve gets a 409.
            Ticket.objects.filter(id=ticket.id, status=TicketStatus.CLAIMED).exclude(
                assignee=user).update(status=TicketStatus.OPEN, assignee=None, claimed_at=None)
            resolve_ticket(ticket, user, Decision.ANSWER, answer=text)
    return message


def _operator_asked(ticket: Ticket) -> bool:
    """An operator asked the user a question from ``ticket`` (ask_user)."""
    return ticket.messages.filter(sender=Message.Sender.OPERATOR).exists()


MAX_ASK_OPTIONS = 6


def ask_user(ticket: Ticket, user: Any, question: Any, options: Any = None) -> Message:
    """An operator asks the task's owner a structured question from a ticket, with quick
    replies (issue 26): the user's reply answers the ticket, and the agent goes on with it
    as part of its goal — as when the agent asks itself."""
    if not is_operator(user):
        raise Forbidden("only operators ask from a ticket")
    question = check_message_text(question)
    if options is None:
        options = []
    if not isinstance(options, list) or len(options) > MAX_ASK_OPTIONS:
        raise ServiceError(f"options must be a list of at most {MAX_ASK_OPTIONS} answers")
    checked = []
    for option in options:
        if not isinstance(option, str) or not option.strip() or len(option.strip()) > 80:
            raise ServiceError("each option must be a short non-empty text (at most 80 characters)")
        checked.append(check_text(option.strip(), "option"))
    ticket.refresh_from_db()
    if not ticket.is_open:
        raise Conflict(f"this ticket is no longer open (it is {ticket.status})")
    if ticket.kind == TicketKind.CLARIFICATION:
        raise Conflict("this ticket is already a question to the user; answer it, or wait")
    if ticket.status == TicketStatus.CLAIMED and ticket.assignee_id != user.pk:
        raise Conflict(f"{ticket.assignee} holds this ticket")
    with transaction.atomic():
        message = Message.objects.create(
            task=ticket.task, sender=Message.Sender.OPERATOR, author=user, ticket=ticket,
            text=question, options=list(dict.fromkeys(checked)))
        events.chat_message(message)
    return message


# Tickets where the agent was unsure what the user wants: the user's own reply may settle
# them. A sensitive action, a device or model error is for an operator whatever is said.
ANSWERABLE_BY_THE_USER = (TicketReason.LOW_CONFIDENCE, TicketReason.AMBIGUOUS_INTENT,
                          TicketReason.NO_PROGRESS)


def _answered_intervention(task: Task, text: str) -> Ticket | None:
    """The open intervention the owner's chat reply answers: one waiting on a step whose
    screen offers an option the reply names ("A latte please" while the agent proposed
    Americano on the drinks list). The agent then looks again with the reply as part of
    its goal instead of an operator guessing (issue 26, item 5)."""
    for ticket in task.tickets.filter(
            kind=TicketKind.INTERVENTION, status__in=(TicketStatus.OPEN, TicketStatus.CLAIMED),
            step__status=StepStatus.WAITING).select_related("step").order_by("created_at"):
        if _operator_asked(ticket):
            return ticket  # an operator asked the user from this ticket: this is the answer
        if ticket.reason not in ANSWERABLE_BY_THE_USER:
            continue
        labels = [n.text or n.content_desc for n in nodes_from_json(ticket.step.ui_nodes or [])
                  if n.text or n.content_desc]
        if loop.names_an_option(text, labels):
            return ticket
    return None


def open_clarification(task: Task, step: Step, question: str, options: list[str]) -> Ticket:
    with transaction.atomic():
        Task.objects.filter(id=task.id).update(asked=list(task.asked) + [question])
        ticket = open_ticket(task, step, TicketKind.CLARIFICATION, TicketReason.AMBIGUOUS_INTENT,
                             question=question, options=options)
        message = Message.objects.create(task=task, sender=Message.Sender.AGENT, text=question,
                                         ticket=ticket, options=options)
        events.chat_message(message)
        schedule_escalation(ticket)
    return ticket


# --- clarification escalation ---------------------------------------------------------

def schedule_escalation(ticket: Ticket) -> None:
    delay = float(settings.KAIROS_CLARIFICATION_TIMEOUT)
    transaction.on_commit(
        lambda: enqueue(ESCALATE_CLARIFICATION, args=(str(ticket.id),), countdown=delay))


def escalate_overdue_clarifications(now: Any = None) -> list[str]:
    """The stall sweep's part (agents/runtime/recovery.py, issue 23, item 2): every question still
    unanswered ``KAIROS_CLARIFICATION_TIMEOUT`` after it was asked goes to the operators.

    The delayed hand-off :func:`schedule_escalation` sends is held by the worker that took
    it: a worker killed whole leaves it in Redis's unacknowledged set for the transport's
    visibility timeout (an hour). The database knows what is overdue; both paths escalate
    through the same conditional UPDATE, so a question reaches operators once.
    """
    cutoff = (now or timezone.now()) - timedelta(
        seconds=float(settings.KAIROS_CLARIFICATION_TIMEOUT))
    overdue = Ticket.objects.filter(kind=TicketKind.CLARIFICATION, status=TicketStatus.OPEN,
                                    escalated=False, created_at__lte=cutoff)
    return [str(ticket_id) for ticket_id in overdue.values_list("id", flat=True)[:100]
            if escalate_clarification(ticket_id)]


def escalate_clarification(ticket_id: Any) -> bool:
    """A question the user left unanswered goes to the operators' queue (once)."""
    with transaction.atomic():
        won = Ticket.objects.filter(id=ticket_id, kind=TicketKind.CLARIFICATION,
                                    status=TicketStatus.OPEN, escalated=False).update(
            escalated=True)
        if not won:
            return False
        ticket = Ticket.objects.select_related("task", "task__device", "step").get(id=ticket_id)
        message = Message.objects.create(
            task=ticket.task, sender=Message.Sender.SYSTEM, ticket=ticket,
            text="No answer yet, so an operator has been asked to help. You can still answer here.")
        events.chat_message(message)
        events.ticket_opened(ticket)
    return True
