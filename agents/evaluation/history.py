"""Labelled (raw score, was right) pairs for the ``calibrate`` command.

Two sources (docs/models.md, "Calibration"):

* **tickets** — the installation's own history. A resolved intervention ticket labels
  the step it was raised on: *approve* → the proposed action was right; *edit* or *take
  over* → it was wrong. Only steps that carry a score count, and the score is the
  backend's **uncalibrated** one (``Step.extra["raw_confidence"]``), never the confidence
  a calibration already produced. Steps that acted alone are not used: nothing checked
  them, and only the asked-about steps would be labelled — which is why the evaluation
  source exists.
* **evaluation** — episodes of a backend on a simulated suite
  (:func:`agents.evaluation.episode.run_episode`) at γ = 0 with the oracle operator, so every
  proposal is executed or resolved and labelled right/wrong by the oracle.

Pairs are grouped by (backend, model, estimator): a calibration belongs to one of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from agents.brain.backends.base import Backend, Proposal, StepContext

SOURCE_TICKETS = "tickets"
SOURCE_EVALUATION = "evaluation"


@dataclass(frozen=True)
class Group:
    """Whose scores these are: one calibration per group."""

    backend: str
    model: str = ""
    estimator: str = ""

    def describe(self) -> str:
        parts = [f"backend={self.backend}"]
        if self.model:
            parts.append(f"model={self.model}")
        if self.estimator:
            parts.append(f"estimator={self.estimator}")
        return " ".join(parts)


@dataclass
class LabelledPair:
    score: float
    right: bool
    group: Group
    source: str
    where: str = ""  # ticket id or suite/task, for messages


def raw_score(confidence: float | None, extra: dict[str, Any] | None) -> float | None:
    """The uncalibrated score of a stored proposal, or None when it cannot be known.

    ``extra["raw_confidence"]`` when the backend recorded it; otherwise the stored
    confidence, unless a calibration produced it (``p_right`` present) — then the raw
    score is lost and the step is not used.
    """
    extra = extra or {}
    if "raw_confidence" in extra:
        value = extra.get("raw_confidence")
        return float(value) if isinstance(value, (int, float)) else None
    if "p_right" in extra:
        return None
    return float(confidence) if confidence is not None else None


def _right(ticket: Any, right_for: dict) -> bool:
    """The ticket's stored label (issue 24: an edit or take-over that did what the agent
    proposed is right), else what its decision says."""
    if ticket.agent_right is not None:
        return bool(ticket.agent_right)
    return right_for[ticket.decision]


def ticket_pairs(*, backend: str | None = None, model: str | None = None,
                 estimator: str | None = None) -> list[LabelledPair]:
    """Pairs from resolved intervention tickets: their stored label (``Ticket.agent_right``)."""
    from agents.runtime.models import Decision, Ticket, TicketKind, TicketStatus

    right_for = {Decision.APPROVE: True, Decision.EDIT: False, Decision.TAKEOVER: False}
    tickets = (Ticket.objects.filter(kind=TicketKind.INTERVENTION, status=TicketStatus.RESOLVED,
                                     decision__in=list(right_for), step__isnull=False)
               .exclude(step__proposed_action=None)
               .select_related("step", "task").order_by("created_at"))
    if backend:
        tickets = tickets.filter(task__backend=backend)
    pairs: list[LabelledPair] = []
    for ticket in tickets:
        step = ticket.step
        extra = step.extra if isinstance(step.extra, dict) else {}
        group = Group(ticket.task.backend, str(extra.get("model") or ""),
                      str(extra.get("estimator") or ""))
        if model and group.model != model:
            continue
        if estimator and group.estimator != estimator:
            continue
        score = raw_score(step.confidence, extra)
        if score is None:
            continue
        pairs.append(LabelledPair(score, _right(ticket, right_for), group, SOURCE_TICKETS,
                                  str(ticket.id)))
    return pairs


class RawScores:
    """Wraps a backend so the runner sees its uncalibrated score (and records who scored).

    A backend built from the environment may already apply ``KAIROS_LLM_CALIBRATION``;
    fitting a new calibration on those values would calibrate twice.
    """

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "backend")
        self.model = str(getattr(inner, "model", "") or "")
        self.estimator = str(getattr(inner, "estimator", "") or "")

    def propose(self, ctx: StepContext) -> Proposal:
        proposal = self.inner.propose(ctx)
        extra = proposal.extra or {}
        if extra.get("model"):
            self.model = str(extra["model"])
        if extra.get("estimator"):
            self.estimator = str(extra["estimator"])
        if proposal.action is not None:
            proposal.confidence = raw_score(proposal.confidence, extra)
        return proposal


@dataclass
class EvaluationRun:
    pairs: list[LabelledPair] = field(default_factory=list)
    episodes: int = 0
    skipped: list[str] = field(default_factory=list)


def evaluation_pairs(suites: Iterable[str], backend_name: str, *, max_steps: int = 30,
                     tasks: Iterable[str] | None = None) -> EvaluationRun:
    """Run every task (with a success predicate) of each suite at γ = 0 with the oracle
    operator and label every scored proposal with the oracle's verdict."""
    from agents.brain.backends import get_backend
    from agents.evaluation.episode import OPERATOR_ORACLE, run_episode
    from devices.sim import SimDevice, find_suite

    wanted = set(tasks) if tasks is not None else None
    run = EvaluationRun()
    for suite_name in suites:
        suite = find_suite(suite_name)
        for task in suite.tasks:
            if wanted is not None and task.id not in wanted:
                continue
            if not task.has_predicate:
                run.skipped.append(f"{suite.name}/{task.id}: no success predicate")
                continue
            device = SimDevice(f"calibrate-{task.id}", apps=suite.bundle)
            try:
                inner = get_backend(backend_name, device=device, task=task)
            except TypeError as exc:
                if "unexpected keyword argument" not in str(exc):
                    raise
                inner = get_backend(backend_name)
            backend = RawScores(inner)
            result = run_episode(device, backend, task, threshold=0.0, operator=OPERATOR_ORACLE,
                                 max_steps=min(task.max_steps or max_steps, max_steps))
            run.episodes += 1
            group = Group(backend_name, backend.model, backend.estimator)
            for step in result.steps:
                if step.kind == "clarification" or step.proposed is None:
                    continue
                if step.confidence is None or step.needed is None:
                    continue
                run.pairs.append(LabelledPair(float(step.confidence), not step.needed, group,
                                              SOURCE_EVALUATION, f"{suite.name}/{task.id}"))
    return run


