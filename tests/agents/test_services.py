"""The step state machine, tickets and their resolution, on the in-process device host."""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from access.errors import Conflict, Forbidden, ServiceError
from agents.brain.backends.base import Proposal
from agents.runtime.models import DecidedBy, Step, StepStatus, Task, TaskStatus, Ticket, TicketStatus
from agents.runtime.services import chat, lifecycle, steps, tickets
from devices.actions import Action
from devices.models import Device


def settings_icon(ctx) -> Proposal:
    """Tap the launcher's Settings icon, with the confidence the test chooses later."""
    node = next(n for n in ctx.observation.nodes if n.label == "Settings")
    x, y = node.center
    return Proposal(Action("CLICK", x=x, y=y), confidence=2.0, thought="open Settings")


def make_task(user, *, threshold=4.0, backend="scripted", **kwargs) -> Task:
    device = Device.objects.get(name="sim-1")
    return lifecycle.create_task(user, device, "Open the settings", threshold=threshold,
                                 backend=backend, **kwargs)


@pytest.mark.django_db(transaction=True)
def test_low_confidence_step_opens_a_ticket_and_leaves_the_phone_alone(
        demo, scripted, inline_steps, phones):
    scripted([settings_icon])
    frame_before = phones.device("sim-1").frame_number
    task = make_task(demo["user"])
    assert inline_steps.drain() == ["waiting"]

    task.refresh_from_db()
    ticket = Ticket.objects.get(task=task)
    assert task.status == TaskStatus.WAITING_OPERATOR
    assert (ticket.kind, ticket.reason, ticket.status) == ("intervention", "low_confidence", "open")
    assert ticket.step.confidence == 2.0 and ticket.step.status == StepStatus.WAITING
    assert phones.device("sim-1").frame_number == frame_before  # nothing was executed
    assert not inline_steps.pending  # no worker waits on the person


@pytest.mark.django_db(transaction=True)
def test_approve_runs_the_proposed_action_and_the_loop_goes_on(demo, scripted, inline_steps,
                                                               phones):
    scripted([settings_icon, Proposal(Action("COMPLETE"), confidence=5.0)])
    task = make_task(demo["user"])
    inline_steps.drain()
    ticket = Ticket.objects.get(task=task)

    tickets.resolve_ticket(ticket, demo["operator"], "approve")
    inline_steps.drain()

    task.refresh_from_db()
    assert phones.device("sim-1").observe().app == "com.kairos.settings"
    assert task.status == TaskStatus.SUCCEEDED
    first = task.steps.get(index=0)
    assert first.executed_action == first.proposed_action
    assert first.decided_by == DecidedBy.AGENT
    record = ticket.training
    assert record.decision == "approve" and record.score_label == 5
    assert record.agent_action == first.proposed_action and record.instruction == task.instruction


@pytest.mark.django_db(transaction=True)
def test_edit_executes_the_operators_action_and_labels_the_agent_wrong(demo, scripted,
                                                                        inline_steps, phones):
    scripted([settings_icon, Proposal(Action("COMPLETE"), confidence=5.0)])
    task = make_task(demo["user"])
    inline_steps.drain()
    ticket = Ticket.objects.get(task=task)

    tickets.resolve_ticket(ticket, demo["operator"], "edit", action={"type": "PRESS_HOME"})
    inline_steps.drain()

    step = Task.objects.get(id=task.id).steps.get(index=0)
    assert step.executed_action == {"type": "PRESS_HOME"}
    assert step.decided_by == DecidedBy.OPERATOR
    assert ticket.training.score_label == 1
    assert ticket.training.human_action == {"type": "PRESS_HOME"}


@pytest.mark.django_db(transaction=True)
def test_an_invalid_edit_is_refused_and_the_ticket_stays_open(demo, scripted, inline_steps):
    scripted([settings_icon])
    task = make_task(demo["user"])
    inline_steps.drain()
    ticket = Ticket.objects.get(task=task)

    with pytest.raises(ServiceError, match="off the 1080x2400 screen"):
        tickets.resolve_ticket(ticket, demo["operator"], "edit",
                               action={"type": "CLICK", "x": 5000, "y": 10})

    ticket.refresh_from_db()
    assert ticket.status == TicketStatus.OPEN
    assert not inline_steps.pending


@pytest.mark.django_db(transaction=True)
def test_a_second_resolution_is_a_conflict(demo, scripted, inline_steps):
    scripted([settings_icon, Proposal(Action("COMPLETE"), confidence=5.0)])
    task = make_task(demo["user"])
    inline_steps.drain()
    ticket = Ticket.objects.get(task=task)
    tickets.resolve_ticket(ticket, demo["operator"], "approve")

    with pytest.raises(Conflict, match="no longer open"):
        tickets.resolve_ticket(ticket, demo["operator"], "abort")
    assert Task.objects.get(id=task.id).status != TaskStatus.ABORTED


