"""Refitting the evidence calibrator from an installation's own labels (issue 24, item 4).

Pure Python (scikit-learn through :mod:`agents.brain.calibration.fit`); the Django side —
gathering labels, keeping versions, writing the file the gate loads — is
``agents/runtime/learning.py``.

The rule, a **time split**: the labels are ordered by when they were given; the newest
``held_out_share`` of them (at least ``MIN_HELD_OUT``) are held back, a candidate is
fitted on the older ones, and both the candidate and the calibrator in use now are scored
on the held-back labels. The candidate replaces the current one only if it is *not worse*
there: its Brier score (mean squared error of P(right) against right = 1 / wrong = 0, a
proper scoring rule, lower is better) is at most the current one's. The newest labels
are the best picture of how the installation's apps look today, so a fit that reads
them worse than the calibrator in use — because the older labels it learnt from contradict
them, or because it is too small to generalise — is kept as a record and not used.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from agents.brain.calibration.calibrator import EvidenceCalibrator, score_to_probability
from agents.brain.calibration.fit import (
    MIN_SAMPLES, Labelled, expected_calibration_error, fit_calibrator, reliability_bins,
    unseen_app_measure,
)

MIN_HELD_OUT = 5
HELD_OUT_SHARE = 0.2


def brier(pairs: Sequence[tuple[float, bool]]) -> float | None:
    """Mean of (P(right) − right)² over ``pairs``; None without pairs."""
    if not pairs:
        return None
    return sum((p - (1.0 if right else 0.0)) ** 2 for p, right in pairs) / len(pairs)


def time_split(samples: Sequence[Labelled], share: float = HELD_OUT_SHARE,
               minimum: int = MIN_HELD_OUT) -> tuple[list[Labelled], list[Labelled]]:
    """(older ones to fit on, newest held back) for samples already in time order."""
    held = max(minimum, math.ceil(len(samples) * share))
    held = min(held, len(samples))
    return list(samples[:len(samples) - held]), list(samples[len(samples) - held:])


def raw_probability(evidence: Any) -> float:
    """What the gate reads without a calibrator: the backend's own 1–5 claim
    (``evidence["raw"]``) read as P(right) on the OS-Kairos scale; 0.5 when absent."""
    raw = evidence.get("raw") if isinstance(evidence, dict) else None
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw):
        return score_to_probability(float(raw))
    return 0.5


@dataclass
class RefitOutcome:
    """A candidate calibrator and how it fared against the current one."""

    calibrator: EvidenceCalibrator | None
    taken: bool
    reason: str
    labels: int
    fitted_on: int
    held_out: int
    brier_new: float | None = None
    brier_current: float | None = None
    ece_new: float | None = None
    ece_current: float | None = None
    reliability: list[dict[str, float]] = field(default_factory=list)

    def scores(self) -> dict[str, Any]:
        return {"brier_new": self.brier_new, "brier_current": self.brier_current,
                "ece_new": self.ece_new, "ece_current": self.ece_current,
                "held_out": self.held_out, "fitted_on": self.fitted_on,
                "reliability": self.reliability}


def refit(samples: Sequence[Labelled], backend: str,
          current: EvidenceCalibrator | None, *, meta: dict[str, Any] | None = None,
          min_samples: int = MIN_SAMPLES) -> RefitOutcome:
    """Fit a candidate on the older labels and judge it against ``current`` (None: the
    backend's own score) on the newest ones (module docstring). ``samples`` in time order."""
    fitting, held = time_split(samples)
    outcome = RefitOutcome(None, False, "", len(samples), len(fitting), len(held))
    try:
        candidate = fit_calibrator(fitting, backend, min_samples=min_samples, meta=meta)
        candidate.unseen_app_p, candidate.unseen_app_map = unseen_app_measure(
            fitting, backend, min_samples=min_samples)
    except ValueError as exc:
        outcome.reason = f"could not be fitted: {exc}"
        return outcome
    outcome.calibrator = candidate

    def judge(probability: Callable[[Labelled], float]) -> list[tuple[float, bool]]:
        return [(probability(s), s.right) for s in held]

    new = judge(lambda s: candidate.probability(s.evidence, s.app or None))
    old = judge(lambda s: current.probability(s.evidence, s.app or None) if current
                else raw_probability(s.evidence))
    outcome.brier_new, outcome.brier_current = brier(new), brier(old)
    outcome.ece_new = expected_calibration_error(new)
    outcome.ece_current = expected_calibration_error(old)
    outcome.reliability = reliability_bins(new)
    against = f"calibrator {current.version}" if current else "the backend's own score"
    assert outcome.brier_new is not None and outcome.brier_current is not None
    if outcome.brier_new <= outcome.brier_current + 1e-12:
        outcome.taken = True
        outcome.reason = (f"on the newest {len(held)} labels its Brier score "
                          f"{outcome.brier_new:.4f} is not worse than {against}'s "
                          f"{outcome.brier_current:.4f}")
    else:
        outcome.reason = (f"on the newest {len(held)} labels its Brier score "
                          f"{outcome.brier_new:.4f} is worse than {against}'s "
                          f"{outcome.brier_current:.4f}")
    return outcome
