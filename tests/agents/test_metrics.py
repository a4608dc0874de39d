"""The metrics on hand-computed examples (DESIGN "Measuring", OS-Kairos App. C.3, StaR A.1)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.brain.metrics import (
    METRIC_KEYS, Confusion, StepLabel, TaskRecord, ToggleOutcome, relative_efficiency,
    step_metrics, summarize, task_metrics, toggle_metrics,
)

CONTRACT_KEYS = {
    "tsr", "type_acc", "sr", "hsr", "intervention_recall", "intervention_precision",
    "autonomy_precision", "autonomy_recall", "re", "interventions_per_task",
    "clarifications_per_task", "steps_per_task", "tasks",
}
# Beyond the contract: the share of judged steps asked about (issue 12's target).
ADDED_KEYS = {"asked_share"}


def labels(caught: int = 0, interrupted: int = 0, missed: int = 0, autonomous: int = 0
           ) -> list[StepLabel]:
    return (
        [StepLabel(needed=True, asked=True)] * caught
        + [StepLabel(needed=False, asked=True)] * interrupted
        + [StepLabel(needed=True, asked=False)] * missed
        + [StepLabel(needed=False, asked=False)] * autonomous
    )


def test_hsr_family_matches_hand_counts() -> None:
    # 3 caught, 1 interrupted, 2 missed, 4 autonomous: 10 labelled steps.
    m = step_metrics(labels(3, 1, 2, 4))
    assert m["hsr"] == pytest.approx(7 / 10)
    assert m["intervention_recall"] == pytest.approx(3 / 5)  # paper IP = TN/(TN+FN)
    assert m["intervention_precision"] == pytest.approx(3 / 4)
    assert m["autonomy_recall"] == pytest.approx(4 / 5)  # paper AP = TP/(TP+FP)
    assert m["autonomy_precision"] == pytest.approx(4 / 6)
    # The share of judged steps a person was asked about (issue 12's "≤ 50 % of steps").
    assert m["asked_share"] == pytest.approx(4 / 10)


def test_unjudged_steps_are_left_out_of_the_confusion_counts() -> None:
    steps = labels(1, 0, 0, 1) + [StepLabel(needed=None, asked=True)]
    assert Confusion.of(steps).total == 2
    assert step_metrics(steps)["hsr"] == 1.0


def test_type_and_sr_are_shares_of_judged_steps() -> None:
    steps = [
        StepLabel(False, False, type_match=True, action_match=True),
        StepLabel(True, False, type_match=True, action_match=False),
        StepLabel(True, False, type_match=False, action_match=False),
        StepLabel(None, True),  # a clarification: no action to judge
    ]
    m = step_metrics(steps)
    assert m["type_acc"] == pytest.approx(2 / 3)
    assert m["sr"] == pytest.approx(1 / 3)


def test_no_step_needing_help_leaves_intervention_recall_undefined() -> None:
    m = step_metrics(labels(interrupted=2, autonomous=3))
    assert m["intervention_recall"] is None
    assert m["intervention_precision"] == 0.0
    assert m["autonomy_recall"] == pytest.approx(3 / 5)
    assert m["autonomy_precision"] == 1.0
    assert m["hsr"] == pytest.approx(3 / 5)


def test_every_step_asked_leaves_autonomy_precision_undefined() -> None:
    m = step_metrics(labels(caught=2, interrupted=3))
    assert m["autonomy_precision"] is None
    assert m["autonomy_recall"] == 0.0
    assert m["intervention_recall"] == 1.0
    assert m["intervention_precision"] == pytest.approx(2 / 5)


def test_empty_suite_gives_zero_tasks_null_rates_and_no_crash() -> None:
    m = summarize([])
    assert set(m) == CONTRACT_KEYS | ADDED_KEYS
    assert m["tasks"] == 0
    for key in ("tsr", "type_acc", "sr", "hsr", "intervention_recall",
                "intervention_precision", "autonomy_precision", "autonomy_recall", "re",
                "asked_share"):
        assert m[key] is None, key
    assert m["interventions_per_task"] == m["clarifications_per_task"] == 0.0
    assert m["steps_per_task"] == 0.0
    json.dumps(m)  # JSON-ready


def test_summarize_uses_exactly_the_contract_keys_in_order() -> None:
    task = TaskRecord("t", True, 2, labels=tuple(labels(autonomous=2)))
    assert tuple(summarize([task])) == METRIC_KEYS
    assert set(METRIC_KEYS) == CONTRACT_KEYS | ADDED_KEYS


def test_task_metrics_on_a_small_suite() -> None:
    tasks = [
        TaskRecord("a", True, steps=4, interventions=2, clarifications=0, optimal_steps=3),
        TaskRecord("b", True, steps=2, interventions=0, clarifications=1, optimal_steps=2),
        TaskRecord("c", False, steps=6, interventions=1, clarifications=0, optimal_steps=2),
        TaskRecord("d", None, steps=0, interventions=0, clarifications=1),  # no predicate
    ]
    m = task_metrics(tasks)
    assert m["tasks"] == 4
    assert m["tsr"] == pytest.approx(2 / 4)  # None is not a success
    assert m["re"] == pytest.approx((3 / 4 + 2 / 2) / 2)  # succeeded tasks only
    assert m["interventions_per_task"] == pytest.approx(3 / 4)
    assert m["clarifications_per_task"] == pytest.approx(2 / 4)
    assert m["steps_per_task"] == pytest.approx(12 / 4)


def test_re_is_null_when_no_task_succeeded() -> None:
    assert task_metrics([TaskRecord("a", False, 3, optimal_steps=2)])["re"] is None


def test_relative_efficiency_edges() -> None:
    assert relative_efficiency(TaskRecord("a", True, 2, optimal_steps=4)) == 1.0  # clamped
    assert relative_efficiency(TaskRecord("a", True, 0, optimal_steps=0)) == 1.0
    assert relative_efficiency(TaskRecord("a", True, 3, optimal_steps=None)) is None
    assert relative_efficiency(TaskRecord("a", False, 3, optimal_steps=3)) is None


def test_duck_typed_step_records_count_like_step_labels() -> None:
    records = [SimpleNamespace(needed=True, asked=True), SimpleNamespace(needed=False, asked=False)]
    assert step_metrics(records)["hsr"] == 1.0
    assert step_metrics(records)["sr"] is None  # no action_match attribute: not judged


def test_per_task_json_has_the_contract_fields() -> None:
    entry = TaskRecord("a", None, 3, 1, 2).per_task_json()
    assert entry == {"task": "a", "success": False, "steps": 3, "interventions": 1,
                     "clarifications": 2, "dead_end": False}


def test_toggle_metrics_match_star_definitions() -> None:
    samples = [
        # positives: right click; click elsewhere; COMPLETE (a false negative)
        ToggleOutcome(True, "CLICK", type_match=True, match=True),
        ToggleOutcome(True, "CLICK", type_match=True, match=False),
        ToggleOutcome(True, "COMPLETE", type_match=False, match=False),
        # negatives: COMPLETE (right); click on the toggle (flips it); click elsewhere
        ToggleOutcome(False, "COMPLETE", type_match=True, match=True),
        ToggleOutcome(False, "CLICK", type_match=False, match=False, inverse_match=True),
        ToggleOutcome(False, "CLICK", type_match=False, match=False, inverse_match=False),
        ToggleOutcome(False, None, type_match=False, match=False),
    ]
    m = toggle_metrics(samples)
    assert m["o_tmr"] == pytest.approx(3 / 7)
    assert m["o_amr"] == pytest.approx(2 / 7)
    assert m["p_tmr"] == pytest.approx(2 / 3)
    assert m["p_amr"] == pytest.approx(1 / 3)
    assert m["p_fnr"] == pytest.approx(1 / 3)
    assert m["n_amr"] == pytest.approx(1 / 4)
    assert m["n_fptr"] == pytest.approx(2 / 4)
    assert m["n_fpr"] == pytest.approx(1 / 4)
    assert (m["positives"], m["negatives"]) == (3, 4)


def test_toggle_metrics_without_negatives_are_null_not_zero() -> None:
    m = toggle_metrics([ToggleOutcome(True, "CLICK", True, True)])
    assert m["n_amr"] is None and m["n_fpr"] is None
    assert m["p_amr"] == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([True, False, None]), st.booleans()), max_size=40))
def test_rates_are_fractions_or_null_and_hsr_weighs_the_two_recalls(
    pairs: list[tuple[bool | None, bool]],
) -> None:
    steps = [StepLabel(needed=needed, asked=asked) for needed, asked in pairs]
    m = step_metrics(steps)
    for key in ("hsr", "intervention_recall", "intervention_precision",
                "autonomy_precision", "autonomy_recall"):
        assert m[key] is None or 0.0 <= m[key] <= 1.0
    c = Confusion.of(steps)
    needed, fine = c.caught + c.missed, c.autonomous + c.interrupted
    if needed and fine:
        # HSR is the two recalls weighted by how many steps needed help
        expected = (m["intervention_recall"] * needed + m["autonomy_recall"] * fine) / c.total
        assert m["hsr"] == pytest.approx(expected)
