"""Tasks that stopped moving because the process running them died (issue 11, item 6).

A worker killed with ``-9`` (all of it, not only a pool child) leaves its step's message in
Redis's unacked set until the transport's visibility timeout, an hour away, and the task
"running" with its step scheduled or executing. Nothing in the message path notices, so
every worker runs :func:`sweep_stalled_tasks` every ``KAIROS_SWEEP_INTERVAL`` seconds
(``StallSweeper`` below, a Celery worker bootstep; the embedded default's worker thread
runs it too). The sweep survives every process dying because any worker that starts runs
it at once.

A running task is *stalled* when its ``progressed_at`` (step scheduled or action started)
is older than ``KAIROS_STALL_SECONDS``. Its step at the cursor is then:

* missing, ready or proposed — the message was lost: the step is scheduled again (``run_step``
  is idempotent per index, so a late redelivery does nothing);
* executing — the worker died mid-action: the device may or may not have acted, so the action
  is never repeated; the step closes as ``unknown`` and the next step re-observes the screen
  (:func:`agents.runtime.services.steps.abandon_executing_step`);
* done, answered or cancelled — what follows the step was lost: a COMPLETE / IMPOSSIBLE step
  ends the task, any other moves the cursor on
  (:func:`agents.runtime.services.steps.follow_up_settled_step`).

The sweep also settles take-over inputs whose server died while the phone acted (the
input's step is committed before the phone acts): the device host says whether it performed
the step, and the step is recorded done or cancelled
(``services.takeover.settle_orphaned_inputs``).

And it hands to operators every question still unanswered ``KAIROS_CLARIFICATION_TIMEOUT``
after it was asked (``services.chat.escalate_overdue_clarifications``): the delayed hand-off a
worker killed whole held is stuck in Redis until the visibility timeout.

Each recovery is claimed with a conditional UPDATE on ``progressed_at``, so several workers
sweeping at once recover a task once. The bound a user can rely on: a stalled task moves
again at most ``KAIROS_STALL_SECONDS + KAIROS_SWEEP_INTERVAL`` after it last progressed,
once any worker runs (docs/reliability.md).
"""
from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any

from celery import bootsteps

logger = logging.getLogger(__name__)


def sweep_stalled_tasks(*, now: datetime | None = None,
                        stall_after: float | None = None) -> dict[str, str]:
    """Recover every stalled running task; returns ``{task id: what was done}`` (for an
    escalated question, ``{ticket id: …}``).

    Also lapses take-overs idle for ``KAIROS_TAKEOVER_TIMEOUT`` (issue 26, item 1) and starts a queued task whose phone nobody drives (belt and braces for a start that
    a dying process did not finish).
    """
    from django.conf import settings
    from django.db.models import Q
    from django.utils import timezone

    from agents.runtime.models import Task, TaskStatus

    now = now or timezone.now()
    stall_after = settings.KAIROS_STALL_SECONDS if stall_after is None else stall_after
    cutoff = now - timedelta(seconds=stall_after)
    stalled = Task.objects.filter(status=TaskStatus.RUNNING).filter(
        Q(progressed_at__lt=cutoff) | Q(progressed_at=None, started_at__lt=cutoff))
    done: dict[str, str] = {}
    for task_id, seen in stalled.values_list("id", "progressed_at")[:100]:
        try:
            done[str(task_id)] = recover_task(task_id, seen, now)
        except Exception:  # one bad task must not stop the sweep of the others
            logger.exception("could not recover stalled task %s", task_id)
    from agents.runtime.services import chat, lifecycle, takeover

    try:
        # Take-overs nobody used go back to the queue (issue 26, item 1).
        for task_id in takeover.lapse_idle_takeovers(now):
            done[task_id] = "take-over lapsed: back in the queue"
    except Exception:
        logger.exception("could not lapse idle take-overs")

    try:
        # Take-over inputs a killed server left executing (issue 23, item 1).
        done.update(takeover.settle_orphaned_inputs())
    except Exception:
        logger.exception("could not settle orphaned take-over inputs")
    try:
        # Questions whose delayed hand-off died with a worker (issue 23, item 2).
        for ticket_id in chat.escalate_overdue_clarifications(now):
            done[ticket_id] = "escalated its overdue question to operators"
    except Exception:
        logger.exception("could not escalate overdue clarifications")
    for device_id in _free_devices_with_a_queue():
        started = lifecycle.start_next_queued(device_id)
        if started is not None:
            done[str(started.id)] = "started"
    for task_id, what in done.items():
        logger.warning("stall sweep: %s %s", task_id, what)
    return done


def recover_task(task_id: Any, seen: datetime | None, now: datetime) -> str:
    """Move one stalled task on; ``raced`` when another sweeper or the task itself won."""
    from django.db import transaction

    from agents.runtime.models import Step, StepStatus, Task, TaskStatus
    from agents.runtime.services import lifecycle, steps

    with transaction.atomic():
        claim = Task.objects.filter(id=task_id, status=TaskStatus.RUNNING)
        claim = claim.filter(progressed_at=seen) if seen else claim.filter(progressed_at=None)
        if not claim.update(progressed_at=now):
            return "raced"
        task = Task.objects.select_related("device").get(id=task_id)
        step = Step.objects.filter(task=task, index=task.cursor).first()
        if step is None or step.status in (StepStatus.READY, StepStatus.PROPOSED):
            lifecycle.schedule_step(task.id, task.cursor)
            return f"rescheduled step {task.cursor}"
    if step.status == StepStatus.EXECUTING:
        return f"settled executing step {step.index}: " + \
            steps.abandon_executing_step(task, step)
    if step.status in (StepStatus.DONE, StepStatus.ANSWERED, StepStatus.CANCELLED):
        return f"followed up {step.status} step {step.index}: " + \
            steps.follow_up_settled_step(task, step)
    return f"left alone (step {step.index} is {step.status})"


def _free_devices_with_a_queue() -> list[Any]:
    from django.db.models import Exists, OuterRef

    from agents.runtime.models import DRIVING_TASK_STATUSES, Task, TaskStatus

    driving = Task.objects.filter(device=OuterRef("device"), status__in=DRIVING_TASK_STATUSES)
    return list(Task.objects.filter(status=TaskStatus.QUEUED).exclude(Exists(driving))
                .values_list("device", flat=True).distinct())


class StallSweeper(bootsteps.StartStopStep):
    """Runs :func:`sweep_stalled_tasks` on a thread of every worker, at start and then
    every ``KAIROS_SWEEP_INTERVAL`` seconds. Registered in ``kairos_web/celery.py``."""

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, worker: Any) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True, name="stall-sweeper")
        self.thread.start()

    def stop(self, worker: Any) -> None:
        self.stopping.set()

    def _run(self) -> None:
        from django.conf import settings
        from django.db import close_old_connections

        from django.db import connections

        interval = float(settings.KAIROS_SWEEP_INTERVAL)
        try:
            while True:
                try:
                    close_old_connections()
                    sweep_stalled_tasks()
                except Exception:  # the database may be down for a while; try again later
                    logger.exception("stall sweep failed")
                if self.stopping.wait(interval):
                    return
        finally:
            connections.close_all()  # this thread's own connection