def group_counts(pairs: Iterable[LabelledPair]) -> dict[Group, int]:
    counts: dict[Group, int] = {}
    for pair in pairs:
        counts[pair.group] = counts.get(pair.group, 0) + 1
    return counts


def ticket_evidence_records(*, backend: str | None = None) -> list[dict[str, Any]]:
    """Labelled evidence from resolved intervention tickets, as probe-style records.

    approve → right; edit / take over → wrong unless it did what the agent proposed
    (``Ticket.agent_right``); abort (and answers) are left out — an
    abort says nothing about the action. Only steps whose backend stated evidence
    (``Step.extra["evidence"]``, written by the calibrated gate) count.
    """
    from agents.runtime.models import Decision, Ticket, TicketKind, TicketStatus

    right_for = {Decision.APPROVE: True, Decision.EDIT: False, Decision.TAKEOVER: False}
    tickets = (Ticket.objects.filter(kind=TicketKind.INTERVENTION, status=TicketStatus.RESOLVED,
                                     decision__in=list(right_for), step__isnull=False)
               .select_related("step", "task").order_by("created_at"))
    if backend:
        tickets = tickets.filter(task__backend=backend)
    records = []
    for ticket in tickets:
        extra = ticket.step.extra if isinstance(ticket.step.extra, dict) else {}
        evidence = extra.get("evidence")
        if not isinstance(evidence, dict) or not evidence:
            continue
        records.append({"source": "logs", "backend": ticket.task.backend, "suite": "logs",
                        "task": str(ticket.task_id), "app": ticket.step.app,
                        "evidence": evidence, "right": _right(ticket, right_for),
                        "decision": ticket.decision})
    return records
