"""Whole episodes through the product's loop: embedded default and the full stack."""
from __future__ import annotations

import json
import os
from io import StringIO

import pytest
from django.core.management import call_command

from agents.runtime.models import Task, TaskStatus, TicketStatus
from agents.runtime.services import lifecycle, tickets
from devices.models import Device
from tests.stack import Stack, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def first_toggle_task() -> str:
    from devices.sim import find_suite

    return find_suite("toggles").tasks[0].id


def run_task_json(*args: str) -> dict:
    out = StringIO()
    call_command("run_task", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_a_toggles_task_at_gamma_0_runs_alone_and_succeeds():
    result = run_task_json("--suite", "toggles", "--task", first_toggle_task(),
                           "--threshold", "0", "--operator", "none")
    assert result["interventions"] == 0
    assert result["status"] in ("succeeded", "failed")  # γ=0: the baseline alone, no person
    assert all(action["by"] == "agent" for action in result["actions"])


def toggles_at_gamma_5() -> list[dict]:
    from devices.sim import find_suite

    return [run_task_json("--suite", "toggles", "--task", task.id, "--threshold", "5",
                          "--operator", "oracle") for task in find_suite("toggles").tasks]


def test_at_gamma_5_tickets_are_raised_and_the_oracle_operator_finishes_every_task():
    results = toggles_at_gamma_5()
    assert all(r["status"] == "succeeded" and r["success"] is True for r in results), \
        [r["task"] for r in results if not r["success"]]
    assert sum(r["interventions"] for r in results) >= 1
    assert all(r["actions"][-1]["type"] == "COMPLETE" for r in results)


def test_without_an_operator_a_low_confidence_task_waits_for_one():
    needy = next(r["task"] for r in toggles_at_gamma_5() if r["interventions"])
    result = run_task_json("--suite", "toggles", "--task", needy,
                           "--threshold", "5", "--operator", "none")
    assert result["status"] == "waiting_operator" and result["success"] is None


@pytest.fixture
def full_stack(demo, tmp_path):
    """A real Celery worker process and a device-host process on PostgreSQL + Redis."""
    from celery import Celery

    from devices.host import RedisDeviceClient, set_device_client

    redis_url = os.environ["KAIROS_TEST_REDIS_URL"]
    Device.objects.create(name="fs-sim", width=1080, height=2400)
    stack = Stack(devices=["fs-sim"], journal=tmp_path / "journal", tag="full-stack")
    stack.start_all()
    client = RedisDeviceClient(redis_url, timeout=20)
    set_device_client(client)
    producer = Celery(broker=redis_url, set_as_current=False)  # see test_faults_stack
    lifecycle.set_step_scheduler(
        lambda task_id, index: producer.send_task("agents.run_step", args=(task_id, index)))
    try:
        wait_for(lambda: _answers(client), timeout=90, what="the device host to answer")
        yield Device.objects.get(name="fs-sim")
    finally:
        lifecycle.set_step_scheduler(None)
        set_device_client(None)
        stack.stop_all()


def _answers(client) -> bool:
    from devices.host import DeviceError

    try:
        return client.info("fs-sim").width == 1080
    except DeviceError:
        return False


def _settled(task_id):
    task = Task.objects.get(id=task_id)
    waiting = (TaskStatus.WAITING_OPERATOR, TaskStatus.WAITING_USER)
    return task if task.status in waiting or task.is_finished else None


@pytest.mark.services
def test_full_stack_gamma_0_runs_alone_and_gamma_5_is_finished_by_the_oracle(demo, full_stack):
    from devices.sim import find_suite

    task_id = next(r["task"] for r in toggles_at_gamma_5() if r["interventions"])
    instruction = find_suite("toggles").task(task_id).instruction
    alone = lifecycle.create_task(demo["operator"], full_stack, instruction, threshold=0,
                                  suite="toggles", suite_task=task_id)
    alone = wait_for(lambda: _settled(alone.id), timeout=90, what="the γ=0 task to finish")
    assert alone.is_finished and alone.interventions == 0

    task = lifecycle.create_task(demo["operator"], full_stack, instruction, threshold=5,
                                 suite="toggles", suite_task=task_id)
    oracle_user = demo["admin"]
    for _ in range(40):
        task = wait_for(lambda: _settled(task.id), timeout=90,
                        what="the γ=5 task to need a person")
        if task.is_finished:
            break
        ticket = task.tickets.filter(status=TicketStatus.OPEN).select_related(
            "step", "task__device").first()
        tickets.resolve_with_oracle(ticket, oracle_user)
    assert task.status == TaskStatus.SUCCEEDED and task.success is True
    assert task.interventions >= 1
    assert task.steps.filter(decided_by="agent").exists()
