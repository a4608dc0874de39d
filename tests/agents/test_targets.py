"""The heuristic baseline's targets at γ = 4 on every bundled suite (oracle operator).

A person must be asked whenever needed (TSR = 1.0, intervention recall ≥ 0.90), the agent
must be right when it acts alone (autonomy precision ≥ 0.95), and it must not lean on
people for most steps (interventions ≤ 40 % of steps). These are what an admin tuning γ
relies on; a change to the heuristic, the guards or the simulator that breaks one fails here.

These are the heuristic's own claims (``calibration="off"``). The product's gate reads the
shipped calibrator by default (issue 12), which asks more on these suites — 28–42% of
steps at γ = 4 out of sample, docs/evaluation.md "Calibrated confidence" — while staying
as safe: that default is held to TSR 1.0 and autonomy precision ≥ 0.97 below.
"""
from __future__ import annotations

import pytest

from agents.evaluation.suites import evaluate_suite


@pytest.mark.parametrize("suite", ["toggles", "complex", "everyday"])
def test_the_baseline_meets_its_targets_at_gamma_4(suite):
    result = evaluate_suite(suite, "heuristic", [4], operator="oracle", jobs=2,
                            calibration="off")
    metrics = result["results"][0]
    failed = [t["task"] for t in metrics["per_task"] if not t["success"]]
    assert metrics["tsr"] == 1.0, f"tasks that failed: {failed}"
    assert metrics["autonomy_precision"] >= 0.95
    assert metrics["intervention_recall"] is None or metrics["intervention_recall"] >= 0.90
    assert metrics["interventions_per_task"] <= 0.40 * metrics["steps_per_task"]


@pytest.mark.parametrize("suite", ["toggles", "complex", "everyday"])
def test_the_calibrated_default_finishes_every_task_and_is_right_when_it_acts(suite, monkeypatch):
    monkeypatch.delenv("KAIROS_CALIBRATOR", raising=False)
    result = evaluate_suite(suite, "heuristic", [4], operator="oracle", jobs=2)
    metrics = result["results"][0]
    failed = [t["task"] for t in metrics["per_task"] if not t["success"]]
    assert metrics["tsr"] == 1.0, f"tasks that failed: {failed}"
    assert metrics["autonomy_precision"] is None or metrics["autonomy_precision"] >= 0.97
    assert metrics["ece"] is not None  # the shipped calibrator scored the steps


@pytest.mark.parametrize("suite", ["fresh2_apps", "fresh2_errands", "fresh_apps",
                                   "fresh_errands", "fresh3_errands", "fresh4_errands"])
def test_on_apps_nobody_here_wrote_for_the_default_never_acts_alone_wrongly(suite, monkeypatch):
    """The over-execution the product exists to prevent, on suites written by people who
    never read the rules (docs/evaluation.md, "Held-out suites"): the shipped calibrator
    never saw these apps, so every step it lets act alone must be right and every task
    must finish with the oracle operator's help. (A refit tried on 2026-11-25 let a wrong
    step act alone on fresh2_errands; this keeps such a calibrator from shipping. A
    heuristic change of the second session let one act alone on fresh3_errands — a
    dropped "Going on holiday" exposed an out-of-office message that swallowed the
    errand's second half; docs/evaluation.md.)"""
    monkeypatch.delenv("KAIROS_CALIBRATOR", raising=False)
    result = evaluate_suite(suite, "heuristic", [4], operator="oracle", jobs=2,
                            calibration="out")
    metrics = result["results"][0]
    failed = [t["task"] for t in metrics["per_task"] if not t["success"]]
    assert metrics["tsr"] == 1.0, f"tasks that failed: {failed}"
    assert metrics["autonomy_precision"] is None or metrics["autonomy_precision"] >= 0.95
