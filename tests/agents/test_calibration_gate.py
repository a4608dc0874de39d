"""The evidence calibrator's gate (issue 12): the calibrated confidence, not the claim, is
what ``agents.brain.loop.decide`` reads; the shipped calibrator, a broken one, and the
version each step records.
"""
from __future__ import annotations

import json
from io import StringIO

import pytest
from PIL import Image
from django.core.management import call_command

from agents.brain import loop
from agents.brain.backends.base import Proposal, StepContext
from agents.brain.calibration.calibrator import EvidenceCalibrator
from agents.brain.calibration.fit import fit_calibrator
from agents.brain.calibration.gate import (
    SHIPPED_DIR, CalibratedBackend, CalibratorError, find_calibrator,
)
from devices.actions import CLICK, Action
from devices.protocol import Observation
from tests.agents.calibration_helpers import synthetic


# --- the gate -----------------------------------------------------------------------------


def lamp_ctx() -> StepContext:
    from devices.uitree import UINode

    nodes = [UINode(0, cls="android.widget.FrameLayout", bounds=(0, 0, 1080, 2400)),
             UINode(1, cls="android.widget.Button", text="Lamp on", bounds=(0, 300, 1080, 450),
                    clickable=True, parent=0, depth=1)]
    return StepContext("Switch the lamp on", Observation(0, 1080, 2400, "com.x", nodes,
                                                         Image.new("RGB", (36, 80)), b""))


class Sure:
    name = "sure"

    def __init__(self, rule: str) -> None:
        self.rule = rule

    def propose(self, ctx: StepContext) -> Proposal:
        return Proposal(Action(CLICK, x=540, y=375), confidence=5.0,
                        evidence={"rule": self.rule, "raw": 5.0, "action": "CLICK",
                                  "strength": 0.5})


def test_the_gate_reads_the_calibrated_confidence_not_the_claim(tmp_path):
    calibrator = fit_calibrator(synthetic(), "sure")
    path = calibrator.save(tmp_path / "sure.json")
    found = find_calibrator("sure", env={"KAIROS_CALIBRATOR": str(path)})
    assert found is not None and found.version == calibrator.version
    ctx = lamp_ctx()
    trusted = CalibratedBackend(Sure("toggle"), found).propose(ctx)
    assert loop.decide(trusted, ctx, 4).outcome == loop.EXECUTE
    doubted = CalibratedBackend(Sure("navigate"), found).propose(ctx)
    assert doubted.extra["raw_confidence"] == 5.0 and doubted.confidence < 4
    assert doubted.extra["calibrator_version"] == calibrator.version
    decision = loop.decide(doubted, ctx, 4)
    assert decision.outcome == loop.TICKET and decision.reason == loop.LOW_CONFIDENCE
    assert find_calibrator("sure", env={"KAIROS_CALIBRATOR": "off"}) is None


def test_a_broken_configured_calibrator_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    with pytest.raises(CalibratorError, match="not a Kairos evidence calibrator"):
        find_calibrator("heuristic", env={"KAIROS_CALIBRATOR": str(bad)})
    with pytest.raises(CalibratorError, match="cannot read"):
        find_calibrator("heuristic", env={"KAIROS_CALIBRATOR": str(tmp_path / "missing.json")})


def test_the_heuristic_ships_a_calibrator_that_is_used_by_default():
    shipped = find_calibrator("heuristic", env={})
    assert shipped is not None
    assert shipped.version == EvidenceCalibrator.load(SHIPPED_DIR / "heuristic.json").version
    # Fitted on the team's suites, with one out-of-sample variant per suite.
    assert {"toggles", "complex", "everyday", "heldout_apps"} <= set(shipped.held_out)


@pytest.mark.django_db(transaction=True)
def test_run_task_records_the_calibrator_version_on_each_step(monkeypatch):
    from agents.runtime.models import Step

    monkeypatch.delenv("KAIROS_CALIBRATOR", raising=False)
    out = StringIO()
    call_command("run_task", "--suite", "toggles", "--task", "wifi_off", "--threshold", "4",
                 "--operator", "oracle", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["success"] is True
    shipped = find_calibrator("heuristic", env={})
    versions = set(Step.objects.exclude(proposed_action=None).values_list("calibrator_version",
                                                                          flat=True))
    assert versions == {shipped.version}


@pytest.mark.django_db(transaction=True)
def test_a_damaged_calibrator_becomes_a_ticket_naming_the_file_not_a_crash(tmp_path, monkeypatch):
    from agents.runtime.models import Ticket

    bad = tmp_path / "damaged.json"
    bad.write_text('{"format": "something else"}')
    monkeypatch.setenv("KAIROS_CALIBRATOR", str(bad))
    out = StringIO()
    call_command("run_task", "--suite", "toggles", "--task", "wifi_off", "--threshold", "4",
                 "--operator", "none", "--json", stdout=out)
    assert json.loads(out.getvalue())["status"] == "waiting_operator"
    ticket = Ticket.objects.get()
    assert ticket.reason == "model_error" and str(bad) in ticket.note
