"""Dataset replay on the StaR state-control benchmark's own JSON layout, and no loader
handing the agent gold information (issue 12 item 9)."""
from __future__ import annotations

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from agents.brain.backends.base import Proposal, StepContext
from agents.brain.backends.openai import OpenAIBackend
from agents.evaluation.datasets import DatasetError, load_aitz, load_star
from agents.evaluation.suites import evaluate_dataset, format_table
from devices.actions import Action
from tests.agents.fake_openai import FakeOpenAI, Reply

STAR = Path(__file__).resolve().parent / "fixtures" / "star"
RECORDS = STAR / "state_control_test.json"


def test_the_benchmarks_own_records_load_with_their_gold_actions():
    episodes = load_star(RECORDS)
    assert [e.id for e in episodes] == ["0+", "0-", "1+", "1-", "2+"]
    wifi_on, wifi_off = episodes[0].steps[0], episodes[1].steps[0]
    # images[0] is relative to the dataset root (the fixture folder), not to the file's
    # folder alone; the screenshot's pixels are the replay's device pixels.
    assert wifi_on.image_path == STAR / "GUIData/stateControlBenchmark/amex/amex_settings_0001.png"
    assert (wifi_on.width, wifi_on.height) == (270, 600)
    # posAtlasAction on the 0-1000 grid → pixels; bbox kept for the match (useBbox).
    assert wifi_on.gold.action.to_json() == {"type": "CLICK", "x": 238, "y": 177}
    assert wifi_on.gold.bbox == (220, 168, 256, 186)
    assert wifi_on.toggle and wifi_on.polarity == "positive"
    assert wifi_off.gold.action.type == "COMPLETE" and wifi_off.inverse == wifi_on.gold
    display = episodes[4].steps[0]
    assert not display.toggle  # is_switch false: the 14% rule, not the toggle's 4%
    assert display.gold.bbox is None  # useBbox false: distance only


def test_no_gold_reaches_the_agent_only_the_screenshot():
    seen: list[StepContext] = []

    class Watcher:
        name = "watcher"

        def propose(self, ctx: StepContext) -> Proposal:
            seen.append(ctx)
            return Proposal(action=Action("COMPLETE"), confidence=3)

    evaluate_dataset("star", RECORDS, Watcher())
    assert len(seen) == 5
    for ctx in seen:
        # StaR has no UI tree; what the agent gets is read from the pixels (OCR, switch
        # shapes), every node marked detected — none is made from the gold box
        assert ctx.observation.nodes and all(n.extra.get("detected") for n in ctx.observation.nodes)
        assert not any(n.extra.get("source") not in ("ocr", "shape") for n in ctx.observation.nodes)
        assert ctx.observation.image.size == (270, 600)
        shown = json.dumps([ctx.instruction, ctx.observation.extra, [h.summary for h in ctx.history]])
        for secret in ("Disabled", "Enabled", "is_switch", "881", "bbox"):
            assert secret not in shown


def test_the_heuristic_reads_the_screenshots_by_ocr_and_is_scored():
    """Before issue 27 the heuristic could not act on StaR at all (no UI tree: 0 steps
    scored); it now reads each screenshot's text and switches."""
    result = evaluate_dataset("star", RECORDS, "heuristic")
    assert result["steps"] == 5 and result["unscored_steps"] == 0 and result["ocr_steps"] == 5
    assert result["toggle"]["p_amr"] == 1.0 and result["toggle"]["n_fpr"] == 0.0


def test_a_screenshot_with_nothing_readable_is_not_scored_for_the_heuristic(tmp_path):
    from PIL import Image

    root = tmp_path / "GUIData" / "stateControlBenchmark" / "amex"
    root.mkdir(parents=True)
    Image.new("RGB", (270, 600), "white").save(root / "amex_settings_0001.png")
    record = json.loads(RECORDS.read_text())[0]
    path = tmp_path / "blank.json"
    path.write_text(json.dumps([record]))
    result = evaluate_dataset("star", path, "heuristic")
    assert result["steps"] == 0 and result["unscored_steps"] == 2
    assert "cannot act on a screenshot alone" in result["unsupported"]
    assert "NOT SCORED" in format_table(result)
    out = tmp_path / "star.json"
    with pytest.raises(CommandError, match="nothing was scored"):
        call_command("evaluate_dataset", str(path), "--format", "star", "--backend",
                     "heuristic", "--json", str(out), stdout=StringIO())
    assert json.loads(out.read_text())["unscored_steps"] == 2


def test_a_screenshot_model_is_scored_on_the_real_layout(fake_openai: FakeOpenAI):
    # The model reads the screenshot (sent as an image) and answers in OS-Atlas form:
    # it flips Wi-Fi (right), flips it again when told to turn it off (wrong: it is off).
    fake_openai.script(*[Reply.completion(f"Action: CLICK <point>[[881, 295]]</point>\nScore: {s}")
                         for s in (5, 5, 5, 5, 5)])
    backend = OpenAIBackend("kairos-test-model", base_url=fake_openai.base_url, api_key="k",
                            environ={}, backoff=0.001, backoff_max=0.002, timeout=5.0)
    result = evaluate_dataset("star", RECORDS, backend)
    assert result["steps"] == 5 and result["unscored_steps"] == 0
    assert "unsupported" not in result
    toggle = result["toggle"]  # the Display row is no switch: not a toggle sample
    assert (toggle["positives"], toggle["negatives"]) == (2, 2)
    assert toggle["p_amr"] == 1.0 and toggle["n_fpr"] == 1.0  # both negatives flipped
    assert result["sr"] == pytest.approx(2 / 5)  # and the Display row was elsewhere
    body = fake_openai.requests[0]
    assert any(part["type"] == "image_url" for part in body["messages"][0]["content"])


