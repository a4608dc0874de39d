"""What people's decisions teach, and the labels they give (issues 24 and 25).

The experience memory learns from approvals and edits on tickets, from an operator's
inputs during a take-over and from end users' verdicts and spot checks
(``learn_from_task_verdict``, the one place verdicts feed in); each resolved ticket is
kept as a training record, and a take-over's first input labels the step it replaced.
Writes memory entries, ``TrainingRecord`` rows and a ticket's label; changes no task's,
step's or ticket's status.
"""
from __future__ import annotations

from typing import Any

from django.conf import settings

from agents.brain.experience.memory import pick_group
from agents.runtime.models import (
    DecidedBy, Decision, Step, StepStatus, Task, Ticket, TrainingRecord,
)
from devices.actions import Action, validate_action


def _step_fact(task: Task, step: Step, executed: Any, decision: str, proposed: Any = None):
    """The step as the memory learns it: its screen, the goal, the proposal, the action
    executed, the decision and — where the proposal came from memory — its kind."""
    from agents.brain.experience.learning import StepFact
    from agents.brain.experience.memory import step_key
    from devices.uitree import nodes_from_json

    def action(value: Any) -> Action | None:
        checked = validate_action(value) if value else None
        return checked if isinstance(checked, Action) else None

    evidence = (step.extra or {}).get("evidence") or {}
    # the memory's decision was proposed (alone, or the backend's agreeing with it)
    kind = (evidence.get("memory_kind") if evidence.get("rule") == "experience"
            or evidence.get("memory_agrees") else None)
    before = task.steps.filter(index__lt=step.index, status=StepStatus.DONE).exclude(
        executed_action=None).order_by("-index").values_list(
        "executed_action", "summary", "ui_nodes").first()
    prev = step_key(before[0], before[1] or "", task.goal,
                    pick_group(before[0], nodes_from_json(before[2] or []))) if before else ""
    return StepFact(app=step.app, nodes=nodes_from_json(step.ui_nodes or []),
                    instruction=task.goal, proposed=action(proposed), executed=action(executed),
                    decision=decision, memory_kind=kind, summary=step.summary, prev=prev)


def _learn_from_ticket(ticket: Ticket, task: Task, resolution: Any, user: Any) -> None:
    """An approve or edit on a ticket teaches the installation's memory (``resolution``: a
    :class:`~agents.runtime.services.tickets.Resolution`, which imports this module)."""
    if not settings.KAIROS_EXPERIENCE or ticket.step is None or resolution.action is None:
        return
    if resolution.decision not in (Decision.APPROVE, Decision.EDIT):
        return
    from agents.brain.experience.learning import learn_from_ticket
    from agents.runtime.experience_store import DbStore

    step = ticket.step
    fact = _step_fact(task, step, resolution.action.to_json(), str(resolution.decision),
                      step.proposed_action)
    learn_from_ticket(DbStore(task=task, user=user), fact, task=str(task.id))


def _learn_from_takeover_input(task: Task, step: Step, user: Any) -> None:
    """An operator's input during a take-over teaches like an edit; the first one after
    the take-over is compared with the proposal that was taken over (repeating it
    confirms it)."""
    if not settings.KAIROS_EXPERIENCE:
        return
    from agents.brain.experience.learning import TAKEOVER, learn_from_ticket
    from agents.runtime.experience_store import DbStore

    proposed = None
    ticket = task.tickets.filter(decision=Decision.TAKEOVER).order_by("-resolved_at").first()
    if ticket is not None and ticket.step is not None and not task.steps.filter(
            index__gt=ticket.step.index, index__lt=step.index,
            decided_by=DecidedBy.OPERATOR).exists():
        proposed = ticket.step.proposed_action
    fact = _step_fact(task, step, step.executed_action, TAKEOVER, proposed)
    learn_from_ticket(DbStore(task=task, user=user), fact, task=str(task.id))


def learn_from_task_verdict(task: Task, right: bool, *, source: str = "verdict",
                            steps: Any = None) -> int:
    """THE place where end users' verdicts and spot checks feed the experience memory
    (issue 25 item 1; ``Task.verdict_right`` and "spot_check" tickets come from the issue
    "Labels you can trust and measure"). Call it with the task's verdict (``steps``
    None: every step that acted alone) or with a spot check's one step
    (``source="spot_check"``, ``steps=[step]``). A right verdict also keeps the task as a
    reference episode for planners. Returns the memory entries written."""
    if not settings.KAIROS_EXPERIENCE:
        return 0
    from agents.brain.experience.learning import ALONE, learn_from_verdict, record_episode
    from agents.runtime.experience_store import DbStore

    rows = list(steps) if steps is not None else list(task.steps.filter(
        status=StepStatus.DONE).exclude(executed_action=None).order_by("index"))
    alone = [_step_fact(task, s, s.executed_action, ALONE, s.proposed_action) for s in rows
             if s.decided_by == DecidedBy.AGENT and not s.tickets.exists()]
    store = DbStore(task=task)
    written = learn_from_verdict(store, alone, right, task=str(task.id), source=source)
    if right and steps is None:
        record_episode(store, task.goal, [_step_fact(task, s, s.executed_action, ALONE)
                                          for s in rows])
    return written


def _record_training(ticket: Ticket, task: Task, user: Any, step: Step | None,
                     goal: str) -> None:
    from agents.runtime.training.labels import score_of

    # The history before the ticket's step: by now a worker may have run it and more.
    rows = task.steps.filter(status=StepStatus.DONE).exclude(executed_action=None)
    if step is not None:
        rows = rows.filter(index__lt=step.index)
    history = [summary or str(action) for summary, action in
               rows.order_by("index").values_list("summary", "executed_action")]

    label = score_of(ticket.agent_right)  # OS-Kairos Eq. 3, see agents/runtime/training/labels.py
    seconds = (ticket.resolved_at - ticket.created_at).total_seconds() if ticket.resolved_at \
        else None
    TrainingRecord.objects.create(
        ticket=ticket, task=task, step_index=step.index if step else None,
        instruction=task.instruction, goal=goal,
        screenshot=step.screenshot.name if step and step.screenshot else "",
        ui_nodes=step.ui_nodes if step else [],
        history=history,
        plan=step.plan if step else [], agent_action=step.proposed_action if step else None,
        agent_confidence=step.confidence if step else None, human_action=ticket.human_action,
        decision=ticket.decision, reason=ticket.reason, question=ticket.question,
        answer=ticket.answer, score_label=label, operator=user, operator_seconds=seconds,
    )


def _label_takeover(ticket: Ticket, action: Action) -> None:
    """A take-over's first input labels the step it replaced (issue 24, item 1): it is
    the person's action for that step, and the proposal was right when it is the same.
    Later inputs belong to later screens and label nothing."""
    from agents.runtime.training.labels import judge, score_of

    step = ticket.step
    if step is None:
        return
    right = judge(Decision.TAKEOVER, step.proposed_action, action.to_json(), step.ui_nodes)
    if Ticket.objects.filter(id=ticket.id, human_action__isnull=True).update(
            human_action=action.to_json(), agent_right=right):
        TrainingRecord.objects.filter(ticket_id=ticket.id).update(
            human_action=action.to_json(), score_label=score_of(right))
