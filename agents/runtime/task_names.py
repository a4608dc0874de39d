"""The runtime's Celery tasks by their registered names, and enqueuing one by name.

The wrappers in :mod:`agents.runtime.tasks` register under these names; the services,
the refits and the beat schedule enqueue by them. So the tasks module imports the
services and nothing imports it back (the worker finds it by autodiscovery).
"""
from __future__ import annotations

from typing import Any

from celery import current_app

RUN_STEP = "agents.run_step"
ESCALATE_CLARIFICATION = "agents.escalate_clarification"
REFIT_CALIBRATORS = "agents.refit_calibrators"


def enqueue(name: str, *, args: tuple = (), kwargs: dict[str, Any] | None = None,
            **options: Any) -> None:
    """Send the task called ``name`` to the workers (``countdown``, ``queue``… as Celery
    takes them); nobody waits for its result."""
    current_app.send_task(name, args=args, kwargs=kwargs, ignore_result=True, **options)
