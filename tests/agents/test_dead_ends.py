"""Evaluation survives dead ends: an episode the agent drives into a state with no path
to success is scored as failed, its later steps count as wrong, the sweep goes on and the
result counts it (CONTRACT "Additions": evaluate results gain ``dead_ends``)."""
from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from agents.brain.backends import register_backend
from agents.brain.backends.base import Proposal, StepContext
from agents.evaluation.suites import evaluate_suite, format_table
from devices.actions import Action

# A quiz answered once: "Answer B" is wrong and cannot be taken back, so a task that
# needs the right answer has no path left once B is chosen.
QUIZ_APP = """
app: {id: quiz, name: Quiz}
state: {answered: false, correct: false}
screens:
  question:
    title: Question 1
    elements:
      - {kind: button, id: answer_a, text: Answer A, enabled: not answered,
         on_tap: {set: {answered: true, correct: true}}}
      - {kind: button, id: answer_b, text: Answer B, enabled: not answered,
         on_tap: {set: {answered: true}}}
"""
QUIZ_SUITE = """
suite: quiz
apps: [quiz.yaml]
tasks:
  - {id: right_answer, instruction: Answer the question correctly, start: {app: quiz},
     success: quiz.answered and quiz.correct}
  - {id: any_answer, instruction: Answer the question, start: {app: quiz},
     success: quiz.answered}
"""


class GuessingBackend:
    """Taps "Answer B" sure of itself, then (unsure) "Answer A", then declares COMPLETE."""

    name = "guesser"

    def __init__(self, **_) -> None:
        pass

    def propose(self, ctx: StepContext) -> Proposal:
        script = [("Answer B", 5.0), ("Answer A", 2.0)]
        if ctx.step_index >= len(script):
            return Proposal(action=Action("COMPLETE"), confidence=5.0)
        label, confidence = script[ctx.step_index]
        node = next(n for n in ctx.observation.nodes if n.text == label)
        x, y = node.center
        return Proposal(action=Action("CLICK", x=x, y=y, element=label), confidence=confidence)


@pytest.fixture()
def quiz_suite(tmp_path: Path) -> Path:
    (tmp_path / "quiz.yaml").write_text(QUIZ_APP)
    suite = tmp_path / "suite.yaml"
    suite.write_text(QUIZ_SUITE)
    register_backend("test-guesser", GuessingBackend)
    return suite


def _row(result: dict, threshold: float) -> dict:
    return next(r for r in result["results"] if r["threshold"] == threshold)


def test_a_sweep_over_a_suite_with_a_dead_end_completes_and_counts_it(quiz_suite):
    result = evaluate_suite(str(quiz_suite), "test-guesser", [0, 4])
    for threshold in (0, 4):
        row = _row(result, threshold)
        assert row["dead_ends"] == 1
        per_task = {t["task"]: t for t in row["per_task"]}
        assert per_task["right_answer"]["dead_end"] and not per_task["right_answer"]["success"]
        assert per_task["any_answer"]["success"] and not per_task["any_answer"]["dead_end"]
        assert row["tsr"] == 0.5
    # γ=0 never asks. right_answer: the wrong answer, the tap on the disabled "Answer A"
    # (from the dead end) and COMPLETE are all wrong; any_answer: "Answer B" and COMPLETE
    # are right, the useless tap between them is wrong.
    assert _row(result, 0)["autonomy_precision"] == pytest.approx(2 / 6)
    # γ=4 asks about the unsure tap in both. In right_answer the operator finds no path
    # from the dead end and aborts; in any_answer it replaces the tap with COMPLETE.
    row4 = _row(result, 4)
    assert row4["intervention_recall"] == pytest.approx(2 / 3)
    assert row4["autonomy_precision"] == pytest.approx(1 / 2)
    assert row4["interventions_per_task"] == 1.0
    assert "dead ends (episodes left with no path to success): 1 at γ=0, 1 at γ=4" in (
        format_table(result))
    json.dumps(result)


def test_evaluate_takes_the_oracle_budget_as_a_flag(quiz_suite, tmp_path):
    out = tmp_path / "out.json"
    call_command("evaluate", "--suite", str(quiz_suite), "--backend", "test-guesser",
                 "--thresholds", "0", "--oracle-budget", "500", "--json", str(out),
                 stdout=StringIO())
    [row] = json.loads(out.read_text())["results"]
    assert row["dead_ends"] == 1 and row["tasks"] == 2


@pytest.mark.parametrize("budget", ["0", "-5"])
def test_a_budget_below_one_state_is_refused(quiz_suite, budget):
    with pytest.raises(CommandError, match="--oracle-budget must be at least 1"):
        call_command("evaluate", "--suite", str(quiz_suite), "--backend", "test-guesser",
                     "--thresholds", "0", "--oracle-budget", budget, stdout=StringIO())


def test_the_budget_setting_is_the_default(quiz_suite, tmp_path, settings):
    # A budget of one state cannot even search the start: nothing can be judged a dead
    # end, unlike with the default budget above.
    settings.KAIROS_ORACLE_BUDGET = 1
    out = tmp_path / "out.json"
    call_command("evaluate", "--suite", str(quiz_suite), "--backend", "test-guesser",
                 "--thresholds", "0", "--json", str(out), stdout=StringIO())
    [row] = json.loads(out.read_text())["results"]
    assert row["dead_ends"] == 0


@pytest.mark.django_db(transaction=True)
def test_run_task_with_the_oracle_operator_aborts_at_a_dead_end_instead_of_crashing(quiz_suite):
    """Found on fresh11_errands (2026-11-25): once the agent had driven a phone where no
    path leads to success, `run_task --operator oracle` stopped with a DeviceError
    traceback when asked the next step. The simulated operator now does what evaluate's
    does, and what a person would: nothing can be done, so it aborts the task."""
    out = StringIO()
    call_command("run_task", "--suite", str(quiz_suite), "--task", "right_answer",
                 "--backend", "test-guesser", "--threshold", "4", "--operator", "oracle",
                 "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["status"] == "aborted" and result["success"] is not True
    assert result["interventions"] == 1
    assert [a["element"] for a in result["actions"]] == ["Answer B"]


@pytest.mark.django_db(transaction=True)
def test_run_task_on_a_suite_with_its_own_app_puts_that_app_on_the_phone():
    """Found the same day: `run_task --suite home --task unlock_front_door --operator
    oracle` failed after one step — the simulated phone had only the bundled apps, so the
    Home app the suite brings was not there to open, and the oracle found no path."""
    out = StringIO()
    call_command("run_task", "--suite", "home", "--task", "unlock_front_door",
                 "--threshold", "4", "--operator", "oracle", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["status"] == "succeeded" and result["success"] is True
    assert "Home" in (result["actions"][0].get("app"), result["actions"][0].get("element"))
