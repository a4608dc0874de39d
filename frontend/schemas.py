"""Typed request and response schemas of the JSON API (what ``/api/openapi.json`` says).

Enums come from the models' TextChoices, so a status added to a model is in the document
at once. Response schemas allow extra fields: the summaries in ``agents/runtime/events.py`` are
shared with the sockets and may gain fields before this file names them.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import BaseModel, ConfigDict, Strict, model_serializer

from agents.runtime.models import (
    DecidedBy, Decision, Message, StepStatus, TaskStatus, TicketKind, TicketReason, TicketStatus,
)
from devices.actions import ACTION_TYPES, DIRECTIONS
from devices.models import LIVE_DEVICE_STATUSES, DeviceKind


def choices(values: Any) -> Any:
    """``Literal[...]`` of a TextChoices' values: an ``enum`` in the document."""
    return Literal[tuple(values)]  # type: ignore[valid-type]


TaskStatusName = choices(TaskStatus.values)
TicketStatusName = choices(TicketStatus.values)


class Out(BaseModel):
    """A response: a plain pydantic model, since ninja's Schema reads only the declared
    fields of a dict and would drop fields added to the shared summaries."""

    model_config = ConfigDict(extra="allow")


class ErrorOut(Schema):
    detail: str = Field(..., description="what was wrong, in words a person can act on")


class ActionOut(Out):
    """An action (CONTRACT "Actions"); only the fields of its type are present."""

    type: choices(ACTION_TYPES)  # type: ignore[valid-type]
    x: int | None = None
    y: int | None = None
    text: str | None = None
    direction: choices(DIRECTIONS) | None = None  # type: ignore[valid-type]
    app: str | None = None
    element: str | None = None

    @model_serializer(mode="wrap")
    def _only_the_fields_of_its_type(self, handler: Any) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


class DeviceOut(Out):
    id: str
    name: str
    kind: choices(DeviceKind.values)  # type: ignore[valid-type]
    # "busy" while a task drives it (Device.live_status; CONTRACT, second build).
    status: choices(LIVE_DEVICE_STATUSES)  # type: ignore[valid-type]
    width: int
    height: int


class StepOut(Out):
    index: int
    status: choices(StepStatus.values)  # type: ignore[valid-type]
    action: ActionOut | None = Field(None, description="what ran (null until it ran)")
    proposed_action: ActionOut | None = Field(None, description="what the agent proposed")
    confidence: float | None = None
    by: choices(DecidedBy.values)  # type: ignore[valid-type]
    thought: str = ""
    plan: list[Any] = []
    summary: str = ""
    outcome: str = ""
    target_label: str = Field("", description="the element the action pointed at, as a person names it")
    screenshot_url: str | None = Field(
        None, description="the screen before the step; fetch it with the same credentials")
    prompt_tokens: int = 0
    completion_tokens: int = 0


class TicketOut(Out):
    id: str
    kind: choices(TicketKind.values)  # type: ignore[valid-type]
    reason: choices(TicketReason.values)  # type: ignore[valid-type]
    task: str
    step: int | None = None
    status: TicketStatusName  # type: ignore[valid-type]
    proposed_action: ActionOut | None = None
    confidence: float | None = None
    question: str = ""
    options: list[str] = []
    note: str = ""
    assignee: str | None = None
    device: str
    device_id: str
    instruction: str
    escalated: bool = False
    decision: choices(Decision.values) | None = None  # type: ignore[valid-type]
    answer: str | None = Field(None, description="the answer given, or an abort's reason")
    resolved_by: str | None = None
    answered_by_user: bool = Field(False, description="the task's owner answered this question")
    created_at: str | None = None


class MessageOut(Out):
    id: int
    sender: choices(Message.Sender.values)  # type: ignore[valid-type]
    text: str
    author: str | None = None
    ticket: str | None = None
    options: list[str] = []
    created_at: str | None = None


class TaskSummaryOut(Out):
    id: str
    status: TaskStatusName  # type: ignore[valid-type]
    instruction: str
    device: str
    device_id: str
    threshold: float
    success: bool | None = None
    cursor: int = 0
    interventions: int = 0
    clarifications: int = 0
    error: str = ""
    # One task drives a phone at a time: 1 = next to start; None unless queued.
    queue_position: int | None = None


class TaskOut(TaskSummaryOut):
    owner: str
    backend: str
    max_steps: int
    answers: list[str] = []
    created_at: str
    finished_at: str | None = None
    steps: list[StepOut]
    tickets: list[TicketOut]
    messages: list[MessageOut]
    verdict: VerdictOut | None = None  # the owner's "Did Kairos do what you asked?"


NOT_BLANK = r"\S"


