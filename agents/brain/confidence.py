"""Confidence estimators and their calibration.

Pure Python. OS-Kairos (Sec. 4.2, Eq. 3–4) has the agent emit a 1–5 score with every
action and asks a person when ``score < γ``. A prompted model's stated score is often
over-confident, so a deployment chooses how the 1–5 confidence is obtained:

* ``self`` — the score the model wrote (Eq. 3 "action || score");
* ``logprob`` — the expected score under the model's own distribution over the score
  token (its top logprobs), which separates "surely 5" from "5 or maybe 3";
* ``critic`` — a second call with the OS-Kairos critic scoring prompt (App. C.1, Fig. 16);
* ``consistency`` — agreement of k sampled actions, mapped to 1–5.

Whatever the estimator, its raw output is then optionally mapped through a
:class:`Calibration` fitted on past (raw score, was the action right) pairs, so that γ
means the same thing for every model: calibrated confidence = 1 + 4 · P(right | raw).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from agents.brain.matching import actions_match
from devices.actions import POINT_TYPES, Action

ESTIMATORS: tuple[str, ...] = ("self", "logprob", "critic", "consistency")
MIN_SCORE = 1.0
MAX_SCORE = 5.0

_DIGIT_RE = re.compile(r"^\s*([1-5])(?:\.0)?\s*$")


def check_estimator(name: str) -> str:
    """The estimator's canonical name; ``ValueError`` naming the choices otherwise."""
    key = (name or "").strip().lower()
    if key not in ESTIMATORS:
        raise ValueError(f"unknown confidence estimator '{name}'; choose one of {', '.join(ESTIMATORS)}")
    return key


# --- logprob ---------------------------------------------------------------------------

def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def expected_score(top_logprobs: Iterable[Any]) -> float | None:
    """E[score] over the candidate tokens that are the digits 1–5, renormalised.

    ``top_logprobs`` are ``{"token", "logprob"}`` entries for one position. Tokens such
    as ``" 4"`` and ``"4"`` are pooled. ``None`` when no candidate is a score digit.
    """
    mass: dict[int, float] = {}
    for entry in top_logprobs:
        token = _get(entry, "token")
        logprob = _get(entry, "logprob")
        if not isinstance(token, str) or not isinstance(logprob, (int, float)):
            continue
        match = _DIGIT_RE.match(token)
        if not match or logprob != logprob:
            continue
        mass[int(match.group(1))] = mass.get(int(match.group(1)), 0.0) + math.exp(min(0.0, logprob))
    total = sum(mass.values())
    if total <= 0:
        return None
    return sum(digit * p for digit, p in mass.items()) / total


def logprob_score(content_logprobs: Sequence[Any] | None, score_span: tuple[int, int] | None) -> float | None:
    """The expected score at the token that holds the score's first digit.

    ``content_logprobs`` is ``choice.logprobs.content`` (one entry per generated token,
    each with ``token`` and ``top_logprobs``); ``score_span`` is where the score's digits
    sit in the concatenated token text (``scoring.find_score_span``).
    """
    if not content_logprobs or score_span is None:
        return None
    offset = 0
    start = score_span[0]
    for entry in content_logprobs:
        token = _get(entry, "token") or ""
        if not isinstance(token, str):
            return None
        end = offset + len(token)
        if offset <= start < end:
            candidates = list(_get(entry, "top_logprobs") or [])
            # The sampled token itself may be missing from top_logprobs on some servers.
            candidates.append({"token": token, "logprob": _get(entry, "logprob", 0.0)})
            seen: set[str] = set()
            unique = []
            for cand in candidates:
                tok = _get(cand, "token")
                if isinstance(tok, str) and tok not in seen:
                    seen.add(tok)
                    unique.append(cand)
            return expected_score(unique)
        offset = end
    return None


# --- consistency -----------------------------------------------------------------------

def actions_agree(
    a: Action, b: Action, width: int, height: int, *, toggle: bool = False
) -> bool:
    """Whether two sampled proposals are the same step.

    Same element, or StaR App. A.2's action-match rule (``agents.brain.matching``: 14% of the
    screen for clicks, 4% for toggles; TYPE trimmed and lower-cased; OPENAPP stemmed
    substring) — the same definition evaluation uses, so "agreement" means "would be
    scored as the same action".
    """
    if a.type != b.type:
        return False
    if a.type in POINT_TYPES and a.element and b.element and a.element == b.element:
        return True
    _, match = actions_match(a, b, screen=(width, height), toggle=toggle)
    return match


