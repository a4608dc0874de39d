"""The calibrator refits itself from the installation's labels, keeps every version and
can be rolled back (issue 24, item 4)."""
from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client

from agents.runtime import learning
from agents.brain.backends.base import Proposal
from agents.brain.calibration.gate import find_calibrator
from agents.runtime.models import CalibratorVersion, Ticket, TicketStatus
from agents.runtime.services import lifecycle, tickets, verdicts
from devices.actions import Action
from devices.models import Device
from access.audit import AuditEntry
from tests.agents.learning_data import SURE, UNSURE, consistent, history


@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    return settings.VAR_DIR


def versions_listed() -> list[str]:
    out = io.StringIO()
    call_command("calibrate", "--versions", stdout=out)
    return out.getvalue().splitlines()


def ask_and_approve(demo, inline_steps, evidence: dict, right: bool) -> Ticket:
    """A task whose one step asks (confidence below γ 5); an operator decides it."""
    from tests.conftest import ScriptedBackend

    ScriptedBackend.script = [Proposal(Action("COMPLETE"), confidence=3.0,
                                       evidence=dict(evidence),
                                       extra={"evidence": dict(evidence)})]
    task = lifecycle.create_task(demo["user"], Device.objects.get(name="sim-1"),
                                 "Finish the thing", threshold=5, backend="scripted")
    inline_steps.drain()
    ticket = Ticket.objects.get(task=task, status=TicketStatus.OPEN)
    if right:
        tickets.resolve_ticket(ticket, demo["operator"], "approve")
    else:
        # Another action than the proposal's: an identical edit would label it right.
        tickets.resolve_ticket(ticket, demo["operator"], "edit", {"type": "IMPOSSIBLE"})
    inline_steps.drain()  # the task finishes, freeing the phone for the next one
    return ticket


@pytest.mark.django_db(transaction=True)
def test_resolving_tickets_refits_the_calibrator_without_anyone_running_a_command(
        demo, scripted, inline_steps, var_dir, settings):
    from kairos_web.celery import start_worker_thread
    from tests.stack import wait_for

    settings.KAIROS_REFIT_EVERY = 5
    history(demo["operator"], consistent(30))
    first = learning.refit_backend("scripted", "labels")  # the refit those 30 labels made due
    assert first is not None and first.number == 1 and first.labels == 30
    max_age = connection.settings_dict["CONN_MAX_AGE"]
    connection.settings_dict["CONN_MAX_AGE"] = 0
    worker = start_worker_thread()  # the embedded default's in-process worker
    try:
        for i in range(4):
            ask_and_approve(demo, inline_steps, SURE if i % 2 else UNSURE, right=i % 2 == 1)
        assert not learning.refit_due("scripted")  # 4 new labels: not yet
        ask_and_approve(demo, inline_steps, SURE, right=True)
        wait_for(lambda: CalibratorVersion.objects.filter(backend="scripted",
                                                          number=2).exists(),
                 timeout=120, what="the worker to refit after the 5th new label")
    finally:
        worker.stop(in_sighandler=False)
        connection.settings_dict["CONN_MAX_AGE"] = max_age
    second = CalibratorVersion.objects.get(backend="scripted", number=2)
    assert second.labels == 35 and second.trigger == "labels"
    assert second.scores["held_out"] == 7 and second.scores["fitted_on"] == 28
    lines = versions_listed()
    assert lines[0].startswith("scripted v2 ") and "35 labels" in lines[0]
    assert lines[1].startswith("scripted v1 ") and lines[2].startswith("scripted v0 ")
    assert len(lines) == 3


def test_a_fit_that_contradicts_the_newest_labels_is_kept_and_not_taken(demo, var_dir):
    # The older 24 labels say the sure evidence is wrong and the unsure right; the newest
    # 6, held back, say the opposite — as the backend's own score (5 vs 1) does.
    contradicting = [(evidence, not right) for evidence, right in consistent(24)]
    newest = [(SURE, True), (UNSURE, False)] * 3
    history(demo["operator"], contradicting + newest)
    version = learning.refit_backend("scripted", "manual")
    assert version.number == 1 and version.labels == 30
    assert version.calibrator is not None and not version.taken and not version.current
    assert "is worse than the backend's own score" in version.reason
    assert version.scores["brier_new"] > version.scores["brier_current"]
    assert version.scores["held_out"] == 6
    # The gate still reads what it read before: no calibrator file was written.
    assert find_calibrator("scripted", var_dir=var_dir) is None
    assert CalibratorVersion.objects.get(backend="scripted", current=True).number == 0
    line = versions_listed()[0]
    assert line.startswith("scripted v1 ") and "not taken" in line


