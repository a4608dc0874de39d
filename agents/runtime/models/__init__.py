"""Tasks, steps, tickets, chat messages and training records.

Every status is a TextChoices field and every transition is a conditional UPDATE made in
the modules of ``agents/runtime/services/``, so a race has exactly one winner and a
redelivered Celery task does nothing twice.
"""
from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models


class TaskStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    WAITING_OPERATOR = "waiting_operator", "Waiting for an operator"
    WAITING_USER = "waiting_user", "Waiting for your answer"
    TAKEN_OVER = "taken_over", "Operator in control"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    ABORTED = "aborted", "Aborted"


ACTIVE_TASK_STATUSES = (
    TaskStatus.QUEUED, TaskStatus.RUNNING, TaskStatus.WAITING_OPERATOR,
    TaskStatus.WAITING_USER, TaskStatus.TAKEN_OVER,
)
FINISHED_TASK_STATUSES = (TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.ABORTED)
# A task in one of these holds its phone: one drives a phone at a time, others queue.
DRIVING_TASK_STATUSES = (
    TaskStatus.RUNNING, TaskStatus.WAITING_OPERATOR, TaskStatus.WAITING_USER,
    TaskStatus.TAKEN_OVER,
)


class TaskQuerySet(models.QuerySet):
    def driving(self, device: Any) -> "TaskQuerySet":
        """The task that currently drives ``device`` (a Device or its id): at most one."""
        return self.filter(device=device, status__in=DRIVING_TASK_STATUSES)

    def queued_on(self, device: Any) -> "TaskQuerySet":
        """Tasks waiting for ``device`` to free, first come first served."""
        return self.filter(device=device, status=TaskStatus.QUEUED).order_by("created_at", "id")


class Task(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    instruction = models.TextField()
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tasks"
    )
    device = models.ForeignKey("devices.Device", on_delete=models.PROTECT, related_name="tasks")
    threshold = models.FloatField()
    status = models.CharField(max_length=20, choices=TaskStatus.choices, default=TaskStatus.QUEUED)
    max_steps = models.PositiveIntegerField(default=30)
    backend = models.CharField(max_length=32, default="heuristic")
    # For suite tasks: success is the suite predicate on the final device state.
    suite = models.CharField(max_length=255, blank=True)
    suite_task = models.CharField(max_length=128, blank=True)
    success = models.BooleanField(null=True, blank=True)
    # The index of the next step to run: the idempotency key of the step Celery task.
    cursor = models.PositiveIntegerField(default=0)
    answers = models.JSONField(default=list, blank=True)  # RecAgent Eq. 6 refined goal
    asked = models.JSONField(default=list, blank=True)  # questions already asked
    excluded_elements = models.JSONField(default=list, blank=True)  # RecAgent 3.5
    interventions = models.PositiveIntegerField(default=0)
    clarifications = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # When the agent last moved: a step scheduled or an action started. Every change goes
    # through a conditional UPDATE (which ``auto_now`` does not see), so the stall sweep
    # (agents/runtime/recovery.py) reads this instead of ``updated_at``.
    progressed_at = models.DateTimeField(null=True, blank=True)
    # The owner's answer to "Did Kairos do what you asked?" once the task finished
    # (services.verdicts.record_verdict): None until they answer, at most once.
    verdict_right = models.BooleanField(null=True, blank=True)
    verdict_note = models.TextField(blank=True)
    verdict_at = models.DateTimeField(null=True, blank=True)

    objects = TaskQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.instruction[:60]} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_TASK_STATUSES

    @property
    def queue_position(self) -> int | None:
        """1 for the next task to get the phone, 2 behind it…; None unless queued."""
        if self.status != TaskStatus.QUEUED:
            return None
        ahead = Task.objects.queued_on(self.device_id).filter(
            models.Q(created_at__lt=self.created_at)
            | models.Q(created_at=self.created_at, id__lt=self.id))
        return ahead.count() + 1

    @property
    def goal(self) -> str:
        if not self.answers:
            return self.instruction
        return self.instruction + " (" + "; ".join(self.answers) + ")"


class StepStatus(models.TextChoices):
    PROPOSED = "proposed", "Proposed, about to run"
    WAITING = "waiting", "Waiting for a person"
    READY = "ready", "Decided, about to run"
    EXECUTING = "executing", "Executing"
    DONE = "done", "Done"
    ANSWERED = "answered", "Clarified (no action)"
    CANCELLED = "cancelled", "Cancelled"


class DecidedBy(models.TextChoices):
    AGENT = "agent", "Agent"
    OPERATOR = "operator", "Operator"


