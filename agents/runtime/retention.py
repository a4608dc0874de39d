"""Retention: old finished tasks go, with their steps, tickets, chat, training records and
screenshot files (``manage.py purge``). Nothing else is touched: running tasks, devices,
users and newer work stay."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from agents.runtime.models import (
    FINISHED_TASK_STATUSES, Message, Step, Task, Ticket, TrainingRecord,
)

BATCH = 200


@dataclass
class PurgeReport:
    cutoff: dt.datetime
    tasks: int = 0
    steps: int = 0
    tickets: int = 0
    messages: int = 0
    training_records: int = 0
    files: int = 0
    bytes: int = 0
    missing_files: int = 0
    errors: list[str] = field(default_factory=list)


def purgeable(cutoff: dt.datetime) -> QuerySet[Task]:
    """Finished tasks whose last activity is before ``cutoff``."""
    return Task.objects.filter(status__in=FINISHED_TASK_STATUSES).filter(
        Q(finished_at__lt=cutoff) | Q(finished_at__isnull=True, updated_at__lt=cutoff))


def _files_of(task_ids: list) -> set[str]:
    names = set(Step.objects.filter(task_id__in=task_ids).exclude(screenshot="")
                .values_list("screenshot", flat=True))
    names |= set(TrainingRecord.objects.filter(task_id__in=task_ids).exclude(screenshot="")
                 .values_list("screenshot", flat=True))
    return names


def purge(days: float, *, dry_run: bool = True) -> PurgeReport:
    """Count (dry run) or remove what is older than ``days``. Batches keep memory flat."""
    if days < 0:
        raise ValueError("--older-than must be zero or more days")
    report = PurgeReport(cutoff=timezone.now() - dt.timedelta(days=days))
    ids = list(purgeable(report.cutoff).order_by("created_at").values_list("id", flat=True))
    for start in range(0, len(ids), BATCH):
        batch = ids[start:start + BATCH]
        report.tasks += len(batch)
        report.steps += Step.objects.filter(task_id__in=batch).count()
        report.tickets += Ticket.objects.filter(task_id__in=batch).count()
        report.messages += Message.objects.filter(task_id__in=batch).count()
        report.training_records += TrainingRecord.objects.filter(task_id__in=batch).count()
        files = _files_of(batch)
        for name in files:
            try:
                report.bytes += default_storage.size(name)
                report.files += 1
            except OSError:
                report.missing_files += 1
        if dry_run:
            continue
        with transaction.atomic():
            # Re-check in the transaction: a task that became active again is kept.
            purgeable(report.cutoff).filter(id__in=batch).delete()
        # Files go after the rows are gone, so a failed delete never leaves rows that
        # point at missing screenshots.
        for name in files:
            try:
                default_storage.delete(name)
            except OSError as exc:
                report.errors.append(f"{name}: {exc}")
    return report