@pytest.mark.django_db(transaction=True)
def test_a_claimed_ticket_cannot_be_claimed_or_resolved_by_someone_else(demo, scripted,
                                                                        inline_steps):
    scripted([settings_icon])
    make_task(demo["user"])
    inline_steps.drain()
    ticket = Ticket.objects.get()
    tickets.claim_ticket(ticket, demo["operator"])

    with pytest.raises(Conflict, match="operator holds this ticket"):
        tickets.claim_ticket(ticket, demo["admin"])
    with pytest.raises(Conflict, match="operator holds this ticket"):
        tickets.resolve_ticket(ticket, demo["admin"], "abort")


@pytest.mark.django_db(transaction=True)
def test_an_idle_claim_lapses_and_another_operator_can_take_the_ticket(demo, scripted,
                                                                       inline_steps, settings):
    scripted([settings_icon])
    make_task(demo["user"])
    inline_steps.drain()
    ticket = Ticket.objects.get()
    tickets.claim_ticket(ticket, demo["operator"])
    tickets.claim_ticket(ticket, demo["operator"])  # the holder's page renews its claim
    with pytest.raises(Conflict):
        tickets.claim_ticket(ticket, demo["admin"])

    settings.KAIROS_CLAIM_TIMEOUT = 60
    Ticket.objects.filter(id=ticket.id).update(
        claimed_at=timezone.now() - timedelta(seconds=61))
    taken = tickets.claim_ticket(ticket, demo["admin"])
    assert (taken.status, taken.assignee) == (TicketStatus.CLAIMED, demo["admin"])
    with pytest.raises(Conflict, match="admin holds this ticket"):
        tickets.resolve_ticket(ticket, demo["operator"], "abort")


@pytest.mark.django_db(transaction=True)
def test_an_admin_reassigns_a_held_ticket_and_nobody_else_may(demo, scripted, inline_steps):
    scripted([settings_icon])
    make_task(demo["user"])
    inline_steps.drain()
    ticket = Ticket.objects.get()
    tickets.claim_ticket(ticket, demo["operator"])

    with pytest.raises(Forbidden):
        tickets.reassign_ticket(ticket, demo["operator"], demo["operator"])
    with pytest.raises(ServiceError, match="only be given to an operator"):
        tickets.reassign_ticket(ticket, demo["admin"], demo["user"])
    tickets.reassign_ticket(ticket, demo["admin"], demo["admin"])
    ticket.refresh_from_db()
    assert ticket.assignee == demo["admin"]
    with pytest.raises(Conflict, match="admin holds this ticket"):
        tickets.resolve_ticket(ticket, demo["operator"], "abort")
    tickets.resolve_ticket(ticket, demo["admin"], "abort")
    with pytest.raises(Conflict, match="already resolved"):
        tickets.reassign_ticket(ticket, demo["admin"], demo["operator"])


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_resolutions_exactly_one_wins(demo, scripted, inline_steps):
    if connection.vendor == "sqlite":
        pytest.skip("concurrent writers need PostgreSQL (DATABASE_URL); SQLite serialises them")
    scripted([settings_icon])
    make_task(demo["user"])
    inline_steps.drain()
    ticket_id = Ticket.objects.get().id
    barrier = threading.Barrier(2)
    results: list[str] = []

    def resolve(decision: str, action=None) -> None:
        ticket = Ticket.objects.get(id=ticket_id)
        barrier.wait()
        try:
            tickets.resolve_ticket(ticket, demo["operator"], decision, action=action)
            results.append("won")
        except Conflict:
            results.append("conflict")
        finally:
            connection.close()

    threads = [threading.Thread(target=resolve, args=("approve",)),
               threading.Thread(target=resolve, args=("edit", {"type": "PRESS_BACK"}))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results) == ["conflict", "won"]
    assert Ticket.objects.get(id=ticket_id).training is not None
    assert len(inline_steps.pending) == 1  # the next step is scheduled once, not twice


@pytest.mark.django_db(transaction=True)
def test_a_redelivered_step_task_does_not_repeat_the_device_action(demo, scripted,
                                                                   inline_steps, phones):
    scripted([lambda ctx: Proposal(settings_icon(ctx).action, confidence=5.0)])
    task = make_task(demo["user"])
    task_id, index = inline_steps.pending[0]
    assert steps.run_step(task_id, index) == "executed"
    frame = phones.device("sim-1").frame_number

    # Celery redelivers the same message (acks_late after a lost ack).
    assert steps.run_step(task_id, index) == "stale"
    step = Step.objects.get(task=task, index=0)
    step.status = StepStatus.READY  # even a step reset to READY is claimed only once
    assert steps.execute_step(task, step) == "duplicate"
    assert phones.device("sim-1").frame_number == frame


