"""Dataset replay, suite evaluation across γ, the text table and the γ plot."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PIL import Image

from agents.brain.backends.base import Proposal, StepContext
from agents.evaluation.episode import EpisodeResult, StepRecord
from agents.evaluation.suites import (
    EpisodeFailed, EpisodeJob, evaluate_dataset, evaluate_suite, format_table,
    task_record_from_episode,
)
from agents.brain.plot import gamma_plot_svg
from devices.actions import Action

SAMPLE = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "aitz-sample"
needs_sample = pytest.mark.skipif(not SAMPLE.is_dir(), reason="AITZ sample not present")


class ScriptedBackend:
    """Answers by step index, and remembers what it was shown."""

    name = "scripted"

    def __init__(self, answers: list[tuple[Action | None, float | None]]) -> None:
        self.answers = answers
        self.seen: list[StepContext] = []

    def propose(self, ctx: StepContext) -> Proposal:
        self.seen.append(ctx)
        action, confidence = self.answers[ctx.step_index]
        return Proposal(action=action, confidence=confidence)


@needs_sample
def test_aitz_replay_scores_a_known_backend_as_computed_by_hand() -> None:
    backend = ScriptedBackend([
        (Action("PRESS_HOME"), 5),  # gold PRESS_HOME: match, confident
        (Action("SCROLL", direction="DOWN"), 2),  # gold SCROLL UP: type only; gate asks
        (Action("CLICK", x=170, y=310), 4),  # gold (164, 299): 2.9% away, at γ: no ticket
        (Action("COMPLETE"), 3),  # gold COMPLETE: match; gate asks
    ])
    result = evaluate_dataset("aitz", SAMPLE, backend, threshold=4)
    assert (result["episodes"], result["steps"], result["backend"]) == (1, 4, "scripted")
    assert result["type_acc"] == 1.0
    assert result["sr"] == pytest.approx(3 / 4)
    assert result["tsr"] == 0.0  # one step missed: the episode fails
    # needed = [F, T, F, F], asked = [F, T, F, T]
    assert result["hsr"] == pytest.approx(3 / 4)
    assert result["intervention_recall"] == 1.0
    assert result["intervention_precision"] == pytest.approx(1 / 2)
    assert result["autonomy_recall"] == pytest.approx(2 / 3)
    assert result["autonomy_precision"] == 1.0
    assert [s["match"] for s in result["per_step"]] == [True, False, True, True]
    assert result["per_episode"][0]["matches"] == 3
    json.dumps(result)


@needs_sample
def test_aitz_replay_shows_the_gold_history_and_the_screenshot() -> None:
    backend = ScriptedBackend([(Action("COMPLETE"), 5)] * 4)
    evaluate_dataset("aitz", SAMPLE, backend)
    ctx = backend.seen[2]
    # the backend's own (wrong) earlier answers are not what it sees: teacher forcing
    assert [entry.action for entry in ctx.history] == [
        {"type": "PRESS_HOME"}, {"type": "SCROLL", "direction": "UP"},
    ]
    assert ctx.instruction.startswith('open app "Clock"')
    observation = ctx.observation
    assert (observation.width, observation.height) == (270, 600)
    assert observation.image.size == (270, 600)
    assert observation.jpeg[:2] == b"\xff\xd8"
    assert len(observation.nodes) == 42


@needs_sample
def test_a_perfect_backend_scores_full_marks_on_aitz() -> None:
    gold = [Action("PRESS_HOME"), Action("SCROLL", direction="UP"),
            Action("CLICK", x=164, y=299), Action("COMPLETE")]
    result = evaluate_dataset("aitz", SAMPLE, ScriptedBackend([(a, 5) for a in gold]))
    assert result["sr"] == result["type_acc"] == result["tsr"] == 1.0
    assert result["intervention_recall"] is None  # nothing needed help


def test_star_replay_reports_the_toggle_metrics(tmp_path: Path) -> None:
    Image.new("RGB", (200, 400), "white").save(tmp_path / "s.png")
    records = [
        {"id": "wifi", "image": "s.png", "posInstruction": "Turn on Wi-Fi",
         "negInstruction": "Turn off Wi-Fi", "bbox": [100, 200, 300, 250]},
        {"id": "bt", "image": "s.png", "posInstruction": "Turn on Bluetooth",
         "negInstruction": "Turn off Bluetooth", "bbox": [600, 600, 800, 650]},
    ]
    (tmp_path / "t.json").write_text(json.dumps(records))

    class AlwaysClicks:
        """Clicks the Wi-Fi toggle's centre whatever it is asked: right for the Wi-Fi
        positive, a flipping click for the Wi-Fi negative, a miss for Bluetooth."""

        name = "always-clicks"

        def propose(self, ctx: StepContext) -> Proposal:
            return Proposal(action=Action("CLICK", x=40, y=90), confidence=5)

    result = evaluate_dataset("star", tmp_path / "t.json", AlwaysClicks())
    toggle = result["toggle"]
    assert (toggle["positives"], toggle["negatives"]) == (2, 2)
    assert toggle["o_tmr"] == pytest.approx(2 / 4)
    assert toggle["o_amr"] == pytest.approx(1 / 4)
    assert toggle["p_tmr"] == 1.0
    assert toggle["p_amr"] == pytest.approx(1 / 2)
    assert toggle["p_fnr"] == 0.0
    assert toggle["n_amr"] == 0.0
    assert toggle["n_fptr"] == 1.0
    assert toggle["n_fpr"] == pytest.approx(1 / 2)  # only the Wi-Fi negative is flipped
    assert result["tsr"] == pytest.approx(1 / 4)  # each sample is a one-step episode
    assert "N-FPR" in format_table(result)


# --- suites ----------------------------------------------------------------------------

def _step(index: int, *, needed: bool | None, asked: bool, action: str = "CLICK",
          by: str = "agent", kind: str | None = None) -> StepRecord:
    executed = None if kind == "clarification" else {"type": action}
    if action == "CLICK" and executed:
        executed.update(x=1, y=1)
    return StepRecord(index=index, proposed=executed, confidence=5.0 if not asked else 2.0,
                      asked=asked, kind=kind or ("intervention" if asked else None),
                      reason=None, needed=needed, executed=executed, by=by)


def stub_episode(job: EpisodeJob) -> object:
    """Stands in for run_episode on a two-task suite; module level so workers import it.

    Task "a" (optimum 3) has one hard step: below γ=3 the agent executes its wrong action
    alone and fails; from γ=3 it asks on a right step (approved) and on the hard step (an
    operator edits) and succeeds in 4 device steps. Task "b" (optimum 2) asks one
    clarification, then succeeds in 2 steps at every γ.
    """
    if job.task == "a":
        if job.threshold < 3:
            steps = [_step(0, needed=False, asked=False), _step(1, needed=True, asked=False),
                     _step(2, needed=False, asked=False),
                     _step(3, needed=False, asked=False, action="COMPLETE")]
            return EpisodeResult("a", "failed", False, steps, 0, 0, 3)
        steps = [_step(0, needed=False, asked=True), _step(1, needed=True, asked=True,
                                                           by="operator"),
                 _step(2, needed=False, asked=False), _step(3, needed=False, asked=False),
                 _step(4, needed=False, asked=False, action="COMPLETE")]
        return EpisodeResult("a", "succeeded", True, steps, 2, 0, 3)
    steps = [_step(0, needed=None, asked=True, kind="clarification"),
             _step(1, needed=False, asked=False), _step(2, needed=False, asked=False),
             _step(3, needed=False, asked=False, action="COMPLETE")]
    return EpisodeResult("b", "succeeded", True, steps, 0, 1, 2)


def stub_task_record(job: EpisodeJob):  # the episode_fn evaluate_suite calls
    return task_record_from_episode(stub_episode(job))


def run_stub_suite(jobs: int = 1, progress=None) -> dict:
    return evaluate_suite("suites/stub.yaml", "heuristic", [0, 4], tasks=["a", "b"],
                          episode_fn=stub_task_record, jobs=jobs, progress=progress)


def test_suite_result_has_the_contract_shape() -> None:
    result = run_stub_suite()
    assert result["suite"] == "stub" and result["backend"] == "heuristic"
    assert [row["threshold"] for row in result["results"]] == [0, 4]
    for row in result["results"]:
        assert set(row) == {
            "threshold", "tasks", "tsr", "type_acc", "sr", "hsr", "intervention_recall",
            "intervention_precision", "autonomy_precision", "autonomy_recall", "re",
            "interventions_per_task", "clarifications_per_task", "steps_per_task", "per_task",
            "ece",  # CONTRACT "Additions (second build)"; null without a calibrator
            "ece_by_chance",  # what a perfect confidence could show on so few steps
            "dead_ends", "sensitive_steps", "sensitive_asked",
            "asked_share",  # the share of judged steps a person was asked about
        }
        assert row["ece"] is None  # the stub episodes carry no calibrated P(right)
        assert row["ece_by_chance"] is None
        assert row["dead_ends"] == 0 and row["sensitive_steps"] == 0
    assert result["results"][0]["per_task"] == [
        {"task": "a", "success": False, "steps": 3, "interventions": 0, "clarifications": 0,
         "dead_end": False},
        {"task": "b", "success": True, "steps": 2, "interventions": 0, "clarifications": 1,
         "dead_end": False},
    ]
    json.dumps(result)


def test_suite_metrics_at_each_threshold_are_the_hand_computed_ones() -> None:
    low, high = run_stub_suite()["results"]
    # γ=0: 7 judged steps (b's clarification is not judged), one missed, none asked
    assert low["tsr"] == pytest.approx(1 / 2)
    assert low["hsr"] == pytest.approx(6 / 7)
    assert low["intervention_recall"] == 0.0
    assert low["intervention_precision"] is None  # nothing asked
    assert low["autonomy_recall"] == 1.0
    assert low["autonomy_precision"] == pytest.approx(6 / 7)
    assert low["sr"] == low["type_acc"] == pytest.approx(6 / 7)
    assert low["re"] == 1.0  # only b succeeded, in its optimum
    assert low["interventions_per_task"] == 0.0
    assert low["clarifications_per_task"] == pytest.approx(1 / 2)
    assert low["steps_per_task"] == pytest.approx((3 + 2) / 2)
    # γ=4: 8 judged steps, 1 caught, 1 needless ask, 6 autonomous
    assert high["tsr"] == 1.0
    assert high["hsr"] == pytest.approx(7 / 8)
    assert high["intervention_recall"] == 1.0
    assert high["intervention_precision"] == pytest.approx(1 / 2)
    assert high["autonomy_recall"] == pytest.approx(6 / 7)
    assert high["autonomy_precision"] == 1.0
    assert high["sr"] == 1.0  # the intervened step executes the operator's right action
    assert high["re"] == pytest.approx((3 / 4 + 2 / 2) / 2)
    assert high["interventions_per_task"] == 1.0
    assert high["steps_per_task"] == pytest.approx((4 + 2) / 2)


def test_parallel_jobs_give_the_same_result_and_report_progress() -> None:
    calls: list[tuple[int, int]] = []
    parallel = run_stub_suite(jobs=2, progress=lambda done, total: calls.append((done, total)))
    assert parallel == run_stub_suite(jobs=1)
    assert calls[-1] == (4, 4) and [done for done, _ in calls] == [1, 2, 3, 4]


def test_empty_suite_evaluates_without_crashing() -> None:
    result = evaluate_suite("empty", "heuristic", [4], tasks=[], episode_fn=stub_task_record)
    [row] = result["results"]
    assert row["tasks"] == 0 and row["tsr"] is None and row["per_task"] == []
    assert "-" in format_table(result)


def test_task_record_counts_device_steps_and_leaves_clarifications_unjudged() -> None:
    record = task_record_from_episode(stub_episode(EpisodeJob("s", "b", 4, "x")))
    assert record.steps == 2  # COMPLETE is a declaration, not a device step
    assert record.clarifications == 1 and record.optimal_steps == 2
    assert record.labels[0].needed is None and record.labels[0].action_match is None


def test_format_table_has_one_row_per_threshold() -> None:
    table = format_table(run_stub_suite())
    lines = table.splitlines()
    assert "TSR" in lines[1] and "IntRec" in lines[1]
    assert len(lines) == 1 + 2 + 2  # title, header, rule, two rows
    assert "50.0%" in lines[3] and "100.0%" in lines[4]


def test_the_table_says_how_calibrated_the_confidence_was_and_what_chance_allows() -> None:
    """A calibrated run ends with its ECE per γ beside what a perfect confidence could
    show by chance on so few steps — without opening the JSON."""
    result = run_stub_suite()
    result["results"][1].update(ece=0.123, ece_by_chance=0.087)
    table = format_table(result)
    assert "0.123 (≤ 0.087) at γ=4" in table.splitlines()[-1]
    assert "calibration" not in format_table(run_stub_suite())  # none without a calibrator


# --- the γ plot ------------------------------------------------------------------------

SVG = "{http://www.w3.org/2000/svg}"


def test_gamma_plot_is_standalone_svg_with_both_series() -> None:
    svg = gamma_plot_svg(run_stub_suite())
    root = ET.fromstring(svg.encode())
    assert root.tag == SVG + "svg"
    groups = {g.get("id"): g for g in root.iter(SVG + "g")}
    assert {"series-tsr", "series-interventions", "legend"} <= set(groups)
    assert len(groups["series-tsr"].findall(SVG + "circle")) == 2
    assert len(groups["series-interventions"].findall(SVG + "rect")) == 2
    texts = " ".join(t.text or "" for t in root.iter(SVG + "text"))
    assert "TSR" in texts and "interventions per task" in texts and "threshold" in texts


def test_gamma_plot_skips_null_points_and_handles_one_threshold() -> None:
    result = {"suite": "s", "backend": "b", "results": [
        {"threshold": 4, "tsr": None, "interventions_per_task": 0.0},
    ]}
    root = ET.fromstring(gamma_plot_svg(result).encode())
    groups = {g.get("id"): g for g in root.iter(SVG + "g")}
    assert groups["series-tsr"].findall(SVG + "circle") == []
    assert len(groups["series-interventions"].findall(SVG + "rect")) == 1


class PerfectBackend:
    """Proposes the simulator oracle's optimal next action with full confidence: the
    upper bound, defined here so the pipeline is checked whatever backends exist."""

    name = "perfect"

    def __init__(self, device=None, task=None, **_) -> None:
        from devices.sim import Oracle

        self.device, self.oracle = device, Oracle(device, task)

    def propose(self, ctx: StepContext) -> Proposal:
        action = self.oracle.next_actions(self.device.snapshot())[0]
        return Proposal(action=action, confidence=5.0)


def test_a_perfect_backend_on_a_bundled_suite_scores_the_upper_bound() -> None:
    """End to end: the real simulator, the lead's runner, the metrics."""
    sim = pytest.importorskip("devices.sim")
    if not hasattr(sim, "SimDevice"):
        pytest.skip("the simulator's SimDevice has not landed yet")
    from agents.brain.backends import register_backend

    register_backend("test-perfect", PerfectBackend)
    result = evaluate_suite("toggles", "test-perfect", [0, 5])
    for row in result["results"]:
        assert row["tasks"] > 0
        assert row["tsr"] == 1.0 and row["sr"] == 1.0
        assert row["intervention_recall"] is None  # nothing it proposes is wrong
        assert row["re"] == 1.0  # a shortest path, counted as the oracle counts it
        assert row["interventions_per_task"] == 0.0


