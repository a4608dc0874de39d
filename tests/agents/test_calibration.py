"""The evidence calibrator (issue 12): probing labels, fitting, a model backend, the commands.

Probing runs the real simulator and oracle on small hand-built apps; the calibrator is
fitted with scikit-learn; the gate is the product's ``agents.brain.loop.decide``. The gate
itself is in test_calibration_gate.py, apps the calibrator never saw in
test_calibration_unseen_apps.py.
"""
from __future__ import annotations

import json
import random
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agents.brain import loop
from agents.brain.backends import register_backend
from agents.brain.backends.base import Proposal, StepContext
from agents.brain.calibration.calibrator import (
    EvidenceCalibrator, probability_to_score, score_to_probability,
)
from agents.brain.calibration.fit import (
    expected_calibration_error, fit_calibrator, held_out_split, suggest_gamma, wilson_lower,
)
from agents.brain.calibration.gate import CalibratedBackend
from agents.evaluation.probe import ProbeJob, probe_task
from devices.actions import CLICK, COMPLETE, Action
from devices.protocol import Observation
from tests.agents.calibration_helpers import synthetic

# A hand-built app: one screen with two buttons; "Lamp on" switches the lamp on, "Lamp
# off" switches it off. The task is to switch it on.
LAMP_APP = """
app: {id: lamp, name: Lamp, start: main}
state: {lit: false}
screens:
  main:
    title: Lamp
    elements:
      - {kind: button, id: lamp_off, text: Lamp off, on_tap: {set: {lit: false}}}
      - {kind: button, id: lamp_on, text: Lamp on, on_tap: {set: {lit: true}}}
"""
LAMP_SUITE = """
suite: lamp
apps: [lamp.yaml]
tasks:
  - id: lamp_on
    instruction: Switch the lamp on
    start: {app: lamp}
    success: lamp.lit == true
"""


@pytest.fixture
def lamp_suite(tmp_path: Path) -> str:
    (tmp_path / "lamp.yaml").write_text(LAMP_APP)
    path = tmp_path / "lamp_suite.yaml"
    path.write_text(LAMP_SUITE)
    return str(path)


class WrongButtonFirst:
    """A scripted backend: taps "Lamp off" (wrong) first, then declares COMPLETE whatever
    the lamp shows — always claiming 5, with evidence naming its rule."""

    name = "wrong-first"

    def propose(self, ctx: StepContext) -> Proposal:
        nodes = {n.text: n for n in ctx.observation.nodes if n.text}
        if not ctx.history:
            x, y = nodes["Lamp off"].center
            return Proposal(Action(CLICK, x=x, y=y, element="Lamp off"), confidence=5.0,
                            evidence={"rule": "guess", "raw": 5.0})
        return Proposal(Action(COMPLETE), confidence=5.0, evidence={"rule": "done", "raw": 5.0})


register_backend("wrong-first", lambda **_: WrongButtonFirst())


class LightOn:
    """Taps "Light on" — as right as "Lamp on", which the teacher takes — then COMPLETE."""

    name = "light-on"

    def propose(self, ctx: StepContext) -> Proposal:
        nodes = {n.text: n for n in ctx.observation.nodes if n.text}
        if "Light on" in nodes and not ctx.history:
            x, y = nodes["Light on"].center
            return Proposal(Action(CLICK, x=x, y=y, element="Light on"), confidence=5.0,
                            evidence={"rule": "light", "raw": 5.0})
        return Proposal(Action(COMPLETE), confidence=5.0, evidence={"rule": "done", "raw": 5.0})


register_backend("light-on", lambda **_: LightOn())


# --- probing ----------------------------------------------------------------------------