def consistency_vote(
    actions: Sequence[Action | None], width: int, height: int
) -> tuple[int | None, float]:
    """The index of the most agreed-on sample and its 1–5 agreement score.

    Unparseable samples (``None``) count in k but agree with nothing, so a model that
    answers garbage half the time cannot look confident. Score = 1 + 4 · (votes / k).
    """
    k = len(actions)
    best_index: int | None = None
    best_votes = 0
    for i, action in enumerate(actions):
        if action is None:
            continue
        votes = sum(
            1 for other in actions
            if other is not None and actions_agree(action, other, width, height)
        )
        if votes > best_votes:
            best_index, best_votes = i, votes
    if k == 0 or best_index is None:
        return None, MIN_SCORE
    return best_index, MIN_SCORE + (MAX_SCORE - MIN_SCORE) * best_votes / k


# --- calibration -----------------------------------------------------------------------

Pair = tuple[float, bool]


def _clean_pairs(pairs: Iterable[Sequence[Any]]) -> list[Pair]:
    out: list[Pair] = []
    for pair in pairs:
        score, right = float(pair[0]), bool(pair[1])
        if math.isfinite(score):
            out.append((score, right))
    return out


def _grouped(pairs: list[Pair]) -> list[tuple[float, int, int]]:
    """(score, n, right) per distinct score, ascending."""
    groups: dict[float, list[int]] = {}
    for score, right in pairs:
        g = groups.setdefault(score, [0, 0])
        g[0] += 1
        g[1] += int(right)
    return [(s, g[0], g[1]) for s, g in sorted(groups.items())]