def broken_episode(job: EpisodeJob):
    if job.task == "b":
        raise RuntimeError("simulator exploded")
    return stub_task_record(job)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_crashing_episode_names_its_task_and_threshold(jobs: int) -> None:
    with pytest.raises(EpisodeFailed, match=r"task 'b' of suite 's' at threshold 4 failed"):
        evaluate_suite("s", "heuristic", [4], tasks=["a", "b"], episode_fn=broken_episode,
                       jobs=jobs)


def record_every_task(job: EpisodeJob):  # module level: an episode_fn for the skip tests
    return task_record_from_episode(EpisodeResult(job.task, "succeeded", True, [], 0, 0, 0))


def test_tasks_without_a_success_predicate_are_skipped_and_named() -> None:
    # everyday carries a free-form demo instruction (open_clock_demo): no predicate, so no
    # oracle and no success to score. Evaluating the suite leaves it out and says so.
    result = evaluate_suite("everyday", "heuristic", [4], episode_fn=record_every_task)
    assert result["skipped"] == ["open_clock_demo"]
    [row] = result["results"]
    tasks = [entry["task"] for entry in row["per_task"]]
    assert "open_clock_demo" not in tasks and "dnd_on" in tasks
    assert row["tasks"] == len(tasks)
    assert "skipped (no success predicate): open_clock_demo" in format_table(result)
    json.dumps(result)


def test_a_suite_with_a_demo_task_evaluates_end_to_end(tmp_path: Path) -> None:
    from agents.brain.backends import register_backend

    register_backend("test-perfect", PerfectBackend)
    suite = tmp_path / "mini.yaml"
    suite.write_text(
        "suite: mini\n"
        "tasks:\n"
        "  - {id: wifi_off, instruction: Turn Wi-Fi off, state: {settings.wifi: true},\n"
        "     success: settings.wifi == false}\n"
        "  - {id: demo, instruction: Show me the world clock}\n"
    )
    result = evaluate_suite(str(suite), "test-perfect", [4])
    assert result["skipped"] == ["demo"]
    [row] = result["results"]
    assert [entry["task"] for entry in row["per_task"]] == ["wifi_off"]
    assert row["tsr"] == 1.0


def test_named_tasks_are_not_filtered() -> None:
    result = run_stub_suite()
    assert result["skipped"] == []
    assert "skipped" not in format_table(result)