class Step(models.Model):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()
    status = models.CharField(max_length=12, choices=StepStatus.choices,
                              default=StepStatus.PROPOSED)
    screenshot = models.FileField(upload_to="steps/%Y/%m/%d/", blank=True)
    screen_width = models.PositiveIntegerField(default=0)
    screen_height = models.PositiveIntegerField(default=0)
    frame = models.PositiveIntegerField(default=0)
    app = models.CharField(max_length=128, blank=True)
    ui_nodes = models.JSONField(default=list, blank=True)
    candidates = models.JSONField(default=list, blank=True)  # recommended element keys
    plan = models.JSONField(default=list, blank=True)
    current_step = models.TextField(blank=True)
    thought = models.TextField(blank=True)
    raw_output = models.TextField(blank=True)
    proposed_action = models.JSONField(null=True, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    executed_action = models.JSONField(null=True, blank=True)
    decided_by = models.CharField(max_length=10, choices=DecidedBy.choices,
                                  default=DecidedBy.AGENT)
    summary = models.CharField(max_length=255, blank=True)  # "CLICK 'Wi-Fi'", for histories
    outcome = models.CharField(max_length=255, blank=True)  # changed | unchanged | error: …
    screen_changed = models.BooleanField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    # The backend's Proposal.extra: model, estimator and the *uncalibrated* score
    # (raw_confidence) that ``calibrate`` fits on, token source, calls, notes.
    extra = models.JSONField(default=dict, blank=True)
    # Which evidence calibrator turned the backend's claim into ``confidence``
    # (``agents.brain.calibration``; "" when the backend's own score was used).
    calibrator_version = models.CharField(max_length=64, blank=True)
    observe_ms = models.FloatField(default=0)
    decide_ms = models.FloatField(default=0)
    execute_ms = models.FloatField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    executed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["task", "index"]
        constraints = [
            models.UniqueConstraint(fields=["task", "index"], name="unique_step_index"),
        ]


    def __str__(self) -> str:
        return f"step {self.index} of {self.task_id}"


class TicketKind(models.TextChoices):
    INTERVENTION = "intervention", "Intervention"
    CLARIFICATION = "clarification", "Clarification"


class TicketReason(models.TextChoices):
    LOW_CONFIDENCE = "low_confidence", "Low confidence"
    SENSITIVE_ACTION = "sensitive_action", "Sensitive action"
    PARSE_ERROR = "parse_error", "Unparseable action"
    REPEATED_FAILURE = "repeated_failure", "Repeated failure"
    MODEL_ERROR = "model_error", "Model error"
    DEVICE_ERROR = "device_error", "Device error"
    AMBIGUOUS_INTENT = "ambiguous_intent", "Ambiguous intent"
    # A step the gate would have let act alone, asked anyway at random (KAIROS_SPOT_CHECK):
    # its decision is an unbiased label of the steps that act alone.
    SPOT_CHECK = "spot_check", "Spot check"
    TAKEOVER_LAPSED = "takeover_lapsed", "Take-over lapsed"
    NO_PROGRESS = "no_progress", "No progress"


class TicketStatus(models.TextChoices):
    OPEN = "open", "Open"
    CLAIMED = "claimed", "Claimed"
    RESOLVED = "resolved", "Resolved"
    EXPIRED = "expired", "Expired"
    CANCELLED = "cancelled", "Cancelled"


class Decision(models.TextChoices):
    APPROVE = "approve", "Approve"
    EDIT = "edit", "Edit"
    TAKEOVER = "takeover", "Take over"
    ANSWER = "answer", "Answer"
    ABORT = "abort", "Abort"


class Ticket(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=16, choices=TicketKind.choices)
    reason = models.CharField(max_length=20, choices=TicketReason.choices)
    status = models.CharField(max_length=10, choices=TicketStatus.choices,
                              default=TicketStatus.OPEN)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="tickets")
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="tickets",
                             null=True, blank=True)
    note = models.TextField(blank=True)  # why it was raised, in words
    question = models.TextField(blank=True)
    options = models.JSONField(default=list, blank=True)
    escalated = models.BooleanField(default=False)  # clarification handed to operators
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="claimed_tickets",
    )
    decision = models.CharField(max_length=10, choices=Decision.choices, blank=True)
    human_action = models.JSONField(null=True, blank=True)
    # The label the decision gives the proposal (agents/runtime/training/labels.py): True when the
    # person did what the agent proposed (approve, an identical edit, a take-over whose
    # first input is the proposed action), False when they replaced it, None when the
    # decision judges no action (answer, abort) or the ticket is not decided.
    agent_right = models.BooleanField(null=True, blank=True)
    answer = models.TextField(blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="resolved_tickets",
    )
    # The confidence of ``step`` when the ticket was opened (a step's proposal never
    # changes): the intervention log filters and sorts 20,000s of tickets by it, which a
    # join to the steps made slow.
    step_confidence = models.FloatField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [
            models.Index(fields=["status", "created_at"]),
            # The admins' intervention log pages newest first, over any filter.
            models.Index(fields=["-created_at", "-id"], name="ticket_newest_first"),
            models.Index(fields=["step_confidence", "created_at"],
                         name="ticket_step_confidence"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} ticket ({self.reason}, {self.status})"

    def save(self, *args, **kwargs) -> None:
        if self._state.adding and self.step_confidence is None and self.step is not None:
            self.step_confidence = self.step.confidence
        super().save(*args, **kwargs)

    @property
    def is_open(self) -> bool:
        return self.status in (TicketStatus.OPEN, TicketStatus.CLAIMED)


class Message(models.Model):
    """The task chat between its owner, the agent and operators."""

    class Sender(models.TextChoices):
        USER = "user", "User"
        AGENT = "agent", "Agent"
        OPERATOR = "operator", "Operator"
        SYSTEM = "system", "System"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="messages")
    sender = models.CharField(max_length=10, choices=Sender.choices)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                               on_delete=models.SET_NULL)
    text = models.TextField()
    ticket = models.ForeignKey(Ticket, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="messages")
    options = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]