def test_a_right_proposal_is_what_the_probe_runs_and_what_the_history_shows(tmp_path):
    """The history of the next record is the product's: an approved step is the agent's
    own action. (The probe used to run the teacher's other right action and call it the
    agent's, so a history could show the agent tapping what it never proposed.)"""
    (tmp_path / "lamp.yaml").write_text(LAMP_APP.replace(
        "      - {kind: button, id: lamp_on, text: Lamp on, on_tap: {set: {lit: true}}}",
        "      - {kind: button, id: lamp_on, text: Lamp on, on_tap: {set: {lit: true}}}\n"
        "      - {kind: button, id: light_on, text: Light on, on_tap: {set: {lit: true}}}"))
    (tmp_path / "suite.yaml").write_text(LAMP_SUITE)
    records = probe_task(ProbeJob(str(tmp_path / "suite.yaml"), "lamp_on", "light-on",
                                  max_steps=4))
    teacher = [r for r in records if r["branch"] == "teacher"]
    assert teacher[0]["right"] is True
    assert teacher[0]["human_action"]["element"] == "Lamp on"  # the teacher's own choice
    assert teacher[1]["history"] == ["CLICK 'Light on'"]
    assert teacher[1]["agent_action"]["type"] == COMPLETE and teacher[1]["right"] is True


def test_probing_labels_the_teachers_run_and_the_backends_own_run(lamp_suite):
    records = probe_task(ProbeJob(lamp_suite, "lamp_on", "wrong-first", max_steps=4))
    teacher = [r for r in records if r["branch"] == "teacher"]
    own = [r for r in records if r["branch"] == "own"]
    # Teacher branch: the wrong tap is labelled wrong and the teacher's tap runs instead,
    # so the next state is the success state, where COMPLETE is right.
    assert [(r["agent_action"]["type"], r["right"]) for r in teacher] == [
        ("CLICK", False), ("COMPLETE", True)]
    assert teacher[0]["human_action"]["element"] == "Lamp on"
    assert teacher[0]["decision"] == "edit" and teacher[0]["score_label"] == 1
    assert teacher[1]["decision"] == "approve" and teacher[1]["score_label"] == 5
    # Own branch: its own wrong tap runs, so the state it reaches is labelled too (COMPLETE
    # while the lamp is still off: wrong).
    assert own[0]["right"] is False and own[0]["agent_action"]["element"] == "Lamp off"
    assert any(r["agent_action"]["type"] == COMPLETE and r["right"] is False for r in own)
    assert all(r["evidence"]["rule"] in {"guess", "done"} for r in records)
    # The installation's training-record schema, plus the probe's fields.
    assert {"instruction", "goal", "history", "agent_action", "agent_confidence",
            "human_action", "decision", "score_label", "evidence", "right", "suite",
            "app"} <= set(records[0])


def test_the_probe_command_writes_json_lines_and_refuses_bad_input(lamp_suite, tmp_path):
    out = tmp_path / "probe.jsonl"
    stdout = StringIO()
    call_command("probe", "--suite", lamp_suite, "--backend", "heuristic", "--out", str(out),
                 stdout=stdout)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines and all(r["backend"] == "heuristic" and r["suite"] == "lamp" for r in lines)
    assert all("rule" in r["evidence"] and "raw" in r["evidence"] for r in lines)
    assert "labelled steps" in stdout.getvalue()
    with pytest.raises(CommandError, match="unknown backend"):
        call_command("probe", "--suite", lamp_suite, "--backend", "nope", "--out", str(out))
    with pytest.raises(CommandError, match="teacher"):
        call_command("probe", "--suite", lamp_suite, "--backend", "oracle", "--out", str(out))
    with pytest.raises(CommandError, match="no suite"):
        call_command("probe", "--suite", "no-such-suite", "--backend", "heuristic",
                     "--out", str(out))


# --- fitting ----------------------------------------------------------------------------


def test_the_calibrator_rises_with_the_evidence_and_is_honest_about_each_rule():
    calibrator = fit_calibrator(synthetic(), "heuristic")
    for rule in ("toggle", "navigate"):
        probs = [calibrator.probability({"rule": rule, "raw": raw, "action": "CLICK",
                                         "strength": 0.5}) for raw in (2.0, 3.0, 4.0, 5.0)]
        assert probs == sorted(probs), (rule, probs)
    evidence = {"raw": 5.0, "action": "CLICK", "strength": 0.5}
    sure = calibrator.probability({**evidence, "rule": "toggle"})
    weak = calibrator.probability({**evidence, "rule": "navigate"})
    assert sure > 0.9 and weak < 0.9 and weak < sure
    # Calibrated on its own data: the expected calibration error is small.
    test = synthetic(seed=8)
    pairs = [(calibrator.probability(s.evidence), s.right) for s in test]
    assert expected_calibration_error(pairs) < 0.08


