"""Whole episodes through the product's loop: embedded default and the full stack."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import pytest
from django.core.management import call_command
from django.db import connection

from agents import services
from agents.models import Task, TaskStatus, TicketStatus
from devices.models import Device

ROOT = Path(__file__).resolve().parents[2]
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


def wait_for(predicate, timeout: float = 90.0, what: str = "condition"):
    """Poll the database for a state another process produces (no event crosses to us)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def full_stack(demo):
    """A real Celery worker process and a device-host process on PostgreSQL + Redis."""
    from celery import Celery

    from devices.host import RedisDeviceClient, set_device_client

    redis_url = os.environ["KAIROS_TEST_REDIS_URL"]
    db = urlparse(os.environ["DATABASE_URL"])
    test_db_url = urlunparse(db._replace(path="/" + connection.settings_dict["NAME"]))
    env = dict(os.environ, DATABASE_URL=test_db_url, REDIS_URL=redis_url, DEBUG="1",
               KAIROS_SIM_DEVICES="fs-sim", PYTHONUNBUFFERED="1",
               DJANGO_SETTINGS_MODULE="kairos_web.settings")
    env.pop("KAIROS_TEST_REDIS_URL", None)
    Device.objects.create(name="fs-sim", width=1080, height=2400)
    logs = ROOT / "var" / "test-artifacts"
    logs.mkdir(parents=True, exist_ok=True)
    processes = []
    for name, cmd in (
        ("device_host", [sys.executable, "manage.py", "device_host", "--devices", "fs-sim"]),
        ("worker", [sys.executable, "-m", "celery", "-A", "kairos_web", "worker",
                    "--pool=threads", "--concurrency=2", "--loglevel=WARNING",
                    "--without-gossip", "--without-mingle", "--without-heartbeat"]),
    ):
        log = open(logs / f"full-stack-{name}.log", "w")
        processes.append((subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log,
                                           stderr=subprocess.STDOUT), log))
    client = RedisDeviceClient(redis_url, timeout=20)
    set_device_client(client)
    producer = Celery(broker=redis_url)
    services.set_step_scheduler(
        lambda task_id, index: producer.send_task("agents.run_step", args=(task_id, index)))
    try:
        wait_for(lambda: _answers(client), what="the device host to answer")
        yield Device.objects.get(name="fs-sim")
    finally:
        services.set_step_scheduler(None)
        set_device_client(None)
        for process, log in processes:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
            log.close()


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
    alone = services.create_task(demo["operator"], full_stack, instruction, threshold=0,
                                 suite="toggles", suite_task=task_id)
    alone = wait_for(lambda: _settled(alone.id), what="the γ=0 task to finish")
    assert alone.is_finished and alone.interventions == 0

    task = services.create_task(demo["operator"], full_stack, instruction, threshold=5,
                                suite="toggles", suite_task=task_id)
    oracle_user = demo["admin"]
    for _ in range(40):
        task = wait_for(lambda: _settled(task.id), what="the γ=5 task to need a person")
        if task.is_finished:
            break
        ticket = task.tickets.filter(status=TicketStatus.OPEN).select_related(
            "step", "task__device").first()
        services.resolve_with_oracle(ticket, oracle_user)
    assert task.status == TaskStatus.SUCCEEDED and task.success is True
    assert task.interventions >= 1
    assert task.steps.filter(decided_by="agent").exists()
