"""Confidence estimators' maths and calibration (PAV, Laplace bins, the suggested γ)."""
from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.brain.confidence import (
    Calibration, actions_agree, autonomy_precision, check_estimator, consistency_vote,
    expected_score, fit_binned, fit_calibration, fit_isotonic, logprob_score,
    pool_adjacent_violators, reliability_table, suggest_threshold,
)
from agents.brain.scoring import find_score_span
from devices.actions import Action
from tests.agents.fake_openai import logprob_tokens

W, H = 1080, 2400


def test_unknown_estimators_are_refused_with_the_choices() -> None:
    assert check_estimator(" Critic ") == "critic"
    with pytest.raises(ValueError, match="self, logprob, critic, consistency"):
        check_estimator("vibes")


# --- logprob -------------------------------------------------------------------------

def test_expected_score_weighs_the_score_digits_by_probability() -> None:
    top = [{"token": "4", "logprob": math.log(0.6)}, {"token": "5", "logprob": math.log(0.3)},
           {"token": "3", "logprob": math.log(0.1)}]
    assert expected_score(top) == pytest.approx(4.2)


def test_expected_score_pools_spaced_tokens_and_ignores_non_digits() -> None:
    top = [{"token": " 5", "logprob": math.log(0.25)}, {"token": "5", "logprob": math.log(0.25)},
           {"token": "1", "logprob": math.log(0.5)}, {"token": "the", "logprob": math.log(0.9)},
           {"token": "7", "logprob": 0.0}]
    assert expected_score(top) == pytest.approx(3.0)
    assert expected_score([{"token": "x", "logprob": 0.0}]) is None


def test_logprob_score_reads_the_token_that_holds_the_score() -> None:
    content = "Action: CLICK <point>[[500, 250]]</point>\nScore: 5"
    entries = logprob_tokens(content, {"5": math.log(0.5), "4": math.log(0.5)})
    assert logprob_score(entries, find_score_span(content)) == pytest.approx(4.5)


def test_logprob_score_is_none_without_logprobs_or_a_score() -> None:
    assert logprob_score(None, (3, 4)) is None
    assert logprob_score(logprob_tokens("WAIT", {"4": 0.0}), None) is None


# --- consistency ---------------------------------------------------------------------

def test_consistency_picks_the_most_agreed_action_and_scores_the_agreement() -> None:
    samples = [
        Action("CLICK", x=540, y=600),
        Action("CLICK", x=560, y=640),  # within 14% of the screen: the same step
        Action("PRESS_BACK"),
        None,  # an unparseable sample counts against agreement
        Action("CLICK", x=530, y=590),
    ]
    index, score = consistency_vote(samples, W, H)
    assert index == 0
    assert score == pytest.approx(1 + 4 * 3 / 5)


def test_unanimous_samples_score_five_and_no_usable_sample_scores_one() -> None:
    assert consistency_vote([Action("WAIT")] * 4, W, H) == (0, 5.0)
    assert consistency_vote([None, None], W, H) == (None, 1.0)


def test_agreement_follows_the_action_match_rules() -> None:
    assert actions_agree(Action("TYPE", text=" Hello "), Action("TYPE", text="hello"), W, H)
    assert not actions_agree(Action("SCROLL", direction="UP"), Action("SCROLL", direction="DOWN"), W, H)
    assert not actions_agree(Action("CLICK", x=0, y=0), Action("CLICK", x=1000, y=2000), W, H)
    assert actions_agree(Action("CLICK", x=0, y=0, element="ok"), Action("CLICK", x=1000, y=2000, element="ok"), W, H)
    assert not actions_agree(Action("CLICK", x=500, y=500), Action("LONG_CLICK", x=500, y=500), W, H)


# --- calibration ---------------------------------------------------------------------

def test_pav_pools_adjacent_violators() -> None:
    assert pool_adjacent_violators([1, 3, 2, 4], [1, 1, 1, 1]) == [1, 2.5, 2.5, 4]
    assert pool_adjacent_violators([3, 1], [3, 1]) == [2.5, 2.5]
    assert pool_adjacent_violators([], []) == []


def _history(seed: int = 7) -> list[tuple[float, bool]]:
    """A model whose stated scores mean more than chance but less than they claim."""
    rng = random.Random(seed)
    truth = {1: 0.1, 2: 0.3, 3: 0.55, 4: 0.8, 5: 0.97}
    pairs = []
    for score, p in truth.items():
        for _ in range(200):
            pairs.append((float(score), rng.random() < p))
    return pairs


def test_isotonic_calibration_recovers_accuracy_per_score() -> None:
    calibration = fit_isotonic(_history())
    probabilities = [calibration.probability(s) for s in (1, 2, 3, 4, 5)]
    assert probabilities == sorted(probabilities)
    for p, truth in zip(probabilities, (0.1, 0.3, 0.55, 0.8, 0.97)):
        assert abs(p - truth) < 0.07
    assert calibration.samples == 1000