def test_unfamiliar_evidence_lowers_the_confidence_below_the_default_gamma():
    calibrator = fit_calibrator(synthetic(), "heuristic")
    familiar = {"rule": "toggle", "raw": 5.0, "action": "CLICK", "strength": 0.5}
    assert calibrator.confidence(familiar) >= 4
    for strange in ({**familiar, "rule": "never_seen_rule"},
                    {**familiar, "action": "LONG_CLICK"},
                    {**familiar, "strength": 40.0},
                    # decided on elements read from a screenshot (issue 27)
                    {**familiar, "detected": True}):
        assert calibrator.unfamiliar(strange)
        assert calibrator.probability(strange) <= 0.5
        assert calibrator.confidence(strange) < 4


def test_the_artefact_is_versioned_and_a_damaged_one_is_refused(tmp_path):
    calibrator = fit_calibrator(synthetic(), "heuristic")
    path = calibrator.save(tmp_path / "heuristic.json")
    again = EvidenceCalibrator.load(path)
    assert again.version == calibrator.version and again.version.startswith("heuristic-")
    other = fit_calibrator(synthetic(seed=9), "heuristic")
    assert other.version != calibrator.version
    data = json.loads(path.read_text())
    data["weights"] = {k: v + 1 for k, v in data["weights"].items()}
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="does not match its parameters"):
        EvidenceCalibrator.load(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        EvidenceCalibrator.load(path)


def test_leave_one_app_out_keeps_the_held_out_suite_and_its_apps_out_of_the_fit():
    samples = (synthetic(50, 1, "bundled", "com.settings") + synthetic(50, 2, "newapps", "com.cal")
               + synthetic(50, 3, "errands", "com.cal") + synthetic(50, 4, "errands", "com.msg"))
    fitting, judged = held_out_split(samples, "newapps", {"com.cal"})
    assert {s.suite for s in judged} == {"newapps"} and len(judged) == 50
    assert all(s.app != "com.cal" and s.suite != "newapps" for s in fitting)
    assert len(fitting) == 100  # bundled + the errands' messaging steps


def test_the_gamma_suggestion_uses_the_wilson_lower_bound():
    assert wilson_lower(95, 100) < 0.90 < 95 / 100
    assert wilson_lower(1000, 1000) > 0.99
    scored = [(5.0, True)] * 200 + [(4.0, True)] * 90 + [(4.0, False)] * 10 + [(2.0, False)] * 50
    suggestion = suggest_gamma(scored, 0.95)
    assert suggestion.gamma == 5.0 and suggestion.acting == 200
    assert suggestion.interventions_per_step == pytest.approx(150 / 350)
    assert suggest_gamma([(3.0, True), (3.0, False)], 0.95).gamma is None


def test_the_scale_mapping_puts_the_target_precision_at_gamma_four():
    assert probability_to_score(0.95) == pytest.approx(4.0)
    assert probability_to_score(0.99) == pytest.approx(5.0)
    assert probability_to_score(0.5) == pytest.approx(2.0)
    for p in (0.1, 0.6, 0.9, 0.97):
        assert score_to_probability(probability_to_score(p)) == pytest.approx(p)


def test_ece_by_chance_tells_a_small_suites_noise_from_miscalibration():
    """A 16-task suite judges ~150 steps; at that size even a perfect confidence shows an
    ECE of several points, so the report says how much chance alone explains."""
    from agents.brain.calibration.fit import ece_by_chance, expected_calibration_error

    rng = random.Random(5)
    probabilities = [rng.choice([0.3, 0.6, 0.9, 0.97]) for _ in range(150)]
    chance = ece_by_chance(probabilities)
    assert chance is not None and 0.03 < chance < 0.2
    assert ece_by_chance(probabilities * 20) < chance / 2  # more steps, less noise
    honest = [expected_calibration_error([(p, rng.random() < p) for p in probabilities])
              for _ in range(100)]
    assert sum(e <= chance for e in honest) >= 85  # a perfect confidence passes
    overconfident = [(p, rng.random() < p - 0.25) for p in probabilities]
    assert expected_calibration_error(overconfident) > chance  # a 25-point lie does not
    assert ece_by_chance([]) is None


# --- a model backend through the same path ------------------------------------------------

LAMP_TASKS = """
suite: lamps
apps: [lamp.yaml]
tasks:
  - {id: on_1, instruction: Switch the lamp on, start: {app: lamp}, success: lamp.lit == true}
  - {id: on_2, instruction: Turn on the lamp, start: {app: lamp}, success: lamp.lit == true}
  - {id: on_3, instruction: Lamp on please, start: {app: lamp}, success: lamp.lit == true}
  - {id: on_4, instruction: I need light, start: {app: lamp}, success: lamp.lit == true}
"""
# "Lamp on" is at (540, 528) of 1080 × 2400: (500, 220) on the model's 0–1000 grid.
TAP_LAMP_ON = "Thought: the lamp is off.\nAction: CLICK <point>[[500, 220]]</point>\nScore: 5"
DECLARE_DONE = "Thought: looks done.\nAction: COMPLETE\nScore: 5"


def test_an_over_confident_model_is_probed_calibrated_and_then_asked_about(
        fake_openai, tmp_path, monkeypatch):
    from agents.brain.backends import get_backend

    (tmp_path / "lamp.yaml").write_text(LAMP_APP)
    suite = tmp_path / "lamps.yaml"
    suite.write_text(LAMP_TASKS)
    # Always "Score: 5"; right only about half of the time (tapping once the lamp is on, or
    # declaring COMPLETE while it is off, is wrong).
    answers = iter([TAP_LAMP_ON, DECLARE_DONE, DECLARE_DONE, TAP_LAMP_ON] * 50)
    from tests.agents.fake_openai import Reply

    fake_openai.default = lambda body: Reply.completion(next(answers))
    monkeypatch.setenv("KAIROS_LLM_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("KAIROS_LLM_API_KEY", "test-key")
    monkeypatch.setenv("KAIROS_LLM_MODEL", "overconfident")
    monkeypatch.setenv("KAIROS_LLM_PLANNING", "inline")

    probes = tmp_path / "openai.jsonl"
    call_command("probe", "--suite", str(suite), "--backend", "openai", "--out", str(probes),
                 stdout=StringIO())
    records = [json.loads(line) for line in probes.read_text().splitlines()]
    assert {r["evidence"]["stated"] for r in records} == {5.0}
    assert 0 < sum(r["right"] for r in records) < len(records)
    out = tmp_path / "openai-calibrator.json"
    call_command("calibrate", "--backend", "openai", "--from", str(probes), "--out", str(out),
                 "--min-pairs", "8", stdout=StringIO(), stderr=StringIO())
    calibrator = EvidenceCalibrator.load(out)

    ctx = StepContext("Switch the lamp on", observation=lamp_device_observation(tmp_path))
    fake_openai.default = Reply.completion(TAP_LAMP_ON)
    raw = get_backend("openai").propose(ctx)
    assert raw.confidence == 5.0 and loop.decide(raw, ctx, 4).outcome == loop.EXECUTE
    calibrated = CalibratedBackend(get_backend("openai"), calibrator).propose(ctx)
    assert calibrated.extra["p_right"] < 0.95 and calibrated.confidence < 4
    assert loop.decide(calibrated, ctx, 4).outcome == loop.TICKET
    # Declaring COMPLETE while the lamp is still off: the claim is 5, the measure far less.
    fake_openai.default = Reply.completion(DECLARE_DONE)
    done = CalibratedBackend(get_backend("openai"), calibrator).propose(ctx)
    assert done.extra["p_right"] < 0.8 and loop.decide(done, ctx, 4).outcome == loop.TICKET


def lamp_device_observation(tmp_path: Path) -> Observation:
    from devices.sim import SimDevice, find_suite

    suite = find_suite(str(tmp_path / "lamps.yaml"))
    device = SimDevice("lamp", apps=suite.bundle)
    device.reset(suite.tasks[0])
    return device.observe()


# --- evaluate --calibrated and calibrate's bad input ----------------------------------------


def test_evaluate_calibrated_reports_ece_and_draws_the_reliability_diagram(lamp_suite, tmp_path,
                                                                        monkeypatch):
    monkeypatch.delenv("KAIROS_CALIBRATOR", raising=False)
    out, plot = tmp_path / "result.json", tmp_path / "gamma.svg"
    call_command("evaluate", "--suite", lamp_suite, "--thresholds", "4,5", "--calibrated",
                 "--json", str(out), "--plot", str(plot), stdout=StringIO())
    rows = json.loads(out.read_text())["results"]
    assert all(row["ece"] is not None and 0 <= row["ece"] <= 1 for row in rows)
    assert all(sum(b["steps"] for b in row["reliability"]) >= 1 for row in rows)
    svg = (tmp_path / "gamma.reliability.svg").read_text()
    assert "ECE" in svg and "calibrated P(right)" in svg
    call_command("evaluate", "--suite", lamp_suite, "--thresholds", "4", "--uncalibrated",
                 "--json", str(out), stdout=StringIO())
    assert json.loads(out.read_text())["results"][0]["ece"] is None
    monkeypatch.setenv("KAIROS_CALIBRATOR", "off")
    with pytest.raises(CommandError, match="no calibrator"):
        call_command("evaluate", "--suite", lamp_suite, "--thresholds", "4", "--calibrated",
                     stdout=StringIO())


def test_calibrate_names_a_bad_probe_line_and_prints_version_ece_and_gamma(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"backend": "heuristic"}\nnot json\n')
    with pytest.raises(CommandError, match="line 2: not JSON"):
        call_command("calibrate", "--backend", "heuristic", "--from", str(bad))
    with pytest.raises(CommandError, match="cannot read"):
        call_command("calibrate", "--backend", "heuristic", "--from", str(tmp_path / "none"))
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps({"backend": "heuristic", "suite": s.suite, "app": s.app,
                                        "evidence": s.evidence, "right": s.right}) + "\n"
                            for s in synthetic(300, 3, "one", "com.kairos.settings")
                            + synthetic(300, 4, "two", "com.kairos.clock")
                            + synthetic(300, 5, "three", "com.kairos.settings")))
    stdout = StringIO()
    call_command("calibrate", "--backend", "heuristic", "--from", str(good), "--out",
                 str(tmp_path / "c.json"), "--target-ap", "0.8", stdout=stdout)
    text = stdout.getvalue()
    calibrator = EvidenceCalibrator.load(tmp_path / "c.json")
    assert calibrator.version in text and "ECE in sample" in text and "suggested γ" in text
    assert set(calibrator.held_out) == {"one", "two", "three"}