@pytest.mark.django_db(transaction=True)
def test_a_sensitive_tap_asks_whatever_the_confidence(demo, scripted, inline_steps, phones):
    from devices.uitree import UINode

    def tap_send(ctx):
        return Proposal(Action("CLICK", x=540, y=1200), confidence=5.0)

    scripted([tap_send])
    device = phones.device("sim-1")
    original = device.observe

    def with_send_button():
        obs = original()
        obs.nodes.append(UINode(index=len(obs.nodes), cls="android.widget.Button", text="Send",
                                bounds=(400, 1100, 680, 1300), clickable=True))
        return obs

    device.observe = with_send_button
    task = make_task(demo["user"], threshold=0)
    inline_steps.drain()
    assert Ticket.objects.get(task=task).reason == "sensitive_action"


@pytest.mark.django_db(transaction=True)
def test_abort_finishes_the_task_and_cancels_nothing_twice(demo, scripted, inline_steps):
    scripted([settings_icon])
    task = make_task(demo["user"])
    inline_steps.drain()
    ticket = Ticket.objects.get(task=task)

    tickets.resolve_ticket(ticket, demo["operator"], "abort")

    task.refresh_from_db()
    assert task.status == TaskStatus.ABORTED
    with pytest.raises(Conflict):
        lifecycle.abort_task(task, demo["operator"])


@pytest.mark.django_db(transaction=True)
def test_the_step_limit_ends_a_task_as_failed(demo, scripted, inline_steps):
    scripted([lambda ctx: Proposal(Action("SCROLL", direction="UP"), confidence=5.0),
              lambda ctx: Proposal(Action("SCROLL", direction="DOWN"), confidence=5.0)])
    task = make_task(demo["user"], threshold=0, max_steps=2)
    inline_steps.drain()
    task.refresh_from_db()
    assert task.status == TaskStatus.FAILED
    assert "step limit" in task.error


@pytest.mark.django_db(transaction=True)
def test_an_impossible_task_raises_one_ticket_that_says_so_with_the_reason(
        demo, inline_steps, phones):
    """Issue 15, item 6: from inside an app no installed app fits "Book me a flight": the
    agent says so at once instead of asking a person to approve PRESS_BACK twice first —
    once the user, asked which app to use (issue 27), names none."""
    phones.device("sim-1").perform(Action("OPENAPP", app="Clock"))
    task = lifecycle.create_task(demo["user"], Device.objects.get(name="sim-1"),
                                 "Book me a flight to Paris", threshold=4, backend="heuristic")
    inline_steps.drain()
    question = Ticket.objects.get(task=task, kind="clarification")
    assert question.question.startswith("Which app should I use")
    chat.post_message(task, demo["user"], "I don't have one for that")
    inline_steps.drain()

    opened = list(Ticket.objects.filter(task=task).exclude(kind="clarification"))
    assert len(opened) == 1
    ticket = opened[0]
    assert ticket.step.proposed_action["type"] == "IMPOSSIBLE"
    assert "believes this task cannot be done" in ticket.note
    assert "No installed app fits the goal" in ticket.note
    # Approving it ends the task as failed with the agent's reason, and no more tickets.
    tickets.resolve_ticket(ticket, demo["operator"], "approve")
    inline_steps.drain()
    task.refresh_from_db()
    assert task.status == TaskStatus.FAILED
    assert Ticket.objects.filter(task=task).count() == 2  # the question and this one
    # The user is told why (issue 15, item 8): the reason and a closing line in the chat.
    assert "No installed app fits the goal" in task.error
    closing = task.messages.order_by("-id").first()
    assert closing.sender == "system" and closing.text.startswith("Could not finish after 1 step")
    assert "No installed app fits the goal" in closing.text


@pytest.mark.django_db(transaction=True)
def test_an_abort_says_who_stopped_the_task_and_no_step_stays_waiting(demo, scripted,
                                                                     inline_steps):
    scripted([settings_icon])
    task = make_task(demo["user"])
    inline_steps.drain()
    ticket = Ticket.objects.get(task=task)
    tickets.resolve_ticket(ticket, demo["operator"], "abort", answer="Wrong phone, sorry")

    task.refresh_from_db()
    assert task.status == TaskStatus.ABORTED
    assert task.steps.get(index=0).status == StepStatus.CANCELLED
    assert task.messages.order_by("-id").first().text == \
        "An operator (operator) stopped this task after 0 steps. Reason: Wrong phone, sorry"
    with pytest.raises(Conflict, match="the chat is closed"):
        chat.post_message(task, demo["user"], "hello?")