def test_isotonic_calibration_pools_a_score_that_breaks_monotonicity() -> None:
    pairs = [(3.0, True)] * 8 + [(3.0, False)] * 2 + [(4.0, True)] * 5 + [(4.0, False)] * 5
    calibration = fit_isotonic(pairs)
    # 80% at 3 and 50% at 4 violate "higher score, more trust": pooled to 13/20 (+ Laplace).
    assert calibration.probability(3) == calibration.probability(4) == pytest.approx(14 / 22)


def test_binned_calibration_is_laplace_smoothed() -> None:
    pairs = [(5.0, True), (5.0, True), (1.0, False)]
    calibration = fit_binned(pairs)
    assert calibration.probability(5) == pytest.approx(3 / 4)  # never certain from 2 samples
    assert calibration.probability(1) == pytest.approx(1 / 3)
    assert calibration.method == "binned"


def test_probability_interpolates_between_knots_and_clamps_outside() -> None:
    calibration = Calibration(points=[(1.0, 0.2), (5.0, 0.6)])
    assert calibration.probability(3.0) == pytest.approx(0.4)
    assert calibration.probability(0.0) == 0.2
    assert calibration.probability(9.0) == 0.6
    assert calibration.confidence(5.0) == pytest.approx(1 + 4 * 0.6)
    assert Calibration(points=[]).probability(3) == 0.5


def test_suggest_threshold_is_the_lowest_gamma_reaching_the_target() -> None:
    pairs = [(5.0, True)] * 60 + [(4.0, True)] * 30 + [(4.0, False)] * 10 + [(3.0, False)] * 50
    # ≥5: 61/62 = 0.984; ≥4: 91/102 = 0.89; so 0.95 needs γ = 5 and 0.85 allows γ = 4.
    assert suggest_threshold(pairs, 0.95) == 5.0
    assert suggest_threshold(pairs, 0.85) == 4.0
    assert suggest_threshold(pairs, 0.0) == 3.0


def test_suggest_threshold_is_none_when_no_gamma_reaches_the_target() -> None:
    assert suggest_threshold([(5.0, True), (5.0, False)], 0.95) is None
    # Two right answers are not evidence of 95% precision (Laplace: 3/4).
    assert suggest_threshold([(5.0, True), (5.0, True)], 0.95) is None
    assert suggest_threshold([], 0.95) is None


def test_autonomy_precision_counts_the_steps_that_act_alone() -> None:
    assert autonomy_precision([(5, True), (4, False), (3, False)], 4) == (0.5, 2)
    assert autonomy_precision([(1, True)], 4) == (None, 0)


def test_fit_calibration_puts_gamma_on_the_calibrated_scale() -> None:
    pairs = _history()
    calibration = fit_calibration(pairs, target_autonomy_precision=0.9)
    assert calibration.threshold is not None
    calibrated = [(calibration.confidence(s), r) for s, r in pairs]
    precision, kept = autonomy_precision(calibrated, calibration.threshold)
    assert precision is not None and precision >= 0.9 and kept >= 200
    # γ lies between the calibrated 4 and 5: only score-5 steps act alone.
    assert calibration.confidence(4) < calibration.threshold <= calibration.confidence(5)
    with pytest.raises(ValueError):
        fit_calibration(pairs, method="magic")


def test_calibration_round_trips_through_json() -> None:
    calibration = fit_calibration(_history(), method="binned", estimator="logprob")
    data = json.loads(json.dumps(calibration.to_json()))
    again = Calibration.from_json(data)
    assert again.method == "binned" and again.estimator == "logprob"
    assert again.threshold == calibration.threshold
    for score in (1, 2.5, 4, 5):
        assert again.probability(score) == pytest.approx(calibration.probability(score), abs=1e-6)


@pytest.mark.parametrize("data", [
    None, {}, {"points": "x"}, {"points": [[1, 2]]}, {"points": [[5, 0.1], [1, 0.2]]}, {"points": [[1]]},
])
def test_a_malformed_calibration_is_refused(data: object) -> None:
    with pytest.raises(ValueError):
        Calibration.from_json(data)  # type: ignore[arg-type]


def test_reliability_table_reports_accuracy_and_prediction_per_score() -> None:
    pairs = [(5.0, True), (5.0, False), (2.0, False)]
    rows = reliability_table(pairs, fit_binned(pairs))
    assert rows[0] == {"score": 2.0, "steps": 1, "accuracy": 0.0, "predicted": pytest.approx(1 / 3)}
    assert rows[1]["accuracy"] == 0.5


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 5, allow_nan=False), st.booleans()), max_size=60))
def test_calibrations_are_monotone_probabilities_for_any_history(pairs: list[tuple[float, bool]]) -> None:
    for fit in (fit_isotonic, fit_binned):
        calibration = fit(pairs)
        values = [calibration.probability(s / 4) for s in range(0, 21)]
        assert all(0 < v < 1 for v in values)
        assert all(a <= b + 1e-12 for a, b in zip(values, values[1:]))
