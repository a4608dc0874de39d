"""``calibrate``: raw scores of resolved tickets (and oracle-labelled runs) → a calibration."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from agents.brain.backends.base import Proposal
from agents.brain.backends.openai import OpenAIBackend
from agents.evaluation.history import RawScores
from agents.brain.confidence import Calibration
from agents.runtime.models import Step, Task, Ticket
from devices.actions import Action
from devices.models import Device

# (raw score, approved, edited or taken over) per score: accuracy rises with the score.
HISTORY = {1: (0, 10), 2: (2, 8), 3: (5, 5), 4: (18, 2), 5: (20, 0)}
# Laplace-smoothed accuracy per score, (right + 1) / (n + 2); already monotone.
HOME = {"type": "PRESS_HOME"}
EXPECTED = [(1.0, 1 / 12), (2.0, 3 / 12), (3.0, 6 / 12), (4.0, 19 / 22), (5.0, 21 / 22)]


class History:
    def __init__(self) -> None:
        self.user = User.objects.create_user("owner")
        self.operator = User.objects.create_user("op")
        self.device = Device.objects.create(name="phone")
        self.task = Task.objects.create(owner=self.user, device=self.device, instruction="x",
                                        threshold=4, backend="openai")
        self.index = 0

    def ticket(self, decision: str, *, confidence: float | None, extra: dict | None = None,
               status: str = "resolved", kind: str = "intervention",
               proposed: dict | None = HOME) -> Ticket:
        step = Step.objects.create(task=self.task, index=self.index, proposed_action=proposed,
                                   confidence=confidence, extra=extra or {})
        self.index += 1
        return Ticket.objects.create(kind=kind, reason="low_confidence", status=status,
                                     task=self.task, step=step, decision=decision,
                                     resolved_by=self.operator)

    def scored(self, raw: float, decision: str, model: str = "m1") -> Ticket:
        # The stored confidence is what a calibration made of it: calibrate must not use it.
        return self.ticket(decision, confidence=4.9,
                           extra={"raw_confidence": raw, "p_right": 0.97, "model": model,
                                  "estimator": "self"})


@pytest.fixture
def history(db) -> History:
    h = History()
    for score, (approved, wrong) in HISTORY.items():
        for _ in range(approved):
            h.scored(score, "approve")
        for i in range(wrong):
            h.scored(score, "takeover" if i % 3 == 0 else "edit")
    # None of these may count: still open, a clarification, no proposed action (a model
    # error), a calibrated score without its raw value.
    h.ticket("", confidence=1.0, extra={"raw_confidence": 5.0, "model": "m1", "estimator": "self"},
             status="open")
    h.ticket("answer", confidence=None, kind="clarification")
    h.ticket("approve", confidence=None, proposed=None)
    h.ticket("edit", confidence=4.9, extra={"p_right": 0.97, "model": "m1", "estimator": "self"})
    return h


def flat(points) -> list[float]:
    return [value for point in points for value in point]


def calibrate(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("calibrate", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db(transaction=True)
def test_calibrate_fits_the_ticket_history_on_raw_scores(history, tmp_path):
    path = tmp_path / "cal.json"
    text, _ = calibrate("--out", str(path))

    calibration = Calibration.from_json(json.loads(path.read_text()))
    assert calibration.samples == 70
    assert flat(calibration.points) == pytest.approx(flat(EXPECTED), abs=1e-6)
    assert calibration.method == "isotonic" and calibration.estimator == "self"
    # Only score 5 (21 of 22 smoothed) reaches 0.95: γ is its calibrated confidence.
    assert calibration.threshold == pytest.approx(1 + 4 * 21 / 22)
    assert calibration.extra["sources"] == {"tickets": 70, "evaluation": 0}
    assert calibration.extra["model"] == "m1" and calibration.extra["backend"] == "openai"
    assert "suggested γ = 4.818" in text and f"KAIROS_LLM_CALIBRATION={path}" in text
    assert "raw score" in text and "0.955" in text  # the reliability table


@pytest.mark.django_db(transaction=True)
def test_a_lower_target_allows_more_autonomy_and_binned_agrees_on_monotone_data(
        history, tmp_path):
    path = tmp_path / "cal.json"
    text, _ = calibrate("--out", str(path), "--target", "0.9", "--method", "binned", "--json")
    data = json.loads(text)
    assert data["threshold"] == pytest.approx(1 + 4 * 19 / 22)  # scores 4 and 5 act alone
    assert data["acting_alone"] == 40 and data["autonomy_precision"] == pytest.approx(38 / 40)
    assert [row["steps"] for row in data["reliability"]] == [10, 10, 10, 20, 20]
    assert flat(Calibration.from_json(json.loads(path.read_text())).points) == pytest.approx(
        flat(EXPECTED), abs=1e-6)


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_target_says_no_gamma(history, tmp_path):
    path = tmp_path / "cal.json"
    text, _ = calibrate("--out", str(path), "--target", "0.99")
    assert "no γ reaches autonomy precision 0.99" in text
    assert json.loads(path.read_text())["threshold"] is None


@pytest.mark.django_db(transaction=True)
def test_steps_of_another_model_must_be_told_apart(history, tmp_path):
    for _ in range(3):
        history.scored(5, "approve", model="m2")
    with pytest.raises(CommandError, match="more than one backend/model/estimator"):
        calibrate("--out", str(tmp_path / "cal.json"))
    calibrate("--out", str(tmp_path / "cal.json"), "--model", "m1")
    assert json.loads((tmp_path / "cal.json").read_text())["samples"] == 70


@pytest.mark.django_db(transaction=True)
def test_too_little_data_is_a_clear_error(tmp_path):
    History().scored(4, "approve")
    with pytest.raises(CommandError, match="too little data: 1 labelled steps"):
        calibrate("--out", str(tmp_path / "cal.json"))
    assert not (tmp_path / "cal.json").exists()
    with pytest.raises(CommandError, match="--suite needs --backend"):
        calibrate("--suite", "toggles")


@pytest.mark.django_db(transaction=True)
def test_the_openai_backend_reads_the_written_file_from_the_environment(history, tmp_path):
    path = tmp_path / "cal.json"
    calibrate("--out", str(path))
    backend = OpenAIBackend(environ={"KAIROS_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                                     "KAIROS_LLM_CALIBRATION": str(path)})
    assert backend.calibration is not None
    assert backend.calibration.confidence(5) == pytest.approx(1 + 4 * 21 / 22)


@pytest.mark.django_db(transaction=True)
def test_oracle_labelled_suite_runs_add_pairs(tmp_path):
    path = tmp_path / "cal.json"
    text, _ = calibrate("--suite", "toggles", "--backend", "oracle", "--no-history",
                        "--out", str(path), "--json")
    data = json.loads(text)
    calibration = Calibration.from_json(json.loads(path.read_text()))
    # The oracle backend proposes the optimal action with confidence 5: all right.
    assert data["group"]["sources"]["evaluation"] == calibration.samples >= 19
    assert data["reliability"] == [{
        "score": 5.0, "steps": calibration.samples, "accuracy": 1.0,
        "predicted": pytest.approx(calibration.probability(5)),
        "calibrated": pytest.approx(calibration.confidence(5), abs=1e-3)}]
    assert calibration.threshold is not None


def test_evaluation_runs_see_the_raw_score_not_a_calibrated_one():
    class Calibrated:
        name = "calibrated"

        def propose(self, ctx):
            return Proposal(Action("WAIT"), confidence=4.6,
                            extra={"raw_confidence": 2.0, "p_right": 0.9, "model": "m",
                                   "estimator": "logprob"})

    wrapped = RawScores(Calibrated())
    proposal = wrapped.propose(None)
    assert proposal.confidence == 2.0
    assert (wrapped.model, wrapped.estimator) == ("m", "logprob")
