"""Correct the labels and element names of records written before issue 24.

Run once by the data migration ``agents/0007_relabel_handoffs`` (and testable on rows:
``relabel(django.apps.apps)``). It is idempotent: a second run changes nothing.

* every decided intervention gets ``Ticket.agent_right`` (agents/runtime/training/labels.py
  ``judge``): an edit identical to the proposal is right, not wrong;
* a take-over gets its first input as its ``human_action`` and is labelled by it: the
  operator's first own step after it (``decided_by`` operator, no proposal);
* element names that are internal ids (``node-2``, a resource id) in executed actions,
  step summaries, tickets' and training records' actions and histories become what the
  phone showed (text, content description, the row's caption), or are dropped.
"""
from __future__ import annotations

import re
from typing import Any

from agents.runtime.training.labels import judge, score_of

_NODE = re.compile(r"'node-\d+'")
_NODE_WORD = re.compile(r" ?'node-\d+'")


def _named(action: Any, ui_nodes: Any) -> Any:
    """``action`` (JSON) with its element named as the phone showed it."""
    from agents.brain import loop
    from devices.actions import Action, validate_action
    from devices.uitree import nodes_from_json

    if not isinstance(action, dict) or not action.get("element"):
        return action
    checked = validate_action(action)
    if not isinstance(checked, Action):
        return action
    nodes = nodes_from_json(ui_nodes or [])
    element = str(action["element"])
    if not (re.fullmatch(r"node-\d+", element) or
            any(element in (n.key, n.resource_id) for n in nodes)):
        return action  # already a name a person reads: left as it was
    return loop.shown_name(checked, nodes).to_json()


def _summary(action: Any, ui_nodes: Any) -> str:
    from agents.brain import loop
    from devices.actions import Action, validate_action
    from devices.uitree import nodes_from_json

    checked = validate_action(action)
    if not isinstance(checked, Action):
        return ""
    nodes = nodes_from_json(ui_nodes or [])
    return loop.history_entry(0, checked, "", True, loop.target_node(checked, nodes)).summary


def relabel(apps: Any) -> dict[str, int]:
    """Fix the records; returns how many rows of each kind changed."""
    Step = apps.get_model("agents", "Step")
    Ticket = apps.get_model("agents", "Ticket")
    TrainingRecord = apps.get_model("agents", "TrainingRecord")
    changed = {"steps": 0, "tickets": 0, "records": 0}

    # 1. Element names in what ran, and the summaries histories are made of.
    for step in Step.objects.filter(executed_action__isnull=False).iterator(chunk_size=500):
        action = _named(step.executed_action, step.ui_nodes)
        summary = step.summary
        if summary and _NODE.search(summary):
            summary = _summary(action, step.ui_nodes)[:255] or summary
        if action != step.executed_action or summary != step.summary:
            Step.objects.filter(pk=step.pk).update(executed_action=action, summary=summary)
            changed["steps"] += 1

    # 2. Tickets: the person's action named, take-overs given their first input, labels.
    tickets = Ticket.objects.filter(status="resolved").exclude(decision="").select_related(
        "step")
    for ticket in tickets.iterator(chunk_size=500):
        step = ticket.step
        nodes = step.ui_nodes if step is not None else []
        human = _named(ticket.human_action, nodes)
        if ticket.decision == "takeover" and human is None and step is not None:
            first = (Step.objects.filter(task_id=ticket.task_id, decided_by="operator",
                                         proposed_action__isnull=True, index__gt=step.index)
                     .filter(executed_action__isnull=False).order_by("index").first())
            # Not an input made under a later take-over of the same task.
            later = Ticket.objects.filter(task_id=ticket.task_id, decision="takeover",
                                          step__index__gt=step.index)
            if first is not None and not later.filter(step__index__lt=first.index).exists():
                human = first.executed_action
        right = judge(ticket.decision, step.proposed_action if step else None, human, nodes)
        if human != ticket.human_action or right != ticket.agent_right:
            Ticket.objects.filter(pk=ticket.pk).update(human_action=human, agent_right=right)
            changed["tickets"] += 1
        record = TrainingRecord.objects.filter(ticket_id=ticket.pk).first()
        if record is None:
            continue
        history = list(record.history or [])
        if any(isinstance(h, str) and _NODE.search(h) for h in history):
            done = (Step.objects.filter(task_id=ticket.task_id, status="done",
                                        index__lt=record.step_index or 0)
                    .filter(executed_action__isnull=False).order_by("index")
                    .values_list("summary", "executed_action"))
            rebuilt = [s or str(a) for s, a in done]
            if len(rebuilt) == len(history):
                history = rebuilt
            else:  # steps since removed: drop the internal ids, keep the rest
                history = [_NODE_WORD.sub("", h) if isinstance(h, str) else h
                           for h in history]
        label = score_of(right)
        if (human != record.human_action or label != record.score_label
                or history != record.history):
            TrainingRecord.objects.filter(pk=record.pk).update(
                human_action=human, score_label=label, history=history)
            changed["records"] += 1
    return changed
