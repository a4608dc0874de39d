"""Spot checks (issue 24, item 2): a random share of the steps that would act alone is
asked anyway, as an intervention with reason ``spot_check``."""
from __future__ import annotations

import random

import pytest

from agents.brain.backends.base import Proposal
from agents.runtime.models import StepStatus, Task, Ticket, TicketStatus
from agents.brain.spot_checks import SPOT_CHECK_NOTE, rate_interval, spot_check
from agents.runtime.services import lifecycle, tickets
from devices.actions import Action
from devices.models import Device
from tests.frontend.review_data import Committed


def test_the_share_of_draws_is_within_its_95_percent_interval_of_the_default():
    rng = random.Random(2024)  # injected: the service layer uses secrets.SystemRandom
    n = 2000
    asked = sum(spot_check(0.05, rng) for _ in range(n))
    low, high = rate_interval(0.05, n)
    assert low <= asked / n <= high, (asked, low, high)
    assert 0 < asked < n


def test_a_share_of_0_never_asks_and_1_always_does():
    rng = random.Random(7)
    assert not any(spot_check(0.0, rng) for _ in range(500))
    assert all(spot_check(1.0, rng) for _ in range(500))


def test_the_default_share_is_5_percent():
    """The product's settings, read by a fresh interpreter without KAIROS_SPOT_CHECK (the
    test settings turn spot checks off for every other test)."""
    import os
    import subprocess
    import sys

    from django.conf import settings

    env = {k: v for k, v in os.environ.items() if k != "KAIROS_SPOT_CHECK"}
    out = subprocess.run([sys.executable, "-c", "import kairos_web.settings as s; "
                          "print(s.KAIROS_SPOT_CHECK)"], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "0.05"
    assert settings.KAIROS_SPOT_CHECK == 0


def _run(task: Task, do, operator) -> Task:
    """Drive ``task`` to its end, the oracle deciding every ticket."""
    for _ in range(60):
        do.drain()
        task.refresh_from_db()
        if task.is_finished:
            return task
        ticket = task.tickets.filter(status__in=(TicketStatus.OPEN, TicketStatus.CLAIMED)
                                     ).select_related("step", "task__device").first()
        assert ticket is not None, task.status
        do(tickets.resolve_with_oracle, ticket, operator)
    raise AssertionError("the task did not finish")


@pytest.mark.django_db
def test_with_half_the_steps_checked_a_run_of_toggle_tasks_asks_some_not_all(
        demo, inline_steps, phones, settings):
    settings.KAIROS_SPOT_CHECK = 0.5
    device = Device.objects.get(name="sim-1")
    do = Committed(inline_steps)
    from devices.sim import find_suite

    suite = find_suite("toggles")
    tasks = []
    for suite_task in suite.tasks[:6]:
        task = do(lifecycle.create_task, demo["operator"], device, suite_task.instruction,
                  threshold=0, backend="heuristic", suite="toggles", suite_task=suite_task.id)
        tasks.append(_run(task, do, demo["admin"]))
    tickets = Ticket.objects.filter(task__in=tasks)
    checks = tickets.filter(reason="spot_check")
    # With caution 0 nothing else asks: every ticket is a spot check.
    assert set(tickets.values_list("reason", flat=True)) == {"spot_check"}
    # A step is asked (a spot check) or acts alone: some of each.
    alone = sum(t.steps.filter(status=StepStatus.DONE, tickets__isnull=True).count()
                for t in tasks)
    assert checks.count() > 0 and alone > 0, (checks.count(), alone)
    first = checks.first()
    assert first.kind == "intervention" and first.note == SPOT_CHECK_NOTE
    assert "a random check of a step the agent was sure of" in first.note
    # The operator's decision is the label.
    assert checks.filter(agent_right__isnull=False).count() == checks.exclude(
        decision__in=("", "abort")).count() > 0


@pytest.mark.django_db
def test_a_step_asked_for_another_reason_is_never_a_spot_check(demo, scripted, inline_steps,
                                                                 phones, settings):
    settings.KAIROS_SPOT_CHECK = 1.0
    do = Committed(inline_steps)

    def home(ctx):
        return Proposal(Action("PRESS_HOME"), confidence=2.0, thought="home")

    scripted([home])
    task = do(lifecycle.create_task, demo["user"], Device.objects.get(name="sim-1"),
              "Go home", threshold=4, backend="scripted")
    do.drain()
    [ticket] = Ticket.objects.filter(task=task)
    assert ticket.reason == "low_confidence"


@pytest.mark.django_db
def test_a_phones_own_share_replaces_the_installations(demo, scripted, inline_steps, phones,
                                                       settings):
    settings.KAIROS_SPOT_CHECK = 0.0
    device = Device.objects.get(name="sim-1")
    Device.objects.filter(id=device.id).update(spot_check=1.0)
    device.refresh_from_db()
    do = Committed(inline_steps)

    def home(ctx):
        return Proposal(Action("PRESS_HOME"), confidence=5.0, thought="home")

    scripted([home])
    task = do(lifecycle.create_task, demo["user"], device, "Go home", threshold=4,
              backend="scripted")
    do.drain()
    [ticket] = Ticket.objects.filter(task=task)
    assert ticket.reason == "spot_check" and ticket.step.status == StepStatus.WAITING
    task.refresh_from_db()
    assert task.status == "waiting_operator"
    # Approving it runs the step as the agent proposed, and labels it right.
    scripted([lambda ctx: Proposal(Action("COMPLETE"), confidence=5.0)])
    Device.objects.filter(id=device.id).update(spot_check=0.0)
    do(tickets.resolve_ticket, ticket, demo["operator"], "approve")
    do.drain()
    task.refresh_from_db()
    ticket.refresh_from_db()
    assert task.status == "succeeded" and ticket.agent_right is True


@pytest.mark.django_db
def test_admins_set_a_phones_share_on_the_calibration_page(client, demo):
    client.force_login(demo["admin"])
    response = client.post("/review/calibration/", {"scope": "spot_check", "device": "sim-2",
                                                   "share": "0.2"})
    assert response.status_code == 302
    assert Device.objects.get(name="sim-2").spot_check == 0.2
    page = client.get("/review/calibration/").content.decode()
    assert 'aria-label="spot-check share for sim-2"' in page and 'value="0.2"' in page
    from access.audit import AuditEntry
    assert AuditEntry.objects.filter(action="spot_check.device").exists()
    bad = client.post("/review/calibration/", {"scope": "spot_check", "device": "sim-2",
                                              "share": "1.5"})
    assert bad.status_code == 400 and "between 0 and 1" in bad.content.decode()
    assert Device.objects.get(name="sim-2").spot_check == 0.2
    client.post("/review/calibration/", {"scope": "spot_check", "device": "sim-2",
                                         "share": ""})
    assert Device.objects.get(name="sim-2").spot_check is None


def test_evaluate_asks_no_spot_checks_even_when_the_installation_does(settings):
    """``evaluate`` runs the pure episode loop (agents/evaluation/episode.py), which has no spot
    checks: its interventions are the gate's alone, whatever KAIROS_SPOT_CHECK says."""
    from agents.evaluation.suites import evaluate_suite

    settings.KAIROS_SPOT_CHECK = 1.0
    result = evaluate_suite("toggles", "heuristic", [0], tasks=["wifi_on", "wifi_off"])
    [row] = result["results"]
    assert row["tasks"] == 2 and row["interventions_per_task"] == 0.0
