"""Labels a model can learn from (issue 24, item 1), through the product's own services.

A person who does what the agent proposed — an edit that changes nothing, a take-over
whose first input is the proposed tap — says the agent was right; every element name in
the log and the export is what the phone shows ("Navigate up"), never ``node-2``.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.apps import apps
from django.core.management import call_command

from agents.brain.backends.base import Proposal
from agents.runtime.models import Step, Ticket, TrainingRecord
from agents.runtime.services import lifecycle, takeover, tickets
from agents.runtime.training.relabel import relabel
from devices.actions import Action
from devices.models import Device
from tests.conftest import ScriptedBackend
from tests.frontend.review_data import Committed

pytestmark = pytest.mark.django_db


def node(phones, label):
    return next(n for n in phones.device("sim-1").observe().nodes if n.label == label)


def on_network_screen(phones) -> None:
    """sim-1 on Settings › Network: a Wi-Fi switch and a "Navigate up" arrow (node-2)."""
    device = phones.device("sim-1")
    device.perform(Action("PRESS_HOME"))
    for label in ("Settings", "network"):
        target = node(phones, label)
        device.perform(Action("CLICK", x=target.center[0], y=target.center[1]))


def tap(label: str, confidence: float):
    def propose(ctx) -> Proposal:
        target = next(n for n in ctx.observation.nodes if n.label == label)
        x, y = target.center
        return Proposal(Action("CLICK", x=x, y=y, element=label), confidence=confidence,
                        thought=f"tap {label}")
    return propose


def complete(ctx) -> Proposal:
    return Proposal(Action("COMPLETE"), confidence=5.0, thought="done")


@pytest.fixture
def asked(demo, scripted, inline_steps, phones):
    """A task on the Network screen whose first step (tap Wi-Fi, unsure) waits for a person."""
    on_network_screen(phones)
    scripted([tap("Wi-Fi", 2.0), complete, complete])
    do = Committed(inline_steps)
    task = do(lifecycle.create_task, demo["user"], Device.objects.get(name="sim-1"),
              "Turn on Wi-Fi", threshold=4, backend="scripted")
    do.drain()
    ticket = Ticket.objects.get(task=task)
    assert ticket.step.proposed_action["element"] == "Wi-Fi"
    return do, task, ticket


def export_jsonl(tmp_path: Path, *args: str) -> list[dict]:
    call_command("export_training", "--format", "jsonl", *args, "--out", str(tmp_path),
                 "--json", stdout=io.StringIO())
    name = "kairos_episodes.jsonl" if "--episodes" in args else "kairos_handoffs.jsonl"
    return [json.loads(x) for x in (tmp_path / name).read_text().splitlines()]


@pytest.mark.parametrize("where", ["same point", "another point of the same switch"])
def test_an_edit_that_does_what_was_proposed_labels_the_agent_right(asked, demo, phones,
                                                                    tmp_path, client, where):
    do, task, ticket = asked
    proposed = ticket.step.proposed_action
    x, y = proposed["x"], proposed["y"]
    if where != "same point":
        left, top, right, bottom = node(phones, "Wi-Fi").bounds
        x, y = right - 5, bottom - 5
    # The console's element picker sends the node's key as the element.
    do(tickets.resolve_ticket, ticket, demo["operator"], "edit",
       action={"type": "CLICK", "x": x, "y": y,
               "element": "com.kairos.settings:id/wifi_switch"})
    do.drain()
    ticket.refresh_from_db()
    assert ticket.agent_right is True
    assert ticket.human_action["element"] == "Wi-Fi"
    assert ticket.training.score_label == 5
    [record] = export_jsonl(tmp_path)
    assert record["label"] == 5 and "right" in record["label_meaning"]
    client.force_login(demo["admin"])
    page = client.get("/review/").content.decode()
    assert "the agent was right" in page and "agent was wrong" not in page


def test_an_edit_to_another_element_still_labels_the_agent_wrong(asked, demo, phones):
    do, task, ticket = asked
    up = node(phones, "Navigate up")
    do(tickets.resolve_ticket, ticket, demo["operator"], "edit",
       action={"type": "CLICK", "x": up.center[0], "y": up.center[1]})
    ticket.refresh_from_db()
    assert ticket.agent_right is False and ticket.training.score_label == 1


def test_a_takeover_is_labelled_by_its_first_input(asked, demo, phones, tmp_path):
    do, task, ticket = asked
    do(tickets.resolve_ticket, ticket, demo["operator"], "takeover")
    task.refresh_from_db()
    wifi = node(phones, "Wi-Fi")
    # The operator's first input taps the switch the agent proposed: the agent was right.
    do(takeover.operator_input, task, demo["operator"],
       {"type": "CLICK", "x": wifi.center[0], "y": wifi.center[1]})
    # A later input is on a later screen and labels nothing.
    up = node(phones, "Navigate up")
    do(takeover.operator_input, task, demo["operator"],
       {"type": "CLICK", "x": up.center[0], "y": up.center[1]})
    ticket.refresh_from_db()
    assert ticket.agent_right is True
    assert ticket.human_action == {"type": "CLICK", "x": wifi.center[0], "y": wifi.center[1],
                                   "element": "Wi-Fi"}
    assert ticket.training.score_label == 5
    [record] = export_jsonl(tmp_path)
    assert record["label"] == 5 and record["human"]["action"]["element"] == "Wi-Fi"


def test_a_takeover_that_does_something_else_labels_the_agent_wrong(asked, demo, phones):
    do, task, ticket = asked
    do(tickets.resolve_ticket, ticket, demo["operator"], "takeover")
    ticket.refresh_from_db()
    assert ticket.agent_right is False  # until its first input says otherwise
    task.refresh_from_db()
    up = node(phones, "Navigate up")
    do(takeover.operator_input, task, demo["operator"],
       {"type": "CLICK", "x": up.center[0], "y": up.center[1]})
    ticket.refresh_from_db()
    assert ticket.agent_right is False and ticket.training.score_label == 1
    assert ticket.human_action["element"] == "Navigate up"


def test_no_internal_id_in_the_log_or_the_export(asked, demo, phones, tmp_path, client):
    do, task, ticket = asked
    up = node(phones, "Navigate up")
    assert up.key == "node-2"
    # Picking "Navigate up" in the console sends its key, node-2.
    do(tickets.resolve_ticket, ticket, demo["operator"], "edit",
       action={"type": "CLICK", "x": up.center[0], "y": up.center[1], "element": "node-2"})
    do.drain()
    step = Step.objects.get(task=task, index=0)
    assert step.executed_action["element"] == "Navigate up"
    assert "node-" not in step.summary
    client.force_login(demo["admin"])
    log = client.get("/review/").content.decode()
    assert "Tapped ‘Navigate up’" in log and "node-" not in log
    replay = client.get(f"/review/tasks/{task.id}/").content.decode()
    assert "node-2" not in replay
    handoffs = (tmp_path / "h")
    episodes = (tmp_path / "e")
    text = json.dumps(export_jsonl(handoffs)) + json.dumps(export_jsonl(episodes, "--episodes"))
    assert "Navigate up" in text and "'node-" not in text and '"node-' not in text
    # An operator in control picking the arrow the same way.
    on_network_screen(phones)
    task2 = do(lifecycle.create_task, demo["user"], Device.objects.get(name="sim-1"),
               "Go back", threshold=4, backend="scripted")
    ScriptedBackend.script = [tap("Wi-Fi", 2.0)]
    do.drain()
    ticket2 = Ticket.objects.get(task=task2)
    do(tickets.resolve_ticket, ticket2, demo["operator"], "takeover")
    task2.refresh_from_db()
    step2 = do(takeover.operator_input, task2, demo["operator"],
               {"type": "CLICK", "x": up.center[0], "y": up.center[1], "element": "node-2"})
    assert step2.executed_action["element"] == "Navigate up" and "node-" not in step2.summary


def test_the_data_migration_corrects_records_written_before(asked, demo, phones):
    """Rows as the old code wrote them: an identical edit labelled wrong, a take-over
    with no action and labelled wrong, an element named node-2."""
    do, task, ticket = asked
    wifi = node(phones, "Wi-Fi")
    do(tickets.resolve_ticket, ticket, demo["operator"], "takeover")
    task.refresh_from_db()
    do(takeover.operator_input, task, demo["operator"],
       {"type": "CLICK", "x": wifi.center[0], "y": wifi.center[1]})
    up = node(phones, "Navigate up")
    taken_input = do(takeover.operator_input, task, demo["operator"],
                     {"type": "CLICK", "x": up.center[0], "y": up.center[1]})
    do(lifecycle.abort_task, task, demo["operator"])
    # What the old code stored.
    Ticket.objects.filter(id=ticket.id).update(human_action=None, agent_right=None)
    TrainingRecord.objects.filter(ticket=ticket).update(human_action=None, score_label=1)
    old_up = {"type": "CLICK", "x": up.center[0], "y": up.center[1], "element": "node-2"}
    Step.objects.filter(id=taken_input.id).update(
        executed_action=old_up, summary=f"CLICK 'node-2' at ({up.center[0]}, {up.center[1]})")

    on_network_screen(phones)
    task2 = do(lifecycle.create_task, demo["user"], Device.objects.get(name="sim-1"),
               "Turn on Wi-Fi again", threshold=4, backend="scripted")
    ScriptedBackend.script = [tap("Wi-Fi", 2.0), complete]
    do.drain()
    edited = Ticket.objects.get(task=task2)
    same = dict(edited.step.proposed_action)
    do(tickets.resolve_ticket, edited, demo["operator"], "edit", action=same)
    Ticket.objects.filter(id=edited.id).update(agent_right=None)
    TrainingRecord.objects.filter(ticket=edited).update(score_label=1)

    changed = relabel(apps)
    assert changed["tickets"] == 2 and changed["steps"] >= 1

    ticket.refresh_from_db()
    assert ticket.agent_right is True and ticket.human_action["element"] == "Wi-Fi"
    assert ticket.training.score_label == 5 and ticket.training.human_action == \
        ticket.human_action
    edited.refresh_from_db()
    assert edited.agent_right is True and edited.training.score_label == 5
    taken_input.refresh_from_db()
    assert taken_input.executed_action["element"] == "Navigate up"
    assert taken_input.summary == "CLICK 'Navigate up'"
    # Once is enough: a second run finds nothing to change.
    assert relabel(apps) == {"steps": 0, "tickets": 0, "records": 0}
