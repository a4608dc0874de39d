"""P(right) of a proposal that comes from experience, from its evidence (issue 25).

Pure Python. None of the GUI agents that remember experience calibrates a match
(LEARNING.md); this follows the templates that do. COIN (arXiv 2506.20178) lets a system
act alone only while a bound on the error among accepted outputs stays under the target,
and DkNN (Papernot & McDaniel 2018) trusts nearest labelled neighbours by how well that
agreement held on held-out data. So the probability is not a per-entry vote count: it is a
**lower confidence bound on the measured precision of this kind of memory** in this
installation — every earlier memory proposal of the same kind that a person judged
(approved or corrected on a ticket, or that acted alone in a task whose end user gave a
verdict), counted out of sample before the step at hand (lesson 5).

* "agreed" memories (:attr:`agents.experience.memory.Match.kind`: confirmed on the same
  kind of screen, never corrected, clearly the decision that fits best, parameters
  re-bound): the Wilson lower bound (z = 1) of their record. γ = 4 (P ≥ 0.95) is reached
  after about 19 judged right and none wrong, and one wrong among them sets it back by
  about twenty more; γ = 5 (P ≥ 0.99) needs about 99.
* "disputed" memories: the same bound, never above ``WEAK_CAP`` — a decision people
  disagreed about, or one that barely fits, is shown to a person.
* a decision whose parameters could not be re-bound: ``UNBOUND_P``.
* another backend's proposal that people corrected on this kind of screen: at most
  ``CONTRADICTED_CAP`` (:func:`cap_for_contradiction`).

Sensitive steps are asked whatever this says (``agents.loop.decide``).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

Z = 1.0
WEAK_CAP = 0.8
UNBOUND_P = 0.3
CONTRADICTED_CAP = 0.5


def wilson_lower(right: int, total: int, z: float = Z) -> float:
    """Wilson score lower bound of a proportion (0 with no data)."""
    if total <= 0:
        return 0.0
    p = right / total
    denominator = 1 + z * z / total
    centre = p + z * z / (2 * total)
    margin = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total))
    return max(0.0, (centre - margin) / denominator)


def experience_probability(evidence: Mapping[str, Any]) -> float:
    """P(right) for a proposal with ``evidence["rule"] == "experience"``."""
    if not evidence.get("memory_bound", False):
        return UNBOUND_P
    right = int(evidence.get("memory_record_right", 0) or 0)
    wrong = int(evidence.get("memory_record_wrong", 0) or 0)
    bound = wilson_lower(right, right + wrong)
    if evidence.get("memory_kind") != "agreed":
        return min(bound, WEAK_CAP)
    return bound


def cap_for_contradiction(probability: float, evidence: Mapping[str, Any]) -> float:
    """Another backend's proposal that people corrected here before stays low."""
    if int(evidence.get("memory_contradicts", 0) or 0) > 0:
        return min(probability, CONTRADICTED_CAP)
    return probability
