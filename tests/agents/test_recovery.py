"""A step whose worker died is found and moved on, never run twice (issue 11, items 6, 7).

These drive the services on the in-process device host; tests/agents/test_faults_stack.py
kills real processes on the full stack.
"""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents.brain.backends.base import Proposal
from agents.runtime.models import Message, Step, StepStatus, Task, TaskStatus, Ticket, TicketStatus
from agents.runtime.recovery import sweep_stalled_tasks
from agents.runtime.services import lifecycle, steps, tickets
from devices.actions import Action
from devices.models import Device

pytestmark = pytest.mark.django_db(transaction=True)


def tap_settings(confidence: float):
    def propose(ctx) -> Proposal:
        node = next(n for n in ctx.observation.nodes if n.label == "Settings")
        return Proposal(Action("CLICK", x=node.center[0], y=node.center[1]),
                        confidence=confidence)
    return propose


def make_task(user, threshold: float = 0) -> Task:
    return lifecycle.create_task(user, Device.objects.get(name="sim-1"), "Open the settings",
                                 threshold=threshold, backend="scripted")


def a_worker_dies_mid_action(task: Task, phones, *, phone_acted: bool) -> Step:
    """What a worker killed with -9 leaves: the step claimed as executing; the phone got
    the request (or not); the task's progress mark is old."""
    step = Step.objects.get(task=task, index=0)
    assert Step.objects.filter(id=step.id, status=StepStatus.READY).update(
        status=StepStatus.EXECUTING)
    if phone_acted:
        phones.handle("sim-1", "perform", {"action": step.executed_action,
                                           "origin": {"task": str(task.id), "step": 0}})
    Task.objects.filter(id=task.id).update(progressed_at=timezone.now() - timedelta(minutes=5))
    return step


def ready_first_step(demo, scripted, inline_steps) -> Task:
    scripted([tap_settings(5.0), Proposal(Action("COMPLETE"), confidence=5.0)])
    task = make_task(demo["user"])
    task_id, index = inline_steps.pending.popleft()
    # The proposal is made and stored; the worker dies before executing it.
    step = steps._propose_step(Task.objects.get(id=task_id), index)
    assert step.status == StepStatus.READY
    return task


def test_a_step_the_phone_performed_before_the_worker_died_is_recorded_not_repeated(
        demo, scripted, inline_steps, phones):
    task = ready_first_step(demo, scripted, inline_steps)
    a_worker_dies_mid_action(task, phones, phone_acted=True)
    frame = phones.device("sim-1").frame_number

    assert list(sweep_stalled_tasks().values()) == ["settled executing step 0: executed"]

    step = Step.objects.get(task=task, index=0)
    assert (step.status, step.outcome) == (StepStatus.DONE, "changed")
    assert phones.device("sim-1").frame_number == frame  # the tap did not run again
    assert inline_steps.drain() == ["finished"]
    assert Task.objects.get(id=task.id).status == TaskStatus.SUCCEEDED


def test_a_step_the_phone_never_got_is_cancelled_and_the_agent_looks_again(
        demo, scripted, inline_steps, phones):
    task = ready_first_step(demo, scripted, inline_steps)
    a_worker_dies_mid_action(task, phones, phone_acted=False)
    scripted([tap_settings(5.0), Proposal(Action("COMPLETE"), confidence=5.0)])

    sweep_stalled_tasks()

    step = Step.objects.get(task=task, index=0)
    assert step.status == StepStatus.CANCELLED and "not run" in step.outcome
    assert inline_steps.drain() == ["executed", "finished"]  # step 1 taps, step 2 completes
    assert phones.device("sim-1").observe().app == "com.kairos.settings"


def test_a_step_message_lost_with_its_worker_is_scheduled_again(demo, scripted,
                                                                  inline_steps, phones):
    scripted([tap_settings(5.0), Proposal(Action("COMPLETE"), confidence=5.0)])
    task = make_task(demo["user"])
    inline_steps.pending.clear()  # the broker lost the message with the worker
    Task.objects.filter(id=task.id).update(progressed_at=timezone.now() - timedelta(minutes=5))

    assert list(sweep_stalled_tasks().values()) == ["rescheduled step 0"]
    assert inline_steps.drain() == ["executed", "finished"]
    assert Task.objects.get(id=task.id).status == TaskStatus.SUCCEEDED


class WorkerKilled(BaseException):
    """Stands for a kill -9 at one exact line: nothing after it runs, and the database
    rolls back the transaction the process had open, as it does for a dead connection."""


