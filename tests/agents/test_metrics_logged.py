"""Proportions estimated from logged decisions: Wilson intervals and the decision metrics."""
from __future__ import annotations

import pytest

from agents.brain.metrics import Proportion, logged_decision_metrics, wilson_interval


def test_the_wilson_interval_matches_the_textbook_values():
    low, high = wilson_interval(1, 3)
    assert (round(low, 4), round(high, 4)) == (0.0615, 0.7923)
    low, high = wilson_interval(95, 100)
    assert (round(low, 4), round(high, 4)) == (0.8882, 0.9785)


def test_the_wilson_interval_stays_inside_zero_and_one_at_the_edges():
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    assert 0 < wilson_interval(0, 10)[1] < 0.35  # none right in 10 is not proof of 0 %
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError):
        wilson_interval(4, 3)


def test_logged_decisions_give_approval_autonomy_and_intervention_precision():
    # (agent was right, confidence at or above γ)
    decided = [(True, False), (False, False), (False, False), (True, True), (False, True)]
    m = logged_decision_metrics(decided)
    assert (m["approval_rate"].successes, m["approval_rate"].n) == (2, 5)
    assert (m["intervention_precision"].successes, m["intervention_precision"].n) == (3, 5)
    assert (m["autonomy_precision"].successes, m["autonomy_precision"].n) == (1, 2)
    assert m["autonomy_precision"].to_json()["value"] == 0.5
    empty = logged_decision_metrics([])
    assert empty["autonomy_precision"].value is None
    assert empty["autonomy_precision"].to_json() == {"value": None, "successes": 0, "n": 0,
                                                     "low": None, "high": None}
    assert Proportion(0, 0).interval is None
