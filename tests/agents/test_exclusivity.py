"""One task drives a phone at a time; the others queue, visibly, and start in turn (11.3)."""
from __future__ import annotations

import json
import threading

import pytest
from django.contrib.auth.models import User
from django.db import connection

from agents.brain.backends.base import Proposal
from agents.runtime.models import Task, TaskStatus, Ticket
from agents.runtime.services import lifecycle
from devices.actions import Action
from devices.models import Device
from frontend.models import ApiToken

pytestmark = pytest.mark.django_db(transaction=True)


def unsure(ctx) -> Proposal:
    """A proposal below any γ ≥ 2: the task stops at a ticket and keeps the phone."""
    return Proposal(Action("PRESS_HOME"), confidence=1.0)


def sure_complete(ctx) -> Proposal:
    return Proposal(Action("COMPLETE"), confidence=5.0)


@pytest.fixture
def other_user(demo):
    from django.contrib.auth.models import Group

    user = User.objects.create_user("second-user", password="pw-for-tests-2")
    user.groups.add(Group.objects.get(name="end_users"))
    return user


def bearer(client, user):
    _, token = ApiToken.issue(user)

    def call(method: str, path: str, body=None):
        response = getattr(client, method)(
            path, data=json.dumps(body) if body is not None else None,
            content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
        return response.status_code, response.json()
    return call


def test_a_task_for_a_busy_phone_is_queued_with_its_position(
        client, demo, other_user, scripted, inline_steps, phones):
    scripted([unsure])
    first = lifecycle.create_task(demo["user"], Device.objects.get(name="sim-1"), "Open the app",
                                  threshold=4, backend="scripted")
    inline_steps.drain()
    first.refresh_from_db()
    assert first.status == TaskStatus.WAITING_OPERATOR  # it waits, and keeps the phone
    frame = phones.device("sim-1").frame_number

    status, second = bearer(client, other_user)(
        "post", "/api/tasks", {"instruction": "Turn on Wi-Fi", "device": "sim-1"})
    status3, third = bearer(client, demo["user"])(
        "post", "/api/tasks", {"instruction": "Turn on Bluetooth", "device": "sim-1"})

    assert (status, status3) == (201, 201)
    assert (second["status"], second["queue_position"]) == ("queued", 1)
    assert (third["status"], third["queue_position"]) == ("queued", 2)
    assert not inline_steps.pending  # nothing runs on the busy phone
    assert phones.device("sim-1").frame_number == frame
    _, devices = bearer(client, other_user)("get", "/api/devices")
    assert {d["name"]: d["status"] for d in devices} == {"sim-1": "busy", "sim-2": "online"}
    assert Device.objects.get(name="sim-1").current_task == first


@pytest.mark.parametrize("freed_by", ["abort", "finish"])
def test_the_next_queued_task_starts_when_the_phone_frees(demo, other_user, scripted,
                                                          inline_steps, freed_by):
    phone = Device.objects.get(name="sim-1")
    scripted([sure_complete if freed_by == "finish" else unsure, unsure])
    first = lifecycle.create_task(demo["user"], phone, "Open the app", threshold=4,
                                  backend="scripted")
    if freed_by != "finish":
        inline_steps.drain()
    second = lifecycle.create_task(other_user, phone, "Turn on Wi-Fi", threshold=4,
                                   backend="scripted")
    third = lifecycle.create_task(other_user, phone, "Turn on Bluetooth", threshold=4,
                                  backend="scripted")
    assert Task.objects.get(id=second.id).status == TaskStatus.QUEUED

    if freed_by == "abort":
        lifecycle.abort_task(first, demo["user"])
    else:
        inline_steps.drain(limit=1)  # COMPLETE
    first.refresh_from_db()
    assert first.is_finished

    second.refresh_from_db()
    assert second.status == TaskStatus.RUNNING  # first come, first served
    assert Task.objects.get(id=third.id).queue_position == 1
    assert phone.current_task == second
    inline_steps.drain()
    assert Task.objects.get(id=second.id).status == TaskStatus.WAITING_OPERATOR
    assert Task.objects.get(id=third.id).status == TaskStatus.QUEUED


def test_aborting_a_queued_task_moves_those_behind_it_up(demo, other_user, scripted,
                                                         inline_steps):
    phone = Device.objects.get(name="sim-1")
    scripted([unsure])
    first = lifecycle.create_task(demo["user"], phone, "Open the app", threshold=4,
                                  backend="scripted")
    inline_steps.drain()
    second = lifecycle.create_task(other_user, phone, "Turn on Wi-Fi", backend="scripted")
    third = lifecycle.create_task(other_user, phone, "Turn on Bluetooth", backend="scripted")

    lifecycle.abort_task(second, other_user)

    assert Task.objects.get(id=third.id).queue_position == 1
    assert Task.objects.get(id=first.id).status == TaskStatus.WAITING_OPERATOR
    assert Task.objects.get(id=third.id).status == TaskStatus.QUEUED


def test_tasks_created_at_once_for_a_free_phone_start_one_at_a_time(demo, other_user,
                                                                    inline_steps):
    if connection.vendor == "sqlite":
        pytest.skip("concurrent writers need PostgreSQL (DATABASE_URL); SQLite serialises them")
    phone = Device.objects.get(name="sim-1")
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def create(n: int) -> None:
        barrier.wait()
        try:
            lifecycle.create_task(other_user if n % 2 else demo["user"], phone, f"Task {n}",
                                  start=True, backend="heuristic")
        except BaseException as exc:  # a deadlock or an integrity error fails the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=create, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    statuses = sorted(Task.objects.values_list("status", flat=True))
    assert statuses == ["queued", "queued", "queued", "running"]
    assert len(inline_steps.pending) == 1
    assert sorted(t.queue_position for t in Task.objects.filter(status="queued")) == [1, 2, 3]


def test_the_task_page_says_queued_and_its_position(client, demo, other_user, scripted,
                                                    inline_steps):
    phone = Device.objects.get(name="sim-1")
    scripted([unsure])
    lifecycle.create_task(demo["user"], phone, "Open the app", threshold=4, backend="scripted")
    inline_steps.drain()
    queued = lifecycle.create_task(other_user, phone, "Turn on Wi-Fi", backend="scripted")

    client.force_login(other_user)
    page = client.get(f"/tasks/{queued.id}/").content.decode()
    assert "Queued, position 1" in page
    assert not Ticket.objects.filter(task=queued).exists()


def test_a_queued_task_whose_phone_cannot_be_prepared_keeps_its_place(demo, other_user,
                                                                      inline_steps, phones):
    from agents.runtime.recovery import sweep_stalled_tasks
    from devices.host import LocalDeviceClient, build_sim_host, set_device_client
    from devices.sim import find_suite

    suite_task = find_suite("toggles").tasks[0]
    set_device_client(LocalDeviceClient(build_sim_host(["another-phone"])))  # sim-1's host is down
    try:
        task = lifecycle.create_task(other_user, Device.objects.get(name="sim-1"),
                                     suite_task.instruction, suite="toggles",
                                     suite_task=suite_task.id)
        assert (task.status, task.queue_position) == (TaskStatus.QUEUED, 1)
    finally:
        set_device_client(LocalDeviceClient(phones))

    assert sweep_stalled_tasks() == {str(task.id): "started"}  # the host is back
    assert Task.objects.get(id=task.id).status == TaskStatus.RUNNING
    assert len(inline_steps.pending) == 1