@pytest.mark.parametrize("change, message", [
    ({"images": "GUIData/x.png"}, "images must be a non-empty list of paths"),
    ({"images": ["GUIData/gone.png"], "img_filename": "gone.png"},
     "image 'GUIData/gone.png' not found"),
    ({"image_width": 1080}, "the record says the image is 1080x600 but the file is 270x600"),
    ({"posAtlasAction": "CLICK <point>[[1200, 5]]</point>"}, "posAtlasAction: CLICK point"),
    ({"annotation": "switch"}, "annotation must be an object"),
])
def test_bad_records_name_the_file_the_record_and_the_field(tmp_path, change, message):
    shutil.copytree(STAR / "GUIData", tmp_path / "GUIData")
    record = {**json.loads(RECORDS.read_text())[0], **change}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([record]))
    with pytest.raises(DatasetError, match="bad.json record 0: ") as info:
        load_star(path)
    assert message in str(info.value)


def test_aitz_elements_do_not_depend_on_the_gold_action(tmp_path):
    """AITZ's UI elements are the screen's detected texts and icons; the gold action
    only picks the box used for matching, and never changes what the agent is shown."""
    from PIL import Image

    Image.new("RGB", (100, 200)).save(tmp_path / "s.png")
    step = {"episode_id": "e", "step_id": 0, "instruction": "open settings",
            "image_path": "s.png", "ui_positions": "[[10, 10, 20, 30], [100, 10, 20, 30]]",
            "ui_text": '["Settings", "Clock"]', "ui_types": '["TEXT", "TEXT"]',
            "result_action_type": 4, "result_touch_yx": "[0.1, 0.2]",
            "result_lift_yx": "[0.1, 0.2]"}
    other = {**step, "result_touch_yx": "[0.55, 0.2]", "result_lift_yx": "[0.55, 0.2]"}
    (tmp_path / "a.json").write_text(json.dumps([step]))
    (tmp_path / "b.json").write_text(json.dumps([other]))
    [a], [b] = load_aitz(tmp_path / "a.json"), load_aitz(tmp_path / "b.json")
    assert a.steps[0].nodes == b.steps[0].nodes
    assert a.steps[0].gold.bbox != b.steps[0].gold.bbox


NOBOX = STAR / "state_control_nobox.json"


def test_records_without_a_box_are_judged_by_distance_from_their_click_coordinate():
    """StaR's real file has records with ``bbox: null``, ``useBbox: false`` and a
    ``clickCoordinate``: App. A.2 then judges a click by its distance alone — 4 % of the
    screen for a toggle, 14 % for anything else."""
    from agents.brain.matching import actions_match

    problems: list = []
    episodes = {e.id: e.steps[0] for e in load_star(NOBOX, problems)}
    assert list(episodes) == ["0+", "0-", "1+", "1-", "3+"]
    wifi, display = episodes["1+"], episodes["3+"]
    assert wifi.gold.bbox is None and wifi.gold.action.to_json() == {
        "type": "CLICK", "x": 238, "y": 177}  # [881, 295] on the 0-1000 grid, 270x600
    assert wifi.toggle and not display.toggle and display.gold.bbox is None

    def judged(step, dx):
        click = Action("CLICK", x=step.gold.action.x + dx, y=step.gold.action.y)
        return actions_match(click, step.gold, screen=(270, 600), toggle=step.toggle)[1]

    assert judged(wifi, 10) and not judged(wifi, 20)  # 4 % of 270 px is 10.8 px
    assert judged(display, 20) and judged(display, 37) and not judged(display, 40)  # 14 %
    assert episodes["1-"].gold.action.type == "COMPLETE"
    assert episodes["1-"].inverse == wifi.gold


def test_an_unreadable_record_is_reported_and_the_run_goes_on():
    problems: list = []
    load_star(NOBOX, problems)
    assert [p["record"] for p in problems] == [2, 4]
    assert "bbox is null and the record has no clickCoordinate" in problems[0]["reason"]
    assert "amex_lost_0099.png' not found" in problems[1]["reason"]
    with pytest.raises(DatasetError, match="record 2: bbox is null"):
        load_star(NOBOX)  # a caller that collects nothing still hears of the first one
    result = evaluate_dataset("star", NOBOX, "heuristic")
    assert result["episodes"] == 5 and result["unreadable_records"] == 2
    table = format_table(result)
    assert "UNREADABLE record 2:" in table and "UNREADABLE record 4:" in table
    assert "2 record(s) could not be read" in table
    out = StringIO()
    call_command("evaluate_dataset", str(NOBOX), "--format", "star", stdout=out)
    assert "UNREADABLE record 4" in out.getvalue()


def test_aitz_elements_are_marked_detected_and_a_broken_episode_does_not_stop_the_run(tmp_path):
    from PIL import Image

    Image.new("RGB", (100, 200)).save(tmp_path / "s.png")
    step = {"episode_id": "e", "step_id": 0, "instruction": "open settings",
            "image_path": "s.png", "ui_positions": "[[10, 10, 20, 30]]",
            "ui_text": '["Settings"]', "ui_types": '["TEXT"]',
            "result_action_type": 4, "result_touch_yx": "[0.1, 0.2]",
            "result_lift_yx": "[0.1, 0.2]"}
    (tmp_path / "a.json").write_text(json.dumps([step]))
    (tmp_path / "b.json").write_text(json.dumps([{**step, "result_action_type": 99}]))
    problems: list = []
    [episode] = load_aitz(tmp_path, problems)
    node = episode.steps[0].nodes[0]
    assert node.text == "Settings" and node.extra["detected"] and node.cls == "ocr.Text"
    assert problems[0]["record"] == 1 and "unknown result_action_type 99" in problems[0]["reason"]
