"""One episode step by step: what the agent proposed, what a person did instead, and when.

Four queries whatever the number of steps: the task, its steps, its tickets, its chat.
"""
from __future__ import annotations

import datetime as dt
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from agents.runtime.models import DecidedBy, Decision, Message, Step, Task, Ticket
from agents.runtime.training.labels import label_meaning, score_of
from frontend.review.words import action_words, decision_words, duration_words

POINT_TYPES = ("CLICK", "LONG_CLICK")

_STEP_FIELDS = (
    "id", "task", "index", "status", "screenshot", "screen_width", "screen_height", "app",
    "plan", "current_step", "thought", "proposed_action", "confidence", "executed_action",
    "decided_by", "summary", "outcome", "screen_changed", "created_at", "executed_at",
)


@dataclass
class Mark:
    """An action drawn on the screenshot: a ring at a point, or a caption for the rest."""

    who: str  # "agent" | "human"
    words: str
    x: int | None = None
    y: int | None = None

    @property
    def is_point(self) -> bool:
        return self.x is not None and self.y is not None


@dataclass
class ReplayStep:
    number: int  # Step.index + 1: the "step N" people read, and the ?step= value
    step: Step
    width: int
    height: int
    screenshot_url: str
    proposed: str
    executed: str
    by: str
    confidence: float | None
    below_threshold: bool
    marks: list[Mark]
    ticket: Ticket | None
    ticket_reason: str
    decision: str
    decided_by: str
    human_seconds: float | None
    human_time: str
    label: int | None
    label_meaning: str
    operator_input: bool
    messages: list[Message] = field(default_factory=list)

    @property
    def ring_radius(self) -> int:
        return max(16, self.width // 22)


@dataclass
class Replay:
    task: Task
    steps: list[ReplayStep]
    before_first_step: list[Message]
    current: int  # the number of the step shown first

    def has(self, number: int) -> bool:
        return any(s.number == number for s in self.steps)


def _mark(who: str, action: Any, *, done: bool) -> Mark | None:
    if not isinstance(action, dict) or not action.get("type"):
        return None
    words = action_words(action, done=done)
    if action["type"] in POINT_TYPES and action.get("x") is not None:
        return Mark(who, words, int(action["x"]), int(action["y"]))
    return Mark(who, words)


def build_replay(task: Task, requested_step: int | None) -> Replay:
    steps = list(Step.objects.filter(task=task).only(*_STEP_FIELDS).order_by("index"))
    tickets = list(Ticket.objects.filter(task=task).select_related("resolved_by")
                   .order_by("created_at"))
    messages = list(Message.objects.filter(task=task).select_related("author")
                    .order_by("created_at", "id"))
    ticket_of: dict[Any, Ticket] = {}
    for ticket in tickets:  # the latest ticket of a step is the one that decided it
        if ticket.step_id is not None:
            ticket_of[ticket.step_id] = ticket
    out: list[ReplayStep] = []
    for step in steps:
        number = step.index + 1
        ticket = ticket_of.get(step.id)
        operator_input = step.proposed_action is None and step.decided_by == DecidedBy.OPERATOR
        marks: list[Mark] = []
        agent = _mark("agent", step.proposed_action, done=False)
        if agent:
            marks.append(agent)
        human_action = None
        if ticket is not None and ticket.decision in (Decision.EDIT, Decision.TAKEOVER):
            human_action = ticket.human_action
        elif operator_input:
            human_action = step.executed_action
        human = _mark("human", human_action, done=True)
        if human:
            marks.append(human)
        seconds = ((ticket.resolved_at - ticket.created_at).total_seconds()
                   if ticket is not None and ticket.resolved_at else None)
        label = score_of(ticket.agent_right) if ticket else None
        out.append(ReplayStep(
            number=number, step=step, width=step.screen_width or task.device.width,
            height=step.screen_height or task.device.height,
            screenshot_url=step.screenshot.url if step.screenshot else "",
            proposed=action_words(step.proposed_action, done=False),
            executed=action_words(step.executed_action),
            by="operator" if step.decided_by == DecidedBy.OPERATOR else "agent",
            confidence=step.confidence,
            below_threshold=step.confidence is not None and step.confidence < task.threshold,
            marks=marks, ticket=ticket,
            ticket_reason=(ticket.get_reason_display() if ticket else ""),
            decision=decision_words(ticket.decision, ticket.status) if ticket else "",
            decided_by=(ticket.resolved_by.username if ticket and ticket.resolved_by else ""),
            human_seconds=seconds, human_time=duration_words(seconds), label=label,
            label_meaning=label_meaning(label) if ticket else "", operator_input=operator_input,
        ))
    before = _place_messages(out, messages)
    numbers = [s.number for s in out]
    current = requested_step if requested_step in numbers else (numbers[0] if numbers else 1)
    return Replay(task=task, steps=out, before_first_step=before, current=current)


def _place_messages(steps: list[ReplayStep], messages: list[Message]) -> list[Message]:
    """Each chat message goes with the step on screen when it was written (the latest
    step created at or before it); earlier ones come before the first step."""
    starts: list[dt.datetime] = [s.step.created_at for s in steps]
    before: list[Message] = []
    for message in messages:
        at = bisect_right(starts, message.created_at) - 1
        if at < 0:
            before.append(message)
        else:
            steps[at].messages.append(message)
    return before