def a_worker_is_killed_while_the_agent_finishes(task: Task, inline_steps, monkeypatch) -> None:
    """Step 0 taps, step 1 is COMPLETE; the worker dies as the task is being ended (after
    the phone was asked whether it shows what was asked, which takes a while)."""
    def killed(*args, **kwargs):
        raise WorkerKilled

    with monkeypatch.context() as patch:
        patch.setattr(steps, "finish_task", killed)  # where execute_step looks it up
        with pytest.raises(WorkerKilled):
            inline_steps.drain()
    Task.objects.filter(id=task.id).update(progressed_at=timezone.now() - timedelta(minutes=5))


def test_a_worker_killed_while_ending_a_task_leaves_it_for_the_sweep_to_finish(
        demo, scripted, inline_steps, monkeypatch):
    """The chaos test under load, 2026-11-28: a task stayed "running" for good. Its COMPLETE
    step was recorded done, then the worker was killed before the task ended; the sweep
    left a done step alone, and a redelivered message found the step done and stopped."""
    scripted([tap_settings(5.0), Proposal(Action("COMPLETE"), confidence=5.0),
              Proposal(Action("COMPLETE"), confidence=5.0)])
    task = make_task(demo["user"])
    a_worker_is_killed_while_the_agent_finishes(task, inline_steps, monkeypatch)
    assert Task.objects.get(id=task.id).status == TaskStatus.RUNNING

    sweep_stalled_tasks()
    inline_steps.drain()

    task.refresh_from_db()
    assert task.status == TaskStatus.SUCCEEDED, task.status
    assert Step.objects.filter(task=task, status=StepStatus.DONE,
                               executed_action__type="COMPLETE").count() == 1


@pytest.mark.parametrize("left", [StepStatus.DONE, StepStatus.CANCELLED])
def test_a_running_task_whose_step_at_the_cursor_is_settled_moves_on(
        demo, scripted, inline_steps, monkeypatch, left):
    """What the code before 2026-11-28 left behind (a COMPLETE step done, its task still
    running), and any step settled without its follow-up: the sweep ends the task or
    moves the cursor on, instead of leaving it alone for ever."""
    scripted([tap_settings(5.0), Proposal(Action("COMPLETE"), confidence=5.0),
              Proposal(Action("COMPLETE"), confidence=5.0)])
    task = make_task(demo["user"])
    a_worker_is_killed_while_the_agent_finishes(task, inline_steps, monkeypatch)
    Step.objects.filter(task=task, index=1).update(status=left)

    outcome = sweep_stalled_tasks()[str(task.id)]
    inline_steps.drain()

    assert outcome.startswith(f"followed up {left} step 1: "), outcome
    assert Task.objects.get(id=task.id).status == TaskStatus.SUCCEEDED


def test_a_task_that_is_moving_is_left_alone(demo, scripted, inline_steps):
    scripted([tap_settings(5.0)])
    make_task(demo["user"])  # progressed just now
    assert sweep_stalled_tasks() == {}
    assert len(inline_steps.pending) == 1


