"""P(right) of a proposal that comes from experience, from its evidence (issue 25).

Pure Python. None of the GUI agents that remember experience calibrates a match
(LEARNING.md); this follows the templates that do. COIN (arXiv 2506.20178) lets a system
act alone only while a bound on the error among accepted outputs stays under the target,
and DkNN (Papernot & McDaniel 2018) trusts nearest labelled neighbours by how well that
agreement held on held-out data. So the probability is not a per-entry vote count: it is a
**lower confidence bound on the measured precision of this kind of memory** (lesson 5).

Two records are pooled, as a Beta prior and its data are:

* **the shipped prior** (``shipped/experience_prior.json``, :class:`ExperiencePrior`):
  how often memory proposals of this *bucket* — kind, times confirmed on this kind of
  screen (1, 2, 3+) and instruction similarity (same words, close, loose) — were right,
  measured offline by ``manage.py fit_experience_prior`` with ``evaluate --learn`` on the
  development material (never the held-out suites). Like the shipped evidence
  calibrator, it is what a new installation starts from. Its counts are scaled down to
  at most ``PRIOR_WEIGHT`` (15) observations: other apps, other people — worth a few of
  this installation's own, not hundreds. The layer puts the bucket's counts on the
  evidence (``memory_prior_right``, ``memory_prior_wrong``); an admin turns it off with
  ``KAIROS_EXPERIENCE_PRIOR=0`` (then no prior keys, and only the own record counts);
* **the installation's own record** of that kind of memory (``memory_record_right``,
  ``memory_record_wrong``): every earlier memory proposal of the same kind that a person
  judged (approved or corrected on a ticket, or that acted alone in a task whose end user
  gave a verdict), counted out of sample before the step at hand, weighted fully.

The probability is the Wilson lower bound (z = 1) of the pooled counts. A bucket measured
all right (15 of 15 after scaling) gives 0.94 alone — under γ = 4 (P ≥ 0.95) — and clears
it after four of this installation's own memory proposals of the kind were judged right
(19/20); **one own wrong** pulls it to 0.88 at once, and ~40 more right ones are needed to
earn γ = 4 back; γ = 5 (P ≥ 0.99) needs ~99 right, which the prior never supplies. A
bucket with wrong ones in its record (a memory confirmed once for a close instruction:
88 right, 6 wrong) starts lower and needs far more. Without the prior: ~19 judged right
and none wrong for γ = 4.

* "disputed" memories: the same bound, never above ``WEAK_CAP`` — a decision people
  disagreed about, or one that barely fits, is shown to a person.
* a decision whose parameters could not be re-bound: ``UNBOUND_P``.
* another backend's proposal that people corrected on this kind of screen: at most
  ``CONTRADICTED_CAP`` (:func:`cap_for_contradiction`).

Sensitive steps are asked whatever this says (``agents.brain.loop.decide``).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

Z = 1.0
WEAK_CAP = 0.8
UNBOUND_P = 0.3
CONTRADICTED_CAP = 0.5
# The most observations the shipped prior counts as (see the module docstring).
# 15: the prior alone never reaches γ = 4 (a flawless prior gives 15/16 = 0.94), so this
# installation's own judged memory proposals must add at least four right ones.
PRIOR_WEIGHT = 15.0
SHIPPED_PRIOR = Path(__file__).resolve().parent / "shipped" / "experience_prior.json"
PRIOR_FORMAT = "kairos-experience-prior/1"


def wilson_lower(right: float, total: float, z: float = Z) -> float:
    """Wilson score lower bound of a proportion (0 with no data); counts may be fractional
    (a scaled prior)."""
    if total <= 0:
        return 0.0
    p = min(1.0, max(0.0, right / total))
    denominator = 1 + z * z / total
    centre = p + z * z / (2 * total)
    margin = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total))
    return max(0.0, (centre - margin) / denominator)


def intent_bucket(similarity: float) -> str:
    """"same" (the same intent words), "close" (≥ 0.5) or "loose"."""
    if similarity >= 0.999:
        return "same"
    return "close" if similarity >= 0.5 else "loose"


def bucket(evidence: Mapping[str, Any]) -> str:
    """The prior's bucket of a memory proposal: kind / times confirmed (1, 2, 3+) / how
    alike the instructions are (e.g. ``agreed/c3/same``)."""
    confirmed = max(1, min(3, int(evidence.get("memory_confirmed", 0) or 0)))
    return (f"{evidence.get('memory_kind') or 'disputed'}/c{confirmed}/"
            f"{intent_bucket(float(evidence.get('memory_intent', 0.0) or 0.0))}")


@dataclass
class ExperiencePrior:
    """The shipped record of memory proposals per bucket: ``{bucket: [right, wrong]}``,
    with how and when it was measured (``meta``)."""

    buckets: dict[str, tuple[int, int]] = field(default_factory=dict)
    weight: float = PRIOR_WEIGHT
    meta: dict[str, Any] = field(default_factory=dict)

    def counts(self, evidence: Mapping[str, Any]) -> tuple[float, float]:
        """The bucket's (right, wrong), scaled to at most ``weight`` observations."""
        right, wrong = self.buckets.get(bucket(evidence), (0, 0))
        total = right + wrong
        if total <= 0:
            return 0.0, 0.0
        scale = min(1.0, self.weight / total)
        return round(right * scale, 4), round(wrong * scale, 4)

    def to_json(self) -> dict[str, Any]:
        return {"format": PRIOR_FORMAT, "weight": self.weight, **self.meta,
                "buckets": {k: {"right": r, "wrong": w}
                            for k, (r, w) in sorted(self.buckets.items())}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ExperiencePrior":
        if data.get("format") != PRIOR_FORMAT:
            raise ValueError(f"not a {PRIOR_FORMAT} file")
        buckets = {str(k): (int(v["right"]), int(v["wrong"]))
                   for k, v in dict(data.get("buckets") or {}).items()}
        meta = {k: v for k, v in data.items() if k not in ("format", "weight", "buckets")}
        return cls(buckets, float(data.get("weight", PRIOR_WEIGHT)), meta)


_shipped: ExperiencePrior | None = None


def shipped_prior() -> ExperiencePrior:
    """The prior shipped with Kairos (an empty one if the file is missing)."""
    global _shipped
    if _shipped is None:
        try:
            _shipped = ExperiencePrior.from_json(json.loads(SHIPPED_PRIOR.read_text()))
        except FileNotFoundError:
            _shipped = ExperiencePrior()
    return _shipped


def experience_probability(evidence: Mapping[str, Any]) -> float:
    """P(right) for a proposal from memory (``rule == "experience"`` or
    ``memory_agrees``): the Wilson bound of the prior's counts on the evidence plus the
    installation's own record of the kind."""
    if not evidence.get("memory_bound", False):
        return UNBOUND_P
    right = float(evidence.get("memory_record_right", 0) or 0)
    wrong = float(evidence.get("memory_record_wrong", 0) or 0)
    right += float(evidence.get("memory_prior_right", 0) or 0)
    wrong += float(evidence.get("memory_prior_wrong", 0) or 0)
    bound = wilson_lower(right, right + wrong)
    if evidence.get("memory_kind") != "agreed":
        return min(bound, WEAK_CAP)
    return bound


def cap_for_contradiction(probability: float, evidence: Mapping[str, Any]) -> float:
    """Another backend's proposal that people corrected here before stays low."""
    if int(evidence.get("memory_contradicts", 0) or 0) > 0:
        return min(probability, CONTRADICTED_CAP)
    return probability
