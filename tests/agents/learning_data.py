"""Labelled history for the refit and drift tests: tasks, steps and resolved tickets
written as the product writes them (a step with its evidence, a ticket a person decided)."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from agents.runtime.models import (
    Decision, Step, StepStatus, Task, TaskStatus, Ticket, TicketKind, TicketStatus,
)
from devices.models import Device

START = timezone.make_aware(datetime(2026, 11, 1, 9, 0))

# Two kinds of evidence a scripted backend states; what they mean is up to each test.
SURE = {"rule": "sure_rule", "raw": 5.0, "action": "CLICK"}
UNSURE = {"rule": "unsure_rule", "raw": 1.0, "action": "CLICK"}


def labelled_step(owner: Any, *, right: bool, evidence: dict | None = None,
                  at: datetime | None = None, backend: str = "scripted",
                  app: str = "com.example.notes", device: str = "sim-1",
                  confidence: float = 3.0, threshold: float = 4.0,
                  reason: str = "low_confidence", decision: str | None = None) -> Ticket:
    """One step a person judged: approve when ``right``, else edit (or ``decision``)."""
    at = at or timezone.now()
    task = Task.objects.create(owner=owner, device=Device.objects.get(name=device),
                               instruction="Do the thing", threshold=threshold,
                               backend=backend, status=TaskStatus.SUCCEEDED,
                               finished_at=at)
    step = Step.objects.create(
        task=task, index=0, app=app, confidence=confidence, status=StepStatus.DONE,
        proposed_action={"type": "CLICK", "x": 10, "y": 10},
        executed_action={"type": "CLICK", "x": 10, "y": 10},
        extra={"evidence": dict(evidence)} if evidence is not None else {})
    ticket = Ticket.objects.create(
        kind=TicketKind.INTERVENTION, reason=reason, status=TicketStatus.RESOLVED, task=task,
        step=step, decision=decision or (Decision.APPROVE if right else Decision.EDIT),
        resolved_by=owner, resolved_at=at)
    Ticket.objects.filter(pk=ticket.pk).update(created_at=at)
    return ticket


def history(owner: Any, kinds: list[tuple[dict, bool]], *, start: datetime = START,
            **options: Any) -> list[Ticket]:
    """One labelled step per (evidence, right), a minute apart from ``start``."""
    return [labelled_step(owner, right=right, evidence=evidence,
                          at=start + timedelta(minutes=i), **options)
            for i, (evidence, right) in enumerate(kinds)]


def consistent(n: int) -> list[tuple[dict, bool]]:
    """``n`` labels where the sure evidence was right and the unsure wrong, alternating
    (one in five of each the other way, so a fit is not certain)."""
    out = []
    for i in range(n):
        sure = i % 2 == 0
        flipped = i % 10 in (4, 7)
        out.append((SURE if sure else UNSURE, sure != flipped))
    return out