def _action_schema() -> dict[str, Any]:
    """The action JSON of CONTRACT "Actions", per type, as the server reads it (it also
    accepts the aliases models write: TAP, BACK …, in any case); coordinates must lie on
    the phone's screen, which the document cannot state (a 400 names the screen size)."""
    # Models write numbers as strings too ("540"), and fractions; they are rounded. Beyond
    # a million pixels a number is refused whatever the type; off the screen, for a type
    # that taps, it is a 400 naming the screen.
    number = [{"type": "integer", "minimum": -999999, "maximum": 999999},
              {"type": "number", "minimum": -999999, "maximum": 999999},
              {"type": "string",
               "pattern": r"^\s*([-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?)?\s*$"}]
    pixel = {"anyOf": [*number, {"type": "null"}]}
    on_screen = {"anyOf": number}
    point = {"required": ["x", "y"], "properties": {"x": on_screen, "y": on_screen}}
    needs = {
        "CLICK": point, "LONG_CLICK": point,
        "TYPE": {"required": ["text"], "properties": {"text": {
            "type": "string", "minLength": 1, "maxLength": 1000, "pattern": NOT_BLANK}}},
        "SCROLL": {"required": ["direction"], "properties": {"direction": {
            "enum": list(DIRECTIONS)}}},
        "OPENAPP": {"required": ["app"], "properties": {"app": {
            "type": "string", "minLength": 1, "maxLength": 100, "pattern": NOT_BLANK}}},
    }
    return {
        "type": "object",
        "required": ["type"],
        "properties": {
            "type": {"enum": list(ACTION_TYPES)},
            "x": pixel, "y": pixel,
            # A field of another type is ignored; its own type constrains it (``allOf``).
            "text": {"type": ["string", "null"]},
            "direction": {"type": ["string", "null"]},
            "app": {"type": ["string", "null"]},
            "element": {"type": ["string", "null"], "maxLength": 200},
        },
        "allOf": [{"if": {"properties": {"type": {"const": kind}}, "required": ["type"]},
                   "then": rule} for kind, rule in needs.items()],
    }


class TaskIn(Schema):
    instruction: str = Field(..., min_length=1, max_length=2000, pattern=NOT_BLANK)
    device: str = Field(..., min_length=1, max_length=200, description="a device id or name")
    # Strict: ``true`` and ``"5"`` are refused, not read as 1 and 5 (issue 23.7).
    threshold: Annotated[float, Strict()] | None = Field(
        None, ge=0, le=5, description="γ; default the phone's γ (set by admins). End users "
                                      "may raise it; below it only operators and admins "
                                      "(403)")
    backend: str | None = Field(None, max_length=32,
                                description="heuristic, openai or oracle; 404 for another")
    suite: str | None = Field(None, min_length=1, max_length=100,
                              description="operators: a bundled suite (or one of "
                                          "KAIROS_SUITES_DIR), with suite_task; 404 when "
                                          "there is no such suite or task")
    suite_task: str | None = Field(None, min_length=1, max_length=128)

    model_config = ConfigDict(json_schema_extra={
        "dependentRequired": {"suite": ["suite_task"], "suite_task": ["suite"]},
        # The oracle knows the way only within a suite task.
        "if": {"properties": {"backend": {"const": "oracle"}}, "required": ["backend"]},
        "then": {"required": ["suite", "suite_task"],
                 "properties": {"suite": {"type": "string"}, "suite_task": {"type": "string"}}},
    })


class AskIn(Schema):
    question: str = Field(..., min_length=1, max_length=2000, pattern=NOT_BLANK,
                          description="the question, as the user reads it in their chat")
    options: list[Annotated[str, Field(min_length=1, max_length=80, pattern=NOT_BLANK)]] = Field(
        [], max_length=6, description="quick replies the user may click (at most 6)")


class ResolveIn(Schema):
    decision: choices(Decision.values)  # type: ignore[valid-type]
    action: dict[str, Any] | None = Field(
        None, description="for edit: the action to run instead, {type, …}",
        json_schema_extra={"anyOf": [_action_schema(), {"type": "null"}]})
    answer: str | None = Field(None, min_length=1, max_length=2000, pattern=NOT_BLANK,
                               description="for answer")

    model_config = ConfigDict(json_schema_extra={"allOf": [
        {"if": {"properties": {"decision": {"const": "answer"}}, "required": ["decision"]},
         "then": {"required": ["answer"], "properties": {"answer": {"type": "string"}}}},
        {"if": {"properties": {"decision": {"const": "edit"}}, "required": ["decision"]},
         "then": {"required": ["action"], "properties": {"action": _action_schema()}}},
    ]})


class VerdictIn(Schema):
    right: bool = Field(..., description="did Kairos do what you asked?", strict=True)
    note: str | None = Field(None, max_length=2000, description="optional: what went wrong")


class VerdictOut(Out):
    right: bool
    note: str = ""
    at: str


class MessageIn(Schema):
    text: str = Field(..., min_length=1, max_length=2000, pattern=NOT_BLANK)


class InputIn(Schema):
    action: dict[str, Any] = Field(..., description="an action {type, …} in device pixels",
                                   json_schema_extra=_action_schema())
