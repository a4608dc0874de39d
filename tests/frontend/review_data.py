"""Logged work for the review tests, made by the product's own services.

Three episodes on sim-1 with the scripted backend, each with a low-confidence first step
that a person resolves differently: approved, edited (to Press Home), taken over (the
operator taps Settings, then hands back). Nothing is written to the tables directly.
"""
from __future__ import annotations

from django.test import TestCase

from agents.brain.backends.base import Proposal
from agents.runtime.models import Task, Ticket
from agents.runtime.services import lifecycle, takeover, tickets
from devices.actions import Action
from devices.models import Device


def settings_icon(ctx) -> Proposal:
    node = next(n for n in ctx.observation.nodes if n.label == "Settings")
    x, y = node.center
    return Proposal(Action("CLICK", x=x, y=y, element="Settings"), confidence=2.0,
                    thought="open Settings", plan=["open Settings", "finish"],
                    current_step="open Settings")


def complete(ctx) -> Proposal:
    return Proposal(Action("COMPLETE"), confidence=5.0, thought="done")


def home(phones) -> None:
    phones.device("sim-1").perform(Action("PRESS_HOME"))


class Committed:
    """Runs the services as if each call committed, inside a test's transaction.

    The services schedule steps and send events on commit; a test wrapped in one
    transaction (fast to roll back, unlike flushing PostgreSQL) never commits, so each
    call's on-commit work runs when the call returns, as it would in production.
    """

    def __init__(self, inline_steps) -> None:
        self.inline_steps = inline_steps

    def __call__(self, fn, *args, **kwargs):
        with TestCase.captureOnCommitCallbacks(execute=True):
            return fn(*args, **kwargs)

    def drain(self) -> None:
        while self.inline_steps.pending:
            self(self.inline_steps.drain, 1)


def run_episodes(demo, scripted, inline_steps, phones) -> dict[str, Task]:
    device = Device.objects.get(name="sim-1")
    out: dict[str, Task] = {}
    do = Committed(inline_steps)

    home(phones)
    scripted([settings_icon, complete])
    task = do(lifecycle.create_task, demo["user"], device, "Open the settings app",
             threshold=4, backend="scripted")
    do.drain()
    do(tickets.resolve_ticket, Ticket.objects.get(task=task), demo["operator"], "approve")
    do.drain()
    out["approved"] = task

    home(phones)
    scripted([settings_icon, complete])
    task = do(lifecycle.create_task, demo["user"], device, "Go back to the home screen",
             threshold=4, backend="scripted")
    do.drain()
    do(tickets.resolve_ticket, Ticket.objects.get(task=task), demo["operator"], "edit",
       action={"type": "PRESS_HOME"})
    do.drain()
    out["edited"] = task

    home(phones)
    scripted([settings_icon, complete])
    task = do(lifecycle.create_task, demo["user"], device, "Turn on Wi-Fi for me",
             threshold=4, backend="scripted")
    do.drain()
    do(tickets.resolve_ticket, Ticket.objects.get(task=task), demo["admin"], "takeover")
    task.refresh_from_db()
    node = next(n for n in phones.device("sim-1").observe().nodes if n.label == "Settings")
    do(takeover.operator_input, task, demo["admin"], {"type": "CLICK", "x": node.center[0],
                                                  "y": node.center[1]})
    do(takeover.hand_back, task, demo["admin"])
    do.drain()
    out["taken_over"] = task
    for task in out.values():
        task.refresh_from_db()
    return out