def pool_adjacent_violators(values: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Weighted isotonic (non-decreasing) regression of ``values`` by PAV.

    Returns one fitted value per input, in the same order. Pure Python, O(n).
    """
    blocks: list[list[float]] = []  # [weighted mean, total weight, count]
    for value, weight in zip(values, weights):
        blocks.append([float(value), float(weight), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean2, w2, c2 = blocks.pop()
            mean1, w1, c1 = blocks.pop()
            w = w1 + w2
            blocks.append([(mean1 * w1 + mean2 * w2) / w if w else (mean1 + mean2) / 2, w, c1 + c2])
    fitted: list[float] = []
    for mean, _, count in blocks:
        fitted.extend([mean] * int(count))
    return fitted


@dataclass
class Calibration:
    """Raw confidence → probability that the proposed action is right.

    ``points`` are (raw score, probability) knots, ascending in both; between knots the
    probability is interpolated linearly, outside them it is held constant. The backend
    reports ``confidence(raw)`` = 1 + 4 · probability, so γ keeps its 1–5 meaning.
    ``threshold`` is the γ (on that calibrated scale) that reached the target autonomy
    precision on the fitting history, or ``None`` when none did.
    """

    points: list[tuple[float, float]]
    method: str = "isotonic"  # "isotonic" | "binned"
    estimator: str = "self"
    samples: int = 0
    threshold: float | None = None
    target_autonomy_precision: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def probability(self, raw: float) -> float:
        """P(right | raw score)."""
        if not self.points:
            return 0.5
        raw = float(raw)
        if raw != raw:
            return self.points[0][1]
        if raw <= self.points[0][0]:
            return self.points[0][1]
        if raw >= self.points[-1][0]:
            return self.points[-1][1]
        for (x0, p0), (x1, p1) in zip(self.points, self.points[1:]):
            if x0 <= raw <= x1:
                if x1 == x0:
                    return p1
                return p0 + (p1 - p0) * (raw - x0) / (x1 - x0)
        return self.points[-1][1]

    def confidence(self, raw: float) -> float:
        """The calibrated 1–5 confidence the gate compares with γ."""
        return MIN_SCORE + (MAX_SCORE - MIN_SCORE) * self.probability(raw)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "method": self.method,
            "estimator": self.estimator,
            "samples": self.samples,
            "points": [[round(x, 6), round(p, 6)] for x, p in self.points],
            "threshold": self.threshold,
            "target_autonomy_precision": self.target_autonomy_precision,
            "extra": self.extra,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Calibration":
        """Inverse of :meth:`to_json`; ``ValueError`` on a malformed object."""
        if not isinstance(data, dict) or not isinstance(data.get("points"), list):
            raise ValueError("a calibration is a JSON object with a 'points' list")
        try:
            points = [(float(x), float(p)) for x, p in data["points"]]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bad calibration points: {exc}") from None
        if any(not 0.0 <= p <= 1.0 for _, p in points):
            raise ValueError("calibration probabilities must lie in [0, 1]")
        if points != sorted(points):
            raise ValueError("calibration points must be sorted by score")
        threshold = data.get("threshold")
        target = data.get("target_autonomy_precision")
        return cls(
            points=points,
            method=str(data.get("method", "isotonic")),
            estimator=str(data.get("estimator", "self")),
            samples=int(data.get("samples", 0)),
            threshold=None if threshold is None else float(threshold),
            target_autonomy_precision=None if target is None else float(target),
            extra=dict(data.get("extra") or {}),
        )


def fit_binned(pairs: Iterable[Sequence[Any]], *, estimator: str = "self") -> Calibration:
    """One knot per distinct raw score: (right + 1) / (n + 2) (Laplace's rule).

    Smoothing keeps a score seen twice and right twice from claiming certainty. Knots are
    then made monotone with PAV, because a higher raw score must never mean less trust.
    """
    groups = _grouped(_clean_pairs(pairs))
    if not groups:
        return Calibration(points=[], method="binned", estimator=estimator)
    smoothed = [(right + 1) / (n + 2) for _, n, right in groups]
    monotone = pool_adjacent_violators(smoothed, [n + 2 for _, n, _ in groups])
    points = [(score, p) for (score, _, _), p in zip(groups, monotone)]
    return Calibration(points=points, method="binned", estimator=estimator,
                       samples=sum(n for _, n, _ in groups))


def fit_isotonic(pairs: Iterable[Sequence[Any]], *, estimator: str = "self") -> Calibration:
    """Isotonic regression of was-right on raw score by PAV, then Laplace-smoothed.

    PAV pools adjacent scores until accuracy is non-decreasing; each pooled block's
    probability is (right + 1) / (n + 2), and a final PAV pass keeps the smoothed values
    monotone (smoothing pulls small blocks harder towards ½).
    """
    groups = _grouped(_clean_pairs(pairs))
    if not groups:
        return Calibration(points=[], method="isotonic", estimator=estimator)
    means = [right / n for _, n, right in groups]
    fitted = pool_adjacent_violators(means, [n for _, n, _ in groups])
    # Recover the pooled blocks: runs of equal fitted values.
    smoothed: list[float] = []
    weights: list[float] = []
    i = 0
    while i < len(groups):
        j = i
        while j + 1 < len(groups) and fitted[j + 1] == fitted[i]:
            j += 1
        n = sum(g[1] for g in groups[i: j + 1])
        right = sum(g[2] for g in groups[i: j + 1])
        smoothed.extend([(right + 1) / (n + 2)] * (j - i + 1))
        weights.extend([(n + 2) / (j - i + 1)] * (j - i + 1))
        i = j + 1
    monotone = pool_adjacent_violators(smoothed, weights)
    points = [(score, p) for (score, _, _), p in zip(groups, monotone)]
    return Calibration(points=points, method="isotonic", estimator=estimator,
                       samples=sum(n for _, n, _ in groups))


def autonomy_precision(pairs: Iterable[Sequence[Any]], threshold: float) -> tuple[float | None, int]:
    """P(right | score ≥ threshold) and how many steps would have acted alone."""
    kept = [right for score, right in _clean_pairs(pairs) if score >= threshold]
    if not kept:
        return None, 0
    return sum(kept) / len(kept), len(kept)


def suggest_threshold(
    pairs: Iterable[Sequence[Any]], target_autonomy_precision: float = 0.95
) -> float | None:
    """The lowest γ whose autonomous steps (score ≥ γ) are right often enough.

    The gate asks a person when ``score < γ`` (OS-Kairos Eq. 4), so the steps that act
    alone are those with ``score ≥ γ``; the lowest γ whose Laplace-smoothed precision
    (right + 1) / (n + 2) reaches the target leaves the most autonomy. Smoothing makes a
    tiny, lucky set of high scores insufficient evidence. ``None`` when no γ reaches the
    target on this history: ask at every step, or lower the target.
    """
    clean = _clean_pairs(pairs)
    for candidate in sorted({score for score, _ in clean}):
        kept = [right for score, right in clean if score >= candidate]
        if (sum(kept) + 1) / (len(kept) + 2) >= target_autonomy_precision:
            return candidate
    return None


def fit_calibration(
    pairs: Iterable[Sequence[Any]],
    *,
    method: str = "isotonic",
    estimator: str = "self",
    target_autonomy_precision: float = 0.95,
) -> Calibration:
    """Fit a calibration and the γ that reaches the target, both on the calibrated scale.

    This is what the ``calibrate`` command runs over the logged (raw confidence,
    action was right) pairs of one backend + estimator.
    """
    clean = _clean_pairs(pairs)
    if method == "isotonic":
        calibration = fit_isotonic(clean, estimator=estimator)
    elif method == "binned":
        calibration = fit_binned(clean, estimator=estimator)
    else:
        raise ValueError(f"unknown calibration method '{method}'; choose isotonic or binned")
    calibrated = [(calibration.confidence(score), right) for score, right in clean]
    calibration.threshold = suggest_threshold(calibrated, target_autonomy_precision)
    calibration.target_autonomy_precision = target_autonomy_precision
    return calibration


def reliability_table(
    pairs: Iterable[Sequence[Any]], calibration: Calibration | None = None
) -> list[dict[str, float]]:
    """Per raw score: steps, observed accuracy and predicted probability (for plots)."""
    rows = []
    for score, n, right in _grouped(_clean_pairs(pairs)):
        row = {"score": score, "steps": n, "accuracy": right / n}
        if calibration is not None:
            row["predicted"] = calibration.probability(score)
        rows.append(row)
    return rows
