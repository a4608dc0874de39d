"""The experience memory in production: ticket decisions teach it, the next task's step
proposes from it with its evidence, forgetting an app removes that (issue 25)."""
from __future__ import annotations

import pytest

from agents.brain.backends.base import Proposal
from agents.runtime.experience_store import app_summaries, forget_app
from agents.runtime.models import ExperienceEntry, Ticket
from agents.runtime.services import lifecycle, takeover, tickets, verdicts
from devices.actions import Action
from devices.models import Device

LAUNCHER = "com.android.launcher3"


def settings_icon(ctx) -> Proposal:
    node = next(n for n in ctx.observation.nodes if n.label == "Settings")
    x, y = node.center
    return Proposal(Action("CLICK", x=x, y=y), confidence=2.0, thought="open Settings")


def clock_icon(ctx) -> Proposal:
    node = next(n for n in ctx.observation.nodes if n.label == "Clock")
    x, y = node.center
    return Proposal(Action("CLICK", x=x, y=y), confidence=2.0, thought="open Clock")


def first_step_of_a_new_task(user, inline_steps, phones, instruction):
    phones.device("sim-1").perform(Action("PRESS_HOME"))
    task = lifecycle.create_task(user, Device.objects.get(name="sim-1"), instruction,
                                 threshold=4.0, backend="scripted")
    inline_steps.drain()
    return task, task.steps.get(index=0)


@pytest.mark.django_db(transaction=True)
def test_an_approved_step_teaches_the_next_task_and_forgetting_undoes_it(
        demo, scripted, inline_steps, phones):
    scripted([settings_icon, Proposal(Action("COMPLETE"), confidence=5.0),
              clock_icon, clock_icon])
    task, _ = first_step_of_a_new_task(demo["user"], inline_steps, phones, "Open the settings")
    tickets.resolve_ticket(Ticket.objects.get(task=task), demo["operator"], "approve")
    inline_steps.drain()

    learned = ExperienceEntry.objects.get(app=LAUNCHER)
    assert (learned.source, learned.polarity, learned.by, learned.task_id) == (
        "approve", 1, demo["operator"], task.id)
    assert [row["app"] for row in app_summaries()] == [LAUNCHER]

    # Another wording of the same wish: the memory proposes the Settings icon, not the
    # backend's Clock, and says why; with no record yet a person is still asked.
    again, step = first_step_of_a_new_task(demo["user"], inline_steps, phones,
                                           "please open settings")
    settings_node = next(n for n in phones.device("sim-1").observe().nodes
                         if n.label == "Settings")
    assert (step.proposed_action["x"], step.proposed_action["y"]) == settings_node.center
    evidence = step.extra["evidence"]
    assert evidence["rule"] == "experience" and evidence["memory_confirmed"] == 1
    assert Ticket.objects.filter(task=again, status="open").exists()
    lifecycle.abort_task(again, demo["operator"])

    assert forget_app(LAUNCHER) == 1
    _, step = first_step_of_a_new_task(demo["user"], inline_steps, phones, "please open settings")
    assert step.extra.get("evidence", {}).get("rule") != "experience"
    clock = next(n for n in phones.device("sim-1").observe().nodes if n.label == "Clock")
    assert (step.proposed_action["x"], step.proposed_action["y"]) == clock.center


@pytest.mark.django_db(transaction=True)
def test_an_edit_confirms_the_operators_action_and_corrects_the_proposal(
        demo, scripted, inline_steps, phones):
    scripted([clock_icon, Proposal(Action("COMPLETE"), confidence=5.0)])
    task, step = first_step_of_a_new_task(demo["user"], inline_steps, phones, "Open the settings")
    settings_node = next(n for n in phones.device("sim-1").observe().nodes
                         if n.label == "Settings")
    x, y = settings_node.center
    tickets.resolve_ticket(Ticket.objects.get(task=task), demo["operator"], "edit",
                           action={"type": "CLICK", "x": x, "y": y})
    rows = sorted(ExperienceEntry.objects.values_list("source", "polarity",
                                                      "action__locator__label"))
    assert rows == [("edit", -1, "Clock"), ("edit", 1, "Settings")]


@pytest.mark.django_db(transaction=True)
def test_an_edit_identical_to_the_proposal_confirms_it(demo, scripted, inline_steps, phones):
    scripted([settings_icon, Proposal(Action("COMPLETE"), confidence=5.0)])
    task, step = first_step_of_a_new_task(demo["user"], inline_steps, phones, "Open the settings")
    tickets.resolve_ticket(Ticket.objects.get(task=task), demo["operator"], "edit",
                           action=step.proposed_action)
    assert list(ExperienceEntry.objects.values_list("source", "polarity")) == [("approve", 1)]


@pytest.mark.django_db(transaction=True)
def test_the_owners_yes_teaches_the_memory_the_steps_that_acted_alone(
        demo, scripted, inline_steps, phones):
    scripted([Proposal(Action("PRESS_HOME"), confidence=5.0),
              Proposal(Action("COMPLETE"), confidence=5.0)])
    task, _ = first_step_of_a_new_task(demo["user"], inline_steps, phones, "go to the home screen")
    inline_steps.drain()
    task.refresh_from_db()
    assert task.is_finished and not task.tickets.exists()  # it acted alone
    assert not ExperienceEntry.objects.exists()
    verdicts.record_verdict(task, demo["user"], True)
    assert ExperienceEntry.objects.filter(source="verdict", polarity=1,
                                          action__type="PRESS_HOME").exists()