class TrainingRecord(models.Model):
    """One handoff, kept as training data: what a model needs to learn from it.

    ``score_label`` is the OS-Kairos Eq. 3 target: the agent's action is right (5) when the
    person approved it, wrong (1) when a person replaced it — "action || score".
    """

    ticket = models.OneToOneField(Ticket, on_delete=models.CASCADE, related_name="training")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="training_records")
    step_index = models.PositiveIntegerField(null=True)
    instruction = models.TextField()
    goal = models.TextField()
    screenshot = models.CharField(max_length=255, blank=True)  # storage path
    ui_nodes = models.JSONField(default=list, blank=True)
    history = models.JSONField(default=list, blank=True)
    plan = models.JSONField(default=list, blank=True)
    agent_action = models.JSONField(null=True, blank=True)
    agent_confidence = models.FloatField(null=True, blank=True)
    human_action = models.JSONField(null=True, blank=True)
    decision = models.CharField(max_length=10, choices=Decision.choices)
    reason = models.CharField(max_length=20, choices=TicketReason.choices)
    question = models.TextField(blank=True)
    answer = models.TextField(blank=True)
    score_label = models.PositiveSmallIntegerField(null=True)
    operator = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                 on_delete=models.SET_NULL)
    operator_seconds = models.FloatField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]


class InstallationSettings(models.Model):
    """Settings an admin changes at run time (one row, pk=1).

    ``default_threshold`` is γ for new tasks on phones without their own; ``None`` keeps
    ``KAIROS_DEFAULT_THRESHOLD`` (the environment is the initial default).
    """

    default_threshold = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")

    class Meta:
        verbose_name = verbose_name_plural = "installation settings"

    def __str__(self) -> str:
        return "installation settings"


class CalibratorVersion(models.Model):
    """One refit of a backend's evidence calibrator from the installation's own labels
    (``agents/runtime/learning.py``; issue 24): kept whether or not it was taken, with why.

    ``current`` marks the version the gate reads now (its JSON is what
    ``<var>/calibrators/<backend>.json`` holds); at most one per backend. Number 0 is the
    calibrator that was in use before the first refit (the shipped one), kept so an admin
    can roll back to it. ``calibrator`` is None for a refit that could not be fitted.
    """

    backend = models.CharField(max_length=32)
    number = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    labels = models.PositiveIntegerField(default=0)  # labels with evidence at the refit
    scores = models.JSONField(default=dict, blank=True)  # held-out Brier / ECE, both fits
    taken = models.BooleanField(default=False)
    current = models.BooleanField(default=False)
    reason = models.TextField(blank=True)
    calibrator = models.JSONField(null=True, blank=True)
    digest = models.CharField(max_length=64, blank=True)  # EvidenceCalibrator.version
    trigger = models.CharField(max_length=32, blank=True)  # labels | nightly | shipped …

    class Meta:
        ordering = ["backend", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["backend", "number"],
                                    name="unique_calibrator_version"),
            models.UniqueConstraint(fields=["backend"], condition=models.Q(current=True),
                                    name="one_current_calibrator"),
        ]

    def __str__(self) -> str:
        return f"{self.backend} calibrator v{self.number}"


from agents.runtime.models.experience import (  # noqa: E402,F401  (issue 25: the experience memory)
    ExperienceEntry, ExperienceEpisode, ExperienceOutcome, ExperienceScreen,
)
