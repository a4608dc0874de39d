"""Calibration and γ on logged work (/review/calibration/).

People's decisions label the handoffs (approve → the agent was right, edit / take over →
wrong; DESIGN.md "Confidence is measured"). Per backend this page shows P(right) per
confidence score, and for each γ what the gate would do: the expected autonomy precision
P(right | score ≥ γ) and the interventions per step P(score < γ). The suggested γ is
``agents.brain.confidence.suggest_threshold`` — the rule ``manage.py calibrate`` prints.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count

from agents.brain.confidence import autonomy_precision, reliability_table, suggest_threshold
from agents.brain.metrics import Proportion, wilson_interval
from agents.runtime.models import Decision, Step, Ticket, TicketKind, TicketStatus
from agents.brain.plot import reliability_svg

GAMMAS = tuple(g / 2 for g in range(2, 11))  # 1, 1.5, …, 5
DEFAULT_TARGET = 0.95


@dataclass
class GammaRow:
    gamma: float
    autonomy_precision: Proportion
    interventions_per_step: float | None
    steps_asked: int


@dataclass
class BackendCalibration:
    backend: str
    pairs: int
    reliability: list[dict[str, Any]]
    gammas: list[GammaRow]
    suggested: float | None
    suggested_precision: Proportion | None
    steps: int


@dataclass
class CalibrationPage:
    target: float
    backends: list[BackendCalibration]
    svg: str
    errors: list[str] = field(default_factory=list)


def decided_pairs() -> dict[str, list[tuple[float, bool]]]:
    """(confidence the gate compared, agent was right) per backend, from resolved
    interventions."""
    rows = (Ticket.objects.filter(kind=TicketKind.INTERVENTION, status=TicketStatus.RESOLVED,
                                  decision__in=(Decision.APPROVE, Decision.EDIT,
                                                Decision.TAKEOVER),
                                  step_confidence__isnull=False)
            .order_by().values_list("task__backend", "step_confidence", "agent_right")
            .iterator(chunk_size=2000))
    out: dict[str, list[tuple[float, bool]]] = {}
    for backend, confidence, right in rows:
        out.setdefault(backend, []).append((float(confidence), bool(right)))
    return out


def confidence_histogram() -> dict[str, dict[float, int]]:
    """How many proposed steps had each confidence, per backend (for interventions/step)."""
    out: dict[str, dict[float, int]] = {}
    for backend, confidence, n in (Step.objects.filter(confidence__isnull=False).order_by()
                                   .values_list("task__backend", "confidence")
                                   .annotate(n=Count("id"))):
        out.setdefault(backend, {})[float(confidence)] = n
    return out


def calibration_page(target: float = DEFAULT_TARGET) -> CalibrationPage:
    pairs_by_backend = decided_pairs()
    histogram = confidence_histogram()
    backends: list[BackendCalibration] = []
    for backend in sorted(set(pairs_by_backend) | set(histogram)):
        pairs = pairs_by_backend.get(backend, [])
        table = reliability_table(pairs)
        for row in table:
            right = round(row["accuracy"] * row["steps"])
            row["low"], row["high"] = wilson_interval(right, row["steps"]) or (None, None)
        counts = histogram.get(backend, {})
        total = sum(counts.values())
        gammas = []
        for gamma in GAMMAS:
            precision, kept = autonomy_precision(pairs, gamma)
            right = round((precision or 0) * kept)
            asked = sum(n for score, n in counts.items() if score < gamma)
            gammas.append(GammaRow(gamma, Proportion(right, kept),
                                   asked / total if total else None, asked))
        suggested = suggest_threshold(pairs, target) if pairs else None
        at_suggested = None
        if suggested is not None:
            precision, kept = autonomy_precision(pairs, suggested)
            at_suggested = Proportion(round((precision or 0) * kept), kept)
        backends.append(BackendCalibration(backend, len(pairs), table, gammas, suggested,
                                           at_suggested, total))
    svg = reliability_svg({b.backend: b.reliability for b in backends if b.reliability},
                          title="P(approved) per confidence score")
    return CalibrationPage(target=target, backends=backends, svg=svg)


# --- the evidence calibrator's versions (issue 24, item 4) ------------------------------

@dataclass
class VersionRow:
    id: int
    backend: str
    number: int
    created_at: Any
    labels: int
    taken: bool
    current: bool
    reason: str
    trigger: str
    digest: str
    brier_new: float | None
    brier_current: float | None
    held_out: int | None
    can_roll_back: bool
    svg: str


def calibrator_versions(limit: int = 50) -> dict[str, list[VersionRow]]:
    """Per backend, its kept versions newest first, each with its held-out reliability
    diagram (what the version's P(right) was worth on the labels held back from its fit)."""
    from agents.runtime.models import CalibratorVersion
    from agents.brain.plot import small_reliability_svg

    out: dict[str, list[VersionRow]] = {}
    for v in CalibratorVersion.objects.order_by("backend", "-number")[:limit]:
        scores = v.scores if isinstance(v.scores, dict) else {}
        out.setdefault(v.backend, []).append(VersionRow(
            id=v.pk, backend=v.backend, number=v.number, created_at=v.created_at,
            labels=v.labels, taken=v.taken, current=v.current, reason=v.reason,
            trigger=v.trigger, digest=v.digest, brier_new=scores.get("brier_new"),
            brier_current=scores.get("brier_current"), held_out=scores.get("held_out"),
            can_roll_back=not v.current and (v.calibrator is not None or v.number == 0),
            svg=small_reliability_svg(scores.get("reliability") or [],
                                      title=f"{v.backend} v{v.number}: reliability on the "
                                            "newest labels held back from its fit")))
    return out