@pytest.mark.django_db(transaction=True)
def test_take_over_inputs_teach_and_one_repeating_the_proposal_confirms_it(
        demo, scripted, inline_steps, phones):
    scripted([settings_icon])
    task, step = first_step_of_a_new_task(demo["user"], inline_steps, phones, "Open the settings")
    tickets.resolve_ticket(Ticket.objects.get(task=task), demo["operator"], "takeover")
    task.refresh_from_db()
    takeover.operator_input(task, demo["operator"], step.proposed_action)  # the same tap
    takeover.operator_input(task, demo["operator"], {"type": "PRESS_BACK"})
    rows = list(ExperienceEntry.objects.order_by("id").values_list("source", "polarity",
                                                                    "action__type"))
    assert rows == [("approve", 1, "CLICK"), ("takeover", 1, "PRESS_BACK")]


@pytest.mark.django_db(transaction=True)
def test_forgetting_an_app_forgets_how_to_open_it_from_the_launcher(
        demo, scripted, inline_steps, phones):
    """What was learned on the launcher about opening Settings is learned about Settings:
    after "Forget" of Settings, nothing remembered opens it alone any more."""
    scripted([settings_icon, Proposal(Action("COMPLETE"), confidence=5.0),
              clock_icon, clock_icon])
    task, _ = first_step_of_a_new_task(demo["user"], inline_steps, phones, "Open the settings")
    tickets.resolve_ticket(Ticket.objects.get(task=task), demo["operator"], "approve")
    inline_steps.drain()
    assert ExperienceEntry.objects.filter(app=LAUNCHER).count() == 1

    assert forget_app("com.kairos.clock") == 0  # another app's forget leaves it
    assert forget_app("com.kairos.settings") == 1
    assert not ExperienceEntry.objects.filter(app=LAUNCHER).exists()
    _, step = first_step_of_a_new_task(demo["user"], inline_steps, phones, "please open settings")
    assert step.extra.get("evidence", {}).get("rule") != "experience"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("prior", [True, False], ids=["prior", "no-prior"])
def test_an_admin_can_turn_the_shipped_prior_off(demo, scripted, inline_steps, phones,
                                                 settings, prior):
    settings.KAIROS_EXPERIENCE_PRIOR = prior
    scripted([settings_icon, Proposal(Action("COMPLETE"), confidence=5.0),
              clock_icon, clock_icon])
    task, _ = first_step_of_a_new_task(demo["user"], inline_steps, phones, "Open the settings")
    tickets.resolve_ticket(Ticket.objects.get(task=task), demo["operator"], "approve")
    inline_steps.drain()
    _, step = first_step_of_a_new_task(demo["user"], inline_steps, phones, "please open settings")
    evidence = step.extra["evidence"]
    assert evidence["rule"] == "experience"
    if prior:  # the shipped record of memories like this one counts, shown on the step
        assert evidence["memory_prior_right"] > 0
        assert step.confidence > 3.5  # P 0.94: still asked with nothing judged here
    else:  # only this installation's own record: nothing judged yet
        assert "memory_prior_right" not in evidence
        assert step.confidence == 1.0


def tap(label: str):
    """The scripted backend taps the element labelled ``label`` (asking: confidence 2)."""
    def propose(ctx) -> Proposal:
        node = next((n for n in ctx.observation.nodes if n.label == label), None)
        assert node is not None, (label, [n.label for n in ctx.observation.nodes])
        x, y = node.center
        return Proposal(Action("CLICK", x=x, y=y), confidence=2.0, thought=f"tap {label}")
    return propose


def field_of(ctx, rid: str):
    return next(n for n in ctx.observation.nodes if n.resource_id.endswith(rid))


@pytest.mark.django_db(transaction=True)
def test_after_another_row_of_the_same_list_the_next_step_is_remembered(
        demo, scripted, inline_steps, phones):
    """On the real step path (history read back from the database): what an operator did
    after opening Alex's conversation is proposed after opening Mom's — the step before is
    "a row of the conversations", not Alex's row."""
    def body_field(ctx) -> Proposal:
        x, y = field_of(ctx, "message_body").center
        return Proposal(Action("CLICK", x=x, y=y), confidence=2.0, thought="the message")

    def recipient_field(ctx) -> Proposal:
        x, y = field_of(ctx, "recipient").center
        return Proposal(Action("CLICK", x=x, y=y), confidence=2.0, thought="the recipient")

    scripted([tap("Messages"), tap("Alex Chen"), body_field,
              Proposal(Action("COMPLETE"), confidence=2.0),  # asked; the task is aborted
              tap("Messages"), tap("Mom"), recipient_field])
    first, _ = first_step_of_a_new_task(demo["user"], inline_steps, phones,
                                        "Text Alex that I'm on my way")
    for _ in range(3):  # an operator approves: open Messages, Alex's row, the message field
        tickets.resolve_ticket(Ticket.objects.get(task=first, status="open"),
                               demo["operator"], "approve")
        inline_steps.drain()
    lifecycle.abort_task(first, demo["operator"])
    phones.device("sim-1").perform(Action("PRESS_BACK"))

    second, _ = first_step_of_a_new_task(demo["user"], inline_steps, phones,
                                         "Text Mom that I'm on my way")
    for _ in range(2):  # open Messages, Mom's row
        tickets.resolve_ticket(Ticket.objects.get(task=second, status="open"),
                               demo["operator"], "approve")
        inline_steps.drain()
    step = second.steps.get(index=2)
    body = field_of(type("Ctx", (), {"observation": phones.device("sim-1").observe()}),
                    "message_body")
    # the backend wanted the recipient field; the memory proposes the message, and says why
    assert (step.proposed_action["x"], step.proposed_action["y"]) == body.center
    assert step.extra["evidence"]["rule"] == "experience"
