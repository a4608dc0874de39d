"""Celery tasks: thin wrappers that take ids, re-fetch and call one service.

Nothing in production imports this module (the worker finds it by autodiscovery): the
services and learning enqueue these by their registered names
(:mod:`agents.runtime.task_names`), so this module imports them and they never import it.
"""
from __future__ import annotations

from celery import shared_task

from agents.runtime.services import chat, steps
from agents.runtime.task_names import ESCALATE_CLARIFICATION, REFIT_CALIBRATORS, RUN_STEP


# Late acks (CELERY_TASK_ACKS_LATE, on with the Redis broker) are safe because run_step
# is idempotent per (task, index): a redelivered message finds the step claimed and never
# repeats the device action.
@shared_task(name=RUN_STEP, ignore_result=True)
def run_step_task(task_id: str, index: int) -> str:
    return steps.run_step(task_id, index)


@shared_task(name=ESCALATE_CLARIFICATION, ignore_result=True)
def escalate_clarification_task(ticket_id: str) -> None:
    chat.escalate_clarification(ticket_id)


@shared_task(name=REFIT_CALIBRATORS, ignore_result=True)
def refit_calibrators_task(backend: str | None = None, trigger: str = "nightly") -> list[int]:
    """Refit the evidence calibrators from the installation's labels (agents/runtime/learning.py):
    after ``KAIROS_REFIT_EVERY`` new labels (``trigger="labels"``) and nightly."""
    from agents.runtime import learning

    return [version.number for version in learning.refit_all(trigger, backend)]
