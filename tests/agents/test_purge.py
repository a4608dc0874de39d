"""Retention: ``purge`` removes old finished tasks and their files, and nothing else."""
from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.files.storage import default_storage
from django.core.management import CommandError, call_command
from django.utils import timezone

from agents.runtime.models import Step, Task, Ticket, TrainingRecord
from devices.models import Device
from tests.frontend.review_data import run_episodes

pytestmark = pytest.mark.django_db


def purge(*args: str) -> str:
    out = io.StringIO()
    call_command("purge", *args, stdout=out)
    return out.getvalue()


def test_purge_is_a_dry_run_until_yes_and_keeps_recent_and_running_work(
        demo, scripted, inline_steps, phones):
    tasks = run_episodes(demo, scripted, inline_steps, phones)
    old, recent = tasks["edited"], tasks["approved"]
    Task.objects.filter(id=old.id).update(finished_at=timezone.now() - dt.timedelta(days=40))
    running = Task.objects.create(owner=demo["user"], device=Device.objects.get(name="sim-1"),
                                  instruction="still going", threshold=4, status="running")
    Task.objects.filter(id=running.id).update(updated_at=timezone.now() - dt.timedelta(days=90))
    old_files = list(Step.objects.filter(task=old).values_list("screenshot", flat=True))
    assert old_files and all(default_storage.exists(n) for n in old_files)

    report = purge("--older-than", "30")
    assert "Would remove 1 finished tasks" in report and "2 steps, 1 tickets" in report
    assert "1 training records, 2 screenshot files" in report and "Dry run" in report
    assert Task.objects.filter(id=old.id).exists()
    assert all(default_storage.exists(n) for n in old_files)

    report = purge("--older-than", "30", "--yes")
    assert report.startswith("Removed 1 finished tasks")
    assert not Task.objects.filter(id=old.id).exists()
    assert not Ticket.objects.filter(task_id=old.id).exists()
    assert not TrainingRecord.objects.filter(task_id=old.id).exists()
    assert not any(default_storage.exists(n) for n in old_files)
    # Nothing else is lost.
    assert Task.objects.filter(id__in=[recent.id, running.id, tasks["taken_over"].id]).count() == 3
    assert all(default_storage.exists(n) for n in Step.objects.filter(task=recent).values_list(
        "screenshot", flat=True))
    assert "Would remove 0 finished tasks" in purge("--older-than", "30")


def test_purge_refuses_a_negative_age(db):
    with pytest.raises(CommandError, match="zero or more"):
        purge("--older-than", "-1")
    with pytest.raises(CommandError):
        purge("--older-than", "soon")
