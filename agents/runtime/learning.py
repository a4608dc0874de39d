"""What the installation learns from its own labels (issue 24, items 4 and 5).

* :func:`gather_labels` — every label the installation holds, in time order: resolved
  interventions (approve = right, edit / take over = wrong; spot checks among them,
  ``reason="spot_check"``) and end users' verdicts on finished tasks;
* **refits** — :func:`refit_backend` fits a new evidence calibrator from those labels
  (``agents.brain.calibration.refit``: time split, taken only if not worse on the newest
  labels), keeps every version (:class:`agents.runtime.models.CalibratorVersion`) and writes the
  taken one where the gate reads it (``<var>/calibrators/<backend>.json``).
  :func:`schedule_due_refits` runs after every resolved ticket and enqueues the Celery task
  ``agents.refit_calibrators`` once ``KAIROS_REFIT_EVERY`` new labels have come in; the
  same task runs nightly (beat in the full stack, a timer in the embedded worker);
* :func:`rollback` — an admin makes any kept version the current one (audited);
* **drift** — :func:`drift_for_app`: an app whose recent confident steps are wrong too
  often asks at every step (``agents.brain.calibration.drift`` states the rule).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Max, Q

from agents.brain.calibration.drift import DEFAULT_TARGET, WINDOW, DriftState, drift_state
from agents.runtime.models import (
    CalibratorVersion, Decision, DecidedBy, Step, StepStatus, Ticket, TicketKind,
    TicketReason, TicketStatus,
)
from agents.runtime.task_names import REFIT_CALIBRATORS, enqueue
from agents.runtime.training.labels import agent_was_right

logger = logging.getLogger(__name__)

SPOT_CHECK = TicketReason.SPOT_CHECK  # issue 24, item 2
TARGET_AUTONOMY_PRECISION = DEFAULT_TARGET  # 0.95, as /review/calibration/'s default
LABEL_DECISIONS = (Decision.APPROVE, Decision.EDIT, Decision.TAKEOVER)
SOURCE_TICKET, SOURCE_SPOT_CHECK, SOURCE_VERDICT = "ticket", "spot_check", "verdict"


@dataclass(frozen=True)
class InstallationLabel:
    """One labelled step: was the agent's proposal right, and was it a confident one
    (its confidence at or above its task's γ: it would have acted, or did act, alone)."""

    at: datetime
    backend: str
    app: str
    device: str
    right: bool
    confident: bool
    source: str
    evidence: dict[str, Any] | None
    step_id: int | None


# --- gathering labels -----------------------------------------------------------------

def ticket_right(ticket: Ticket) -> bool | None:
    """What a resolved ticket says about its step's proposal (None: nothing). The one
    place refits, drift and the measured precision read a ticket's label: item 1's
    corrections (an edit identical to the proposal is an approval) are stored on the
    ticket as ``agent_right``; older tickets without it fall back to the decision."""
    if ticket.agent_right is not None:
        return ticket.agent_right
    return agent_was_right(ticket.decision)


def labelled_tickets():
    return Ticket.objects.filter(kind=TicketKind.INTERVENTION, status=TicketStatus.RESOLVED,
                                 decision__in=LABEL_DECISIONS, step__isnull=False)


def _confident_q() -> Q:
    return Q(reason=SPOT_CHECK) | Q(step_confidence__gte=F("task__threshold"))


def gather_labels(backend: str | None = None, *, with_evidence: bool = False,
                  app: str | None = None, confident_only: bool = False
                  ) -> list[InstallationLabel]:
    """Every label, oldest first (filters: ``backend``, steps with evidence, ``app``,
    confident steps only)."""
    tickets = labelled_tickets().select_related("step", "task", "task__device")
    if backend:
        tickets = tickets.filter(task__backend=backend)
    if with_evidence:
        tickets = tickets.filter(step__extra__has_key="evidence")
    if app is not None:
        tickets = tickets.filter(step__app=app)
    if confident_only:
        tickets = tickets.filter(_confident_q())
    labels = []
    for ticket in tickets.order_by("resolved_at", "id").iterator(chunk_size=2000):
        right = ticket_right(ticket)
        if right is None:
            continue
        step = ticket.step
        extra = step.extra if isinstance(step.extra, dict) else {}
        evidence = extra.get("evidence") if isinstance(extra.get("evidence"), dict) else None
        confident = ticket.reason == SPOT_CHECK or (
            step.confidence is not None and step.confidence >= ticket.task.threshold)
        labels.append(InstallationLabel(
            ticket.resolved_at or ticket.created_at, ticket.task.backend, step.app,
            ticket.task.device.name, right, confident,
            SOURCE_SPOT_CHECK if ticket.reason == SPOT_CHECK else SOURCE_TICKET,
            evidence, step.id))
    labels.extend(verdict_labels(backend, with_evidence=with_evidence, app=app))
    labels.sort(key=lambda label: label.at)
    return labels


# ======================================================================================
# END USERS' VERDICTS (issue 24, item 3) — the one place they enter what is learnt.
# A finished task whose owner said "yes, Kairos did what I asked" (Task.verdict_right
# True) labels each step that acted alone right and confident; a "no" (False) labels
# none of them (which step was wrong is unknown) and keeps them out. Those steps acted
# alone without a ticket, so only the verdict speaks for them.
# ======================================================================================
def verdict_labels(backend: str | None = None, *, with_evidence: bool = False,
                   app: str | None = None) -> list[InstallationLabel]:
    steps = (Step.objects.filter(task__verdict_right=True, status=StepStatus.DONE,
                                 decided_by=DecidedBy.AGENT, tickets__isnull=True)
             .exclude(executed_action=None).select_related("task", "task__device"))
    if backend:
        steps = steps.filter(task__backend=backend)
    if with_evidence:
        steps = steps.filter(extra__has_key="evidence")
    if app is not None:
        steps = steps.filter(app=app)
    out = []
    for step in steps.iterator(chunk_size=2000):
        extra = step.extra if isinstance(step.extra, dict) else {}
        evidence = extra.get("evidence") if isinstance(extra.get("evidence"), dict) else None
        out.append(InstallationLabel(
            step.task.verdict_at or step.executed_at or step.created_at, step.task.backend,
            step.app, step.task.device.name, True, True, SOURCE_VERDICT, evidence, step.id))
    return out


def verdict_label_count(backend: str) -> int:
    """How many verdict labels with evidence ``backend`` has (see :func:`verdict_labels`)."""
    return (Step.objects.filter(task__verdict_right=True, task__backend=backend,
                                status=StepStatus.DONE, decided_by=DecidedBy.AGENT,
                                tickets__isnull=True, extra__has_key="evidence")
            .exclude(executed_action=None).count())
# ======================================================================================


def label_count(backend: str) -> int:
    """Labels with evidence for ``backend``: what a refit can fit on."""
    return (labelled_tickets().filter(task__backend=backend, step__extra__has_key="evidence")
            .count() + verdict_label_count(backend))


def labelled_backends() -> list[str]:
    return sorted(set(labelled_tickets().filter(step__extra__has_key="evidence")
                      .values_list("task__backend", flat=True).distinct()))


# --- refits ---------------------------------------------------------------------------

def refit_every() -> int:
    return int(getattr(settings, "KAIROS_REFIT_EVERY", 50))


def labels_at_last_refit(backend: str) -> int | None:
    return (CalibratorVersion.objects.filter(backend=backend).exclude(trigger="shipped")
            .order_by("-number").values_list("labels", flat=True).first())


def refit_due(backend: str) -> bool:
    """``KAIROS_REFIT_EVERY`` labels (with evidence) came in since the last refit."""
    every = refit_every()
    if every <= 0:
        return False
    return label_count(backend) - (labels_at_last_refit(backend) or 0) >= every


def schedule_due_refits() -> list[str]:
    """Enqueue ``agents.refit_calibrators`` for each backend whose refit is due; runs
    after every resolved ticket (and verdict). Never raises: a broker that is down costs
    this refit only (the nightly one catches up)."""
    try:
        due = [backend for backend in labelled_backends() if refit_due(backend)]
        if due:
            for backend in due:
                enqueue(REFIT_CALIBRATORS, kwargs={"backend": backend, "trigger": "labels"})
        return due
    except Exception:
        logger.exception("could not check or schedule calibrator refits")
        return []


def calibrator_path(backend: str):
    from pathlib import Path

    return Path(settings.VAR_DIR) / "calibrators" / f"{backend}.json"


def _pinned() -> bool:
    """An admin pinned the calibrator (``KAIROS_CALIBRATOR``): refits would not be read."""
    import os

    return bool((os.environ.get("KAIROS_CALIBRATOR") or "").strip())


def current_calibrator(backend: str):
    from agents.brain.calibration.gate import find_calibrator

    return find_calibrator(backend, var_dir=settings.VAR_DIR)


def _baseline(backend: str) -> CalibratorVersion:
    """Version 0: the calibrator in use before the first refit, so it can be rolled
    back to."""
    existing = CalibratorVersion.objects.filter(backend=backend).order_by("number").first()
    if existing is not None:
        return existing
    calibrator = current_calibrator(backend)
    where = ("written by manage.py calibrate" if calibrator_path(backend).exists()
             else "shipped with Kairos")
    reason = (f"in use before the first refit ({where})" if calibrator
              else "no calibrator before the first refit: the backend's own score")
    try:
        with transaction.atomic():
            return CalibratorVersion.objects.create(
                backend=backend, number=0, labels=0, taken=True, current=True,
                reason=reason, trigger="shipped",
                calibrator=calibrator.to_json() if calibrator else None,
                digest=calibrator.version if calibrator else "")
    except IntegrityError:  # another worker wrote it first
        return CalibratorVersion.objects.get(backend=backend, number=0)


def refit_backend(backend: str, trigger: str = "labels") -> CalibratorVersion | None:
    """Fit, judge and keep one new version for ``backend``; make it current (and write
    the file the gate reads) only if it is not worse on the newest labels. None when
    there is nothing new to fit on, or the calibrator is pinned by KAIROS_CALIBRATOR."""
    from django.utils import timezone

    from agents.brain.calibration.fit import Labelled
    from agents.brain.calibration.refit import refit

    if _pinned():
        logger.info("KAIROS_CALIBRATOR is set: no refit of %s", backend)
        return None
    if trigger == "labels" and not refit_due(backend):
        return None  # another worker refitted first
    labels = gather_labels(backend, with_evidence=True)
    if trigger == "nightly" and len(labels) <= (labels_at_last_refit(backend) or 0):
        return None  # nothing new since the last refit
    _baseline(backend)
    samples = [Labelled(label.evidence or {}, label.right, "logs", label.app)
               for label in labels]
    current = current_calibrator(backend)
    outcome = refit(samples, backend, current, meta={
        "created_at": timezone.now().isoformat(timespec="seconds"), "from_logs": True,
        "steps": len(samples), "refit": trigger})
    with transaction.atomic():
        number = (CalibratorVersion.objects.filter(backend=backend)
                  .aggregate(n=Max("number"))["n"] or 0) + 1
        try:
            with transaction.atomic():
                version = CalibratorVersion.objects.create(
                    backend=backend, number=number, labels=len(labels),
                    scores=outcome.scores(), taken=outcome.taken, reason=outcome.reason,
                    calibrator=outcome.calibrator.to_json() if outcome.calibrator else None,
                    digest=outcome.calibrator.version if outcome.calibrator else "",
                    trigger=trigger)
        except IntegrityError:
            return None  # a concurrent refit took this number
        if outcome.taken:
            _make_current(version)
    logger.info("calibrator refit %s v%s: %s", backend, number, outcome.reason)
    return version


def _make_current(version: CalibratorVersion) -> None:
    """Mark ``version`` current and write its calibrator where the gate reads it."""
    from agents.brain.calibration.calibrator import EvidenceCalibrator

    CalibratorVersion.objects.filter(backend=version.backend, current=True).exclude(
        pk=version.pk).update(current=False)
    CalibratorVersion.objects.filter(pk=version.pk).update(current=True)
    version.current = True
    path = calibrator_path(version.backend)
    if version.calibrator is None:
        path.unlink(missing_ok=True)  # back to the shipped one, or none
    else:
        EvidenceCalibrator.from_json(version.calibrator).save(path)


def refit_all(trigger: str = "nightly", backend: str | None = None) -> list[CalibratorVersion]:
    backends = [backend] if backend else labelled_backends()
    done = []
    for name in backends:
        try:
            version = refit_backend(name, trigger)
        except Exception:  # one backend's failure must not stop the others
            logger.exception("refit of the %s calibrator failed", name)
            continue
        if version is not None:
            done.append(version)
    return done


class RollbackError(Exception):
    def __init__(self, detail: str, status: int = 400) -> None:
        super().__init__(detail)
        self.detail, self.status = detail, status


def rollback(actor: Any, version: CalibratorVersion) -> CalibratorVersion:
    """Make ``version`` the calibrator the gate reads (an admin's choice; audited)."""
    from access.audit import record_audit

    if _pinned():
        raise RollbackError("KAIROS_CALIBRATOR pins the calibrator; unset it to choose a "
                            "version here", 409)
    if version.calibrator is None and version.number != 0:
        raise RollbackError(f"version {version.number} was never fitted "
                            f"({version.reason}); there is nothing to roll back to", 409)
    with transaction.atomic():
        before = (CalibratorVersion.objects.select_for_update()
                  .filter(backend=version.backend, current=True).first())
        _make_current(version)
        record_audit(actor, "calibrator.rollback", f"calibrator {version.backend}",
                     {"version": (before.number if before else None, version.number)})
    return version


# --- drift ----------------------------------------------------------------------------

def confident_history(app: str, limit: int = WINDOW) -> list[bool]:
    """The app's most recent confident-step labels, newest first (right = True)."""
    tickets = (labelled_tickets().filter(step__app=app).filter(_confident_q())
               .order_by("-resolved_at", "-id")[:limit])
    labels = [(t.resolved_at, right) for t in tickets
              if (right := ticket_right(t)) is not None]
    labels += [(label.at, label.right) for label in verdict_labels(app=app)]
    labels.sort(key=lambda item: item[0], reverse=True)
    return [right for _, right in labels[:limit]]


def drift_for_app(app: str, target: float = TARGET_AUTONOMY_PRECISION) -> DriftState:
    return drift_state(app, confident_history(app), target=target)


def drifted_apps(target: float = TARGET_AUTONOMY_PRECISION) -> list[DriftState]:
    apps: Iterable[str] = (labelled_tickets().filter(_confident_q()).exclude(step__app="")
                           .values_list("step__app", flat=True).distinct())
    states = [drift_for_app(app, target) for app in sorted(set(apps))]
    return [state for state in states if state.drifted]