@pytest.mark.django_db
def test_calibrate_from_logs_labels_approve_right_edit_and_takeover_wrong_and_skips_aborts(
        tmp_path):
    from django.contrib.auth.models import User

    from agents.runtime.models import Step, Task, Ticket
    from devices.models import Device

    owner, operator = User.objects.create_user("owner"), User.objects.create_user("op")
    task = Task.objects.create(owner=owner, device=Device.objects.create(name="phone"),
                               instruction="x", threshold=4, backend="heuristic")
    decisions = ["approve"] * 30 + ["edit"] * 10 + ["takeover"] * 5 + ["abort"] * 7
    for index, decision in enumerate(decisions):
        rule = "toggle" if decision == "approve" else "click_best"
        step = Step.objects.create(task=task, index=index, proposed_action={"type": "WAIT"},
                                   confidence=4.5, app="com.kairos.settings", extra={
                                       "evidence": {"rule": rule, "raw": 5.0, "action": "CLICK"}})
        Ticket.objects.create(kind="intervention", reason="low_confidence", status="resolved",
                              task=task, step=step, decision=decision, resolved_by=operator)
    stdout = StringIO()
    call_command("calibrate", "--backend", "heuristic", "--from-logs", "--out",
                 str(tmp_path / "logs.json"), "--json", stdout=stdout)
    summary = json.loads(stdout.getvalue())
    assert summary["steps"] == 45  # the 7 aborts say nothing about the action
    calibrator = EvidenceCalibrator.load(tmp_path / "logs.json")
    approved = calibrator.probability({"rule": "toggle", "raw": 5.0, "action": "CLICK"})
    replaced = calibrator.probability({"rule": "click_best", "raw": 5.0, "action": "CLICK"})
    assert approved > 0.8 > 0.2 > replaced
