"""Measured confidence (issue 12; DESIGN "Confidence is measured, not asserted").

* :mod:`agents.calibration.probe` — collaborative probing: labelled steps for a backend
  on simulated suites, the oracle as teacher (``manage.py probe``);
* :mod:`agents.calibration.fit` — fitting evidence → P(right) with scikit-learn, ECE,
  leave-one-app-out splits, the γ suggestion (``manage.py calibrate``);
* :mod:`agents.calibration.calibrator` — the fitted artefact and the map onto the
  OS-Kairos 1–5 scale (pure JSON at run time);
* :mod:`agents.calibration.gate` — a backend behind its calibrator, as the gate reads it;
* :mod:`agents.calibration.history` — (raw score, right) pairs from resolved tickets and
  oracle-labelled episodes, for the raw-score calibration of ``agents.confidence``.
"""
from agents.calibration.history import (
    SOURCE_EVALUATION, SOURCE_TICKETS, EvaluationRun, Group, LabelledPair, RawScores,
    evaluation_pairs, group_counts, raw_score, ticket_evidence_records, ticket_pairs,
)

__all__ = [
    "SOURCE_EVALUATION", "SOURCE_TICKETS", "EvaluationRun", "Group", "LabelledPair",
    "RawScores", "evaluation_pairs", "group_counts", "raw_score", "ticket_evidence_records",
    "ticket_pairs",
]
