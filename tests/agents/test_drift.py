"""Drift: an app whose confident steps are now wrong too often goes back to asking, and
admins see it named on /review/metrics/ (issue 24, item 5)."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client

from agents.runtime import learning
from agents.brain.backends import get_backend
from agents.brain.calibration.drift import (
    MIN_LABELS, WINDOW, drift_state, labels_to_trigger, right_labels_to_recover,
)
from agents.brain.calibration.gate import calibrated_backend, find_calibrator
from agents.evaluation.episode import OPERATOR_ORACLE, run_episode
from agents.runtime.models import Step, Ticket, TicketStatus
from agents.runtime.services import lifecycle
from devices.models import Device
from devices.sim import SimDevice, find_suite
from devices.sim.loader import bundled_apps, load_app
from devices.sim.suite import load_suite
from tests.agents.learning_data import START, labelled_step

SETTINGS = "com.kairos.settings"
CHANGED_APP = Path(__file__).parent / "fixtures" / "settings_changed.yaml"


def test_the_rule_is_bounded_both_ways():
    # Every confident step after a change wrong: flagged by the 5th label at the latest,
    # the 3rd once the app had 2 or more earlier labels.
    needed = [labels_to_trigger(m) for m in range(0, 3 * WINDOW)]
    assert max(needed) == MIN_LABELS == 5
    assert max(needed[2:]) == 3
    # Back to acting alone after at most 18 right labels in a row, however many were wrong.
    assert {right_labels_to_recover(k) for k in range(3, 2 * WINDOW)} == {18}
    # Two wrong among the last 20 is within what a 95 % target allows.
    assert not drift_state("app", [False, False] + [True] * 18).drifted
    assert drift_state("app", [False, False, False] + [True] * 17).drifted
    assert not drift_state("app", [False] * 4).drifted  # too few labels to judge


class RecordingBackend:
    """The calibrated heuristic, noting the foreground app of each step it proposes."""

    def __init__(self, inner):
        self.inner, self.apps = inner, []
        self.name = inner.name

    def propose(self, ctx):
        self.apps.append(ctx.observation.app)
        return self.inner.propose(ctx)


def confident_labels(suite, tasks, threshold: float = 4.0) -> list[tuple[float, bool]]:
    """(confidence, right) of each confident step on Settings, the oracle judging every
    step as a spot check would; the tasks run in order on the suite's apps."""
    calibrator = find_calibrator("heuristic")
    out = []
    for task in tasks:
        backend = RecordingBackend(calibrated_backend(get_backend("heuristic"), calibrator))
        result = run_episode(SimDevice("drift", apps=suite.bundle), backend, task,
                             threshold=threshold, operator=OPERATOR_ORACLE, max_steps=10)
        for step, app in zip(result.steps, backend.apps):
            if (app == SETTINGS and step.confidence is not None
                    and step.confidence >= threshold and step.needed is not None):
                out.append((step.confidence, not step.needed))
    return out


@pytest.mark.django_db(transaction=True)
def test_an_app_whose_screens_changed_goes_back_to_asking(demo, phones, inline_steps):
    original = find_suite("toggles")
    changed = load_suite(original.path, apps=bundled_apps().with_apps([load_app(CHANGED_APP)]))
    # The same suite, 20 tasks on the app as it was, then 20 on its new version.
    tasks = (original.tasks * 3)[:20]
    before = confident_labels(original, tasks)
    after = confident_labels(changed, [changed.task(t.id) for t in tasks])
    assert len(before) >= WINDOW and all(right for _, right in before)
    assert sum(not right for _, right in after) >= 3

    # Each confident step is spot-checked: its verdict is a resolved spot-check ticket.
    at = START
    for confidence, right in before:
        at += timedelta(minutes=1)
        labelled_step(demo["operator"], right=right, at=at, backend="heuristic", app=SETTINGS,
                      confidence=confidence, threshold=4.0, reason=learning.SPOT_CHECK)
        assert not learning.drift_for_app(SETTINGS).drifted
    wrong_seen = 0
    for confidence, right in after:
        at += timedelta(minutes=1)
        labelled_step(demo["operator"], right=right, at=at, backend="heuristic", app=SETTINGS,
                      confidence=confidence, threshold=4.0, reason=learning.SPOT_CHECK)
        wrong_seen += not right
        if learning.drift_for_app(SETTINGS).drifted:
            break
    # The bound: with a full window of earlier labels, the 3rd wrong confident step after
    # the change flags the app at the latest, whatever right ones come between.
    assert learning.drift_for_app(SETTINGS).drifted and wrong_seen <= 3

    # A step that would act alone on Settings now asks, saying why.
    task = lifecycle.create_task(demo["user"], Device.objects.get(name="sim-1"),
                                 "Turn wifi off.", threshold=4, backend="heuristic",
                                 suite="toggles", suite_task="wifi_off")
    outcomes = inline_steps.drain()
    task.refresh_from_db()
    assert outcomes, (task.status, task.error)
    step = Step.objects.get(task=task, index=0)
    ticket = Ticket.objects.get(task=task, status=TicketStatus.OPEN)
    assert step.app == SETTINGS and step.confidence >= task.threshold
    assert ticket.step == step and ticket.note.startswith("drift: com.kairos.settings")

    # Admins see the app named on /review/metrics/.
    admin = Client()
    admin.force_login(demo["admin"])
    page = admin.get("/review/metrics/")
    assert page.status_code == 200
    notice = page.content.decode().split('id="drift-notice"')[1].split("</section>")[0]
    assert "com.kairos.settings" in notice and "asks a person" in notice

    # New labels that show the app right again bring it back: 18 right in a row at most.
    for _ in range(right_labels_to_recover(WINDOW)):
        at += timedelta(minutes=1)
        labelled_step(demo["operator"], right=True, at=at, backend="heuristic", app=SETTINGS,
                      confidence=4.6, threshold=4.0, reason=learning.SPOT_CHECK)
    assert not learning.drift_for_app(SETTINGS).drifted
    assert b'id="drift-notice"' not in admin.get("/review/metrics/").content


@pytest.mark.django_db
def test_a_drifted_app_leaves_the_other_apps_alone(demo):
    at = START
    for right in [True] * 10 + [False] * 3:
        at += timedelta(minutes=1)
        labelled_step(demo["operator"], right=right, at=at, app="com.example.changed",
                      confidence=4.5, threshold=4.0, reason=learning.SPOT_CHECK)
    for _ in range(10):
        at += timedelta(minutes=1)
        labelled_step(demo["operator"], right=True, at=at, app="com.example.steady",
                      confidence=4.5, threshold=4.0, reason=learning.SPOT_CHECK)
    # Handoffs of steps below γ say nothing about confident steps.
    for _ in range(5):
        at += timedelta(minutes=1)
        labelled_step(demo["operator"], right=False, at=at, app="com.example.steady",
                      confidence=2.0, threshold=4.0)
    assert [d.app for d in learning.drifted_apps()] == ["com.example.changed"]
