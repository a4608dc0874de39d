"""Take-over inputs sent at once are all recorded, in turn, never a 500 (issue 11, item 8)."""
from __future__ import annotations

import json
import threading

import pytest
from django.db import connection
from django.test import Client

from agents.brain.backends.base import Proposal
from agents.runtime.models import Step, Task, TaskStatus, Ticket
from agents.runtime.services import lifecycle, takeover, tickets
from devices.actions import Action
from devices.models import Device
from frontend.models import ApiToken

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def taken_over(demo, scripted, inline_steps, phones) -> Task:
    scripted([lambda ctx: Proposal(Action("PRESS_HOME"), confidence=1.0)])
    task = lifecycle.create_task(demo["user"], Device.objects.get(name="sim-1"), "Open Clock",
                                 threshold=4, backend="scripted")
    inline_steps.drain()
    tickets.resolve_ticket(Ticket.objects.get(task=task), demo["operator"], "takeover")
    assert Task.objects.get(id=task.id).status == TaskStatus.TAKEN_OVER
    return task


def test_three_inputs_at_once_are_all_recorded_in_turn(demo, taken_over, phones):
    if connection.vendor == "sqlite":
        pytest.skip("concurrent writers need PostgreSQL (DATABASE_URL); SQLite serialises them")
    _, token = ApiToken.issue(demo["operator"])
    inputs = [{"type": "SCROLL", "direction": d} for d in ("UP", "DOWN", "LEFT")]
    answers: list[tuple[int, dict]] = []
    performed_before = phones.device("sim-1").frame_number

    def send(rounds: int) -> None:
        client = Client(raise_request_exception=False)  # a 500 is an answer to count
        try:
            for n in range(rounds):
                barrier.wait()
                response = client.post(
                    f"/api/tasks/{taken_over.id}/input",
                    data=json.dumps({"action": inputs[n % 3]}), content_type="application/json",
                    HTTP_AUTHORIZATION=f"Bearer {token}")
                answers.append((response.status_code, response.json()
                                if response.headers.get("Content-Type", "").startswith(
                                    "application/json") else {}))
        finally:
            connection.close()

    barrier = threading.Barrier(3, timeout=60)
    threads = [threading.Thread(target=send, args=(5,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [code for code, _ in answers] == [200] * 15, answers
    steps = list(Step.objects.filter(task=taken_over, decided_by="operator")
                 .order_by("index").values_list("index", "status"))
    assert len(steps) == 15 and {status for _, status in steps} == {"done"}
    assert [i for i, _ in steps] == list(range(steps[0][0], steps[0][0] + 15))  # no gap
    assert sorted(body["step"] if "step" in body else body["index"] for _, body in answers) \
        == [i for i, _ in steps]
    assert phones.device("sim-1").frame_number >= performed_before
    assert Task.objects.get(id=taken_over.id).cursor == steps[-1][0] + 1



def left_by_a_dead_server(task: Task, phones, action: Action, *, acted: bool) -> Step:
    """What ``serve`` killed while the phone acted leaves: the input's step committed and
    executing, the cursor past it; the phone performed it (``acted``) or never got it."""
    index = Step.objects.filter(task=task).count()
    step = Step.objects.create(task=task, index=index, executed_action=action.to_json(),
                               decided_by="operator", status="executing")
    Task.objects.filter(id=task.id).update(cursor=index + 1)
    if acted:
        phones.handle("sim-1", "perform", {"action": action.to_json(),
                                           "origin": {"task": str(task.id), "step": index}})
    return step


def test_the_next_input_records_what_a_dead_servers_input_did(demo, taken_over, phones):
    orphan = left_by_a_dead_server(taken_over, phones, Action("OPENAPP", app="Clock"),
                                   acted=True)

    step = takeover.operator_input(Task.objects.get(id=taken_over.id), demo["operator"],
                                   {"type": "PRESS_HOME"})

    orphan.refresh_from_db()
    assert (orphan.status, orphan.outcome) == ("done", "changed")  # the phone did open Clock
    assert step.index == orphan.index + 1 and step.outcome == "changed"  # and went home
    assert phones.device("sim-1").observe().app == "com.android.launcher3"


def test_a_hand_back_cancels_an_input_the_phone_never_got(demo, taken_over, phones):
    orphan = left_by_a_dead_server(taken_over, phones, Action("OPENAPP", app="Clock"),
                                   acted=False)

    takeover.hand_back(Task.objects.get(id=taken_over.id), demo["operator"])

    orphan.refresh_from_db()
    assert orphan.status == "cancelled" and orphan.outcome.startswith("not run")
    assert Task.objects.get(id=taken_over.id).cursor == orphan.index + 1  # a fresh index


def test_the_sweep_settles_orphaned_inputs_but_not_one_being_sent(demo, taken_over, phones):
    from agents.runtime.recovery import sweep_stalled_tasks

    orphan = left_by_a_dead_server(taken_over, phones, Action("OPENAPP", app="Clock"),
                                   acted=True)
    with takeover.input_lock(taken_over.id):  # as while an input's request runs
        holder = threading.Thread(target=lambda: (sweep_stalled_tasks(), connection.close()))
        holder.start()
        holder.join()
    assert Step.objects.get(id=orphan.id).status == "executing"

    assert sweep_stalled_tasks() == {str(taken_over.id): "settled 1 orphaned input(s)"}
    assert Step.objects.get(id=orphan.id).status == "done"