def test_a_fit_from_too_few_labels_is_recorded_with_why(demo, var_dir):
    history(demo["operator"], consistent(12))
    version = learning.refit_backend("scripted", "manual")
    assert version.calibrator is None and not version.taken
    assert "too little data" in version.reason


def test_an_admin_rolls_back_to_any_version_and_it_is_audited(demo, var_dir):
    history(demo["operator"], consistent(30))
    taken = learning.refit_backend("scripted", "manual")
    assert taken.taken and taken.current
    assert find_calibrator("scripted", var_dir=var_dir).version == taken.digest
    shipped = CalibratorVersion.objects.get(backend="scripted", number=0)

    admin = Client()
    admin.force_login(demo["admin"])
    page = admin.get("/review/calibration/")
    assert page.status_code == 200
    assert b"Roll back to v0" in page.content and b"taken</b>" in page.content
    response = admin.post(f"/review/calibration/versions/{shipped.pk}/rollback")
    assert response.status_code == 302
    assert CalibratorVersion.objects.get(backend="scripted", current=True).number == 0
    assert find_calibrator("scripted", var_dir=var_dir) is None  # back to the own score
    entry = AuditEntry.objects.get(action="calibrator.rollback")
    assert entry.actor == demo["admin"] and entry.target == "calibrator scripted"
    assert entry.changes == {"version": [1, 0]}

    response = admin.post(f"/review/calibration/versions/{taken.pk}/rollback")
    assert response.status_code == 302
    assert find_calibrator("scripted", var_dir=var_dir).version == taken.digest
    assert AuditEntry.objects.filter(action="calibrator.rollback").count() == 2


def test_rollback_refuses_bad_input(demo, var_dir):
    history(demo["operator"], consistent(12))
    unfitted = learning.refit_backend("scripted", "manual")
    admin = Client(raise_request_exception=False)
    admin.force_login(demo["admin"])
    response = admin.post("/review/calibration/versions/999999/rollback")
    assert response.status_code == 404 and b"there is no calibrator version 999999" \
        in response.content
    response = admin.post(f"/review/calibration/versions/{unfitted.pk}/rollback")
    assert response.status_code == 409 and b"was never fitted" in response.content
    assert admin.post("/review/calibration/versions/not-a-number/rollback").status_code == 404
    response = admin.get(f"/review/calibration/versions/{unfitted.pk}/rollback")
    assert response.status_code == 405 and "detail" in response.json()
    assert not AuditEntry.objects.filter(action="calibrator.rollback").exists()


def test_the_nightly_refit_skips_a_backend_without_new_labels(demo, var_dir):
    history(demo["operator"], consistent(30))
    assert [v.number for v in learning.refit_all("nightly")] == [1]
    assert learning.refit_all("nightly") == []


def test_beat_runs_the_nightly_refit_with_a_task_the_workers_know():
    from kairos_web.celery import app

    entry = app.conf.beat_schedule["refit-calibrators-nightly"]
    assert entry["task"] in app.tasks and entry["kwargs"] == {"trigger": "nightly"}
    assert (entry["schedule"].hour, entry["schedule"].minute) == ({3}, {30})


@pytest.mark.django_db
def test_an_owners_yes_labels_the_steps_that_acted_alone_and_a_no_labels_none(demo):
    """Verdicts are labels too (issue 24, items 3–4): a "yes" confirms every step of the
    episode that acted alone; a "no" says none of them was surely right, so none counts."""
    from agents.runtime.models import DecidedBy, Step, StepStatus, Task, TaskStatus

    def episode(instruction: str) -> Task:
        task = Task.objects.create(owner=demo["user"], device=Device.objects.get(name="sim-1"),
                                   instruction=instruction, threshold=4, backend="scripted",
                                   status=TaskStatus.SUCCEEDED)
        for index in range(3):
            Step.objects.create(task=task, index=index, app="com.example.notes",
                                confidence=5.0, status=StepStatus.DONE,
                                decided_by=DecidedBy.AGENT,
                                proposed_action={"type": "CLICK", "x": 1, "y": 1},
                                executed_action={"type": "CLICK", "x": 1, "y": 1},
                                extra={"evidence": dict(SURE)})
        return task

    confirmed, refused = episode("Turn on notes sync"), episode("Turn off notes sync")
    assert learning.label_count("scripted") == 0
    verdicts.record_verdict(confirmed, demo["user"], True)
    verdicts.record_verdict(refused, demo["user"], False, "it turned it on")
    labels = learning.gather_labels("scripted", with_evidence=True)
    assert [(label.right, label.source) for label in labels] == [(True, "verdict")] * 3
    assert {label.step_id for label in labels} == set(
        confirmed.steps.values_list("id", flat=True))
    assert learning.label_count("scripted") == 3
