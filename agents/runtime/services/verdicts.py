"""The owner's verdict on a finished task: "Did Kairos do what you asked?" (issue 24).

Recorded once per finished task, by its owner only; it teaches the experience memory
(:func:`.labels.learn_from_task_verdict`), a "yes" labels the steps that acted alone for
the next refit, and a "no" keeps them out of ``learnable_steps`` and puts the episode at
the top of the admins' review (``said_no_episodes``).
"""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from access.errors import Conflict, Forbidden, ServiceError
from agents.runtime.models import DecidedBy, Step, StepStatus, Task, TaskStatus
from agents.runtime.services.labels import learn_from_task_verdict
from agents.runtime.services.validation import check_text


MAX_VERDICT_NOTE_LENGTH = 2000


def check_verdict(right: Any, note: Any) -> tuple[bool, str]:
    if not isinstance(right, bool):
        raise ServiceError("'right' must be true or false")
    if note is None:
        note = ""
    if not isinstance(note, str):
        raise ServiceError("'note' must be text")
    note = check_text(note.strip(), "note")
    if len(note) > MAX_VERDICT_NOTE_LENGTH:
        raise ServiceError(f"the note is {len(note)} characters; at most "
                           f"{MAX_VERDICT_NOTE_LENGTH}")
    return right, note


def record_verdict(task: Task, user: Any, right: Any, note: Any = None) -> Task:
    """The owner's answer to "Did Kairos do what you asked?" (issue 24, item 3).

    Owner only (operators may see the task, but only its owner knows what they meant),
    once per task, and only once the task has finished. A "no" keeps the episode's
    acted-alone steps out of ``learnable_steps`` and puts it at the top of /review/.
    """
    if task.owner_id != getattr(user, "pk", None):
        raise Forbidden("only the task's owner says whether it did what they asked")
    right, note = check_verdict(right, note)
    with transaction.atomic():
        won = Task.objects.filter(id=task.id, status__in=(
            TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.ABORTED),
            verdict_right__isnull=True).update(verdict_right=right, verdict_note=note,
                                               verdict_at=timezone.now())
        task.refresh_from_db()
        if not won:
            if not task.is_finished:
                raise Conflict("the task has not finished yet; answer once it has")
            raise Conflict("you have already answered for this task")
        # The verdict teaches the experience memory (a "yes" confirms the steps that acted
        # alone, a "no" corrects those that came from memory), and a "yes" labels those
        # steps for the next refit.
        learn_from_task_verdict(task, right)
        if right:
            from agents.runtime.learning import schedule_due_refits
            transaction.on_commit(schedule_due_refits)
    return task


def said_no_episodes(limit: int = 20):
    """Finished tasks whose owner said Kairos did not do what they asked, newest first:
    the top of the admins' review."""
    return (Task.objects.filter(verdict_right=False).select_related("owner", "device")
            .order_by("-verdict_at")[:limit])


def learnable_steps():
    """The executed steps this installation may learn from (issue 24, item 3).

    Every done step with an executed action, except the steps that acted alone (no
    ticket; the agent decided) in an episode whose owner said "no, that is not what I
    asked": nobody judged those steps, and the one person who knows says the episode
    went wrong. Steps a person decided stay: their label is the person's. A "yes"
    confirms the acted-alone steps (``Task.verdict_right`` True).
    """
    return (Step.objects.filter(status=StepStatus.DONE, executed_action__isnull=False)
            .exclude(Q(task__verdict_right=False) & Q(decided_by=DecidedBy.AGENT)
                     & Q(tickets__isnull=True)))