def test_sweeps_of_several_workers_at_once_recover_a_task_once(demo, scripted, inline_steps):
    if connection.vendor == "sqlite":
        pytest.skip("concurrent writers need PostgreSQL (DATABASE_URL); SQLite serialises them")
    scripted([tap_settings(5.0)])
    task = make_task(demo["user"])
    inline_steps.pending.clear()
    Task.objects.filter(id=task.id).update(progressed_at=timezone.now() - timedelta(minutes=5))
    barrier = threading.Barrier(3)
    results: list[dict] = []

    def sweep() -> None:
        barrier.wait()
        try:
            results.append(sweep_stalled_tasks())
        finally:
            connection.close()

    threads = [threading.Thread(target=sweep) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    outcomes = sorted(r.get(str(task.id), "") for r in results)
    assert outcomes.count("rescheduled step 0") == 1, outcomes
    assert len(inline_steps.pending) == 1  # scheduled once


def test_an_approval_for_a_screen_that_changed_is_not_run(demo, scripted, inline_steps,
                                                           phones):
    scripted([tap_settings(2.0)])  # unsure: a ticket on the launcher
    task = make_task(demo["user"], threshold=4)
    inline_steps.drain()
    ticket = Ticket.objects.get(task=task)
    phones.device("sim-1").perform(Action("OPENAPP", app="Clock"))  # the phone moves on
    scripted([Proposal(Action("PRESS_HOME"), confidence=1.0)])

    tickets.resolve_ticket(ticket, demo["operator"], "approve")
    inline_steps.drain()

    step = Step.objects.get(task=task, index=0)
    assert step.status == StepStatus.CANCELLED and "screen changed" in step.outcome
    assert phones.device("sim-1").observe().app != "com.kairos.settings"  # no blind tap
    assert Message.objects.filter(task=task, text__contains="screen changed").exists()
    fresh = Ticket.objects.get(task=task, status=TicketStatus.OPEN)
    assert fresh.step.index == 1  # the operator now sees the new screen


def test_an_approval_on_an_unchanged_screen_runs(demo, scripted, inline_steps, phones):
    scripted([tap_settings(2.0), Proposal(Action("COMPLETE"), confidence=5.0)])
    task = make_task(demo["user"], threshold=4)
    inline_steps.drain()
    tickets.resolve_ticket(Ticket.objects.get(task=task), demo["operator"], "approve")
    inline_steps.drain()
    assert phones.device("sim-1").observe().app == "com.kairos.settings"
    assert Task.objects.get(id=task.id).status == TaskStatus.SUCCEEDED


def test_a_device_error_ticket_tells_the_user_and_approving_it_does_not_repeat_the_action(
        demo, scripted, inline_steps, phones):
    from devices.host import DeviceError, get_device_client

    scripted([tap_settings(5.0), Proposal(Action("COMPLETE"), confidence=5.0)])
    task = make_task(demo["user"])
    client = get_device_client()
    real_perform = client.perform

    def acts_but_the_reply_is_lost(name, action, origin=None):
        real_perform(name, action, origin=origin)  # the phone acts…
        raise DeviceError("device 'sim-1' did not answer 'perform' within 10 s")  # …too late

    client.perform = acts_but_the_reply_is_lost
    try:
        inline_steps.drain()
    finally:
        client.perform = real_perform
    ticket = Ticket.objects.get(task=task)
    assert ticket.reason == "device_error"
    assert Message.objects.filter(task=task, sender="system",
                                  text__contains="stopped answering").exists()
    frame = phones.device("sim-1").frame_number

    tickets.resolve_ticket(ticket, demo["operator"], "approve")
    inline_steps.drain()

    assert phones.device("sim-1").frame_number == frame  # not tapped a second time
    step = Step.objects.get(task=task, index=0)
    assert (step.status, step.outcome) == (StepStatus.DONE, "changed")
    assert Task.objects.get(id=task.id).status == TaskStatus.SUCCEEDED


def test_the_embedded_worker_resumes_at_start_a_task_its_lost_broker_held(demo, scripted,
                                                                          phones, settings):
    """``serve`` restarted: the in-memory broker's messages died with it; the worker thread's
    first sweep finds the running task and schedules its step again."""
    from kairos_web.celery import start_worker_thread

    scripted([tap_settings(5.0), Proposal(Action("COMPLETE"), confidence=5.0)])
    task = lifecycle.create_task(demo["user"], Device.objects.get(name="sim-1"),
                                 "Open the settings", threshold=0, backend="scripted",
                                 start=False)
    Task.objects.filter(id=task.id).update(
        status=TaskStatus.RUNNING, started_at=timezone.now() - timedelta(minutes=5),
        progressed_at=timezone.now() - timedelta(minutes=5))

    from tests.stack import wait_for

    # The worker thread keeps no connection open after its task, so the test database
    # can be dropped at the end of the run.
    max_age = connection.settings_dict["CONN_MAX_AGE"]
    connection.settings_dict["CONN_MAX_AGE"] = 0
    worker = start_worker_thread()
    try:
        wait_for(lambda: Task.objects.get(id=task.id).is_finished, timeout=60,
                 what="the embedded worker to resume the task")
    finally:
        worker.stop(in_sighandler=False)
        connection.settings_dict["CONN_MAX_AGE"] = max_age
    assert Task.objects.get(id=task.id).status == TaskStatus.SUCCEEDED


def test_a_step_whose_phone_cannot_be_asked_waits_for_a_person(demo, scripted, inline_steps,
                                                               phones):
    from devices.host import LocalDeviceClient, build_sim_host, set_device_client

    task = ready_first_step(demo, scripted, inline_steps)
    a_worker_dies_mid_action(task, phones, phone_acted=False)
    set_device_client(LocalDeviceClient(build_sim_host(["another-phone"])))  # sim-1 is gone
    try:
        assert list(sweep_stalled_tasks().values()) == ["settled executing step 0: waiting"]
    finally:
        set_device_client(LocalDeviceClient(phones))

    ticket = Ticket.objects.get(task=task)
    assert ticket.reason == "device_error" and ticket.status == TicketStatus.OPEN
    assert Step.objects.get(task=task, index=0).status == StepStatus.WAITING
    assert Task.objects.get(id=task.id).status == TaskStatus.WAITING_OPERATOR
    assert Message.objects.filter(task=task, text__contains="stopped answering").exists()
