"""The calibrated confidence the gate reads: a backend wrapped with its calibrator.

Pure Python. Every driver of an episode (the Celery step in ``agents/runtime/services/steps.py``,
``run_task``, ``evaluate``) builds its backend through :func:`calibrated_backend`, so the
gate (``agents.brain.loop.decide``) compares γ with the calibrated score everywhere. Which
calibrator a backend gets (:func:`find_calibrator`):

1. ``KAIROS_CALIBRATOR``: ``off`` (none: the backend's own 1–5 claim), or a file path;
2. ``<var>/calibrators/<backend>.json`` — what ``manage.py calibrate`` last wrote;
3. ``agents/brain/calibration/shipped/<backend>.json`` — shipped with Kairos (the heuristic's).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from agents.brain.backends.base import Backend, Proposal, StepContext
from agents.brain.calibration.calibrator import EvidenceCalibrator, probability_to_score
from agents.brain.calibration.experience import cap_for_contradiction, experience_probability

SHIPPED_DIR = Path(__file__).resolve().parent / "shipped"
OFF = "off"


class CalibratorError(ValueError):
    """A configured calibrator cannot be used (names the file and the reason)."""


def find_calibrator(backend: str, *, var_dir: str | Path | None = None,
                    env: Mapping[str, str] | None = None) -> EvidenceCalibrator | None:
    """The calibrator for ``backend`` by the order in the module docstring, or None."""
    env = os.environ if env is None else env
    setting = (env.get("KAIROS_CALIBRATOR") or "").strip()
    if setting.lower() == OFF:
        return None
    candidates: list[Path] = []
    if setting:
        candidates.append(Path(setting))
    else:
        if var_dir is not None:
            candidates.append(Path(var_dir) / "calibrators" / f"{backend}.json")
        candidates.append(SHIPPED_DIR / f"{backend}.json")
    for path in candidates:
        if path.exists() or setting:
            calibrator = _load_cached(path)
            if calibrator.backend != backend:
                if setting:
                    raise CalibratorError(f"{path}: fitted for backend '{calibrator.backend}', "
                                          f"not '{backend}'")
                continue
            return calibrator
    return None


_CACHE: dict[tuple[str, int], EvidenceCalibrator] = {}


def _load_cached(path: Path) -> EvidenceCalibrator:
    """Load ``path`` once per version of the file (every step of every task asks)."""
    try:
        key = (str(path), path.stat().st_mtime_ns)
    except OSError as exc:
        raise CalibratorError(f"{path}: cannot read ({exc.strerror})") from None
    if key not in _CACHE:
        try:
            _CACHE[key] = EvidenceCalibrator.load(path)
        except ValueError as exc:
            raise CalibratorError(str(exc)) from None
    return _CACHE[key]


class CalibratedBackend:
    """``inner``'s proposals with the confidence replaced by the calibrated score.

    ``Proposal.extra`` keeps the backend's own claim (``raw_confidence``), ``p_right``,
    ``calibrator_version`` and the ``evidence`` — what the step records and ``calibrate
    --from-logs`` refits on. Proposals without an action (questions, parse errors) pass
    through untouched.
    """

    def __init__(self, inner: Backend, calibrator: EvidenceCalibrator) -> None:
        self.inner = inner
        self.calibrator = calibrator
        self.name = getattr(inner, "name", calibrator.backend)

    def __getattr__(self, name: str) -> Any:  # model, estimator … of the inner backend
        return getattr(self.inner, name)

    def propose(self, ctx: StepContext) -> Proposal:
        proposal = self.inner.propose(ctx)
        if proposal.action is None or proposal.confidence is None:
            return proposal
        evidence = dict(proposal.evidence)
        evidence.setdefault("action", proposal.action.type)
        evidence.setdefault("raw", float(proposal.extra.get("raw_confidence", proposal.confidence)
                                         or proposal.confidence))
        app = ctx.observation.app
        installed = tuple(info.package for info in ctx.apps if info.package)
        if evidence.get("rule") == "experience":
            # A remembered decision: its P(right) is the measured record of its kind of
            # memory in this installation, not the cold-start model (issue 25).
            probability = experience_probability(evidence)
        else:
            probability = cap_for_contradiction(
                self.calibrator.probability(evidence, app, installed), evidence)
            if evidence.get("memory_agrees"):
                # the backend proposes what people confirmed on this kind of screen
                probability = max(probability, experience_probability(evidence))
        proposal.extra.setdefault("raw_confidence", proposal.confidence)
        proposal.extra["p_right"] = round(probability, 4)
        proposal.extra["calibrator_version"] = self.calibrator.version
        proposal.extra["evidence"] = evidence
        unfamiliar = (None if evidence.get("rule") == "experience"
                      else self.calibrator.unfamiliar(evidence, app, installed))
        if unfamiliar:
            proposal.extra["unfamiliar"] = unfamiliar
        proposal.confidence = round(probability_to_score(probability), 4)
        return proposal


def calibrated_backend(backend: Backend, calibrator: EvidenceCalibrator | None) -> Backend:
    """``backend`` behind ``calibrator``, or unchanged when there is none."""
    if calibrator is None:
        return backend
    return CalibratedBackend(backend, calibrator)  # type: ignore[return-value]
