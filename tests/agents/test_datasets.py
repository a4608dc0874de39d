"""Dataset loaders: the real AITZ sample, synthetic AITZ steps and StaR toggle records."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from agents.evaluation.datasets import DatasetError, load_aitz, load_dataset, load_star

SAMPLE = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "aitz-sample"
EPISODE = SAMPLE / "GOOGLE_APPS-523638528775825151"
EPISODE_JSON = EPISODE / "GOOGLE_APPS-523638528775825151.json"

needs_sample = pytest.mark.skipif(not EPISODE_JSON.is_file(), reason="AITZ sample not present")


@needs_sample
def test_aitz_sample_loads_one_episode_of_four_steps() -> None:
    [episode] = load_aitz(SAMPLE)
    assert episode.id == "523638528775825151"
    assert episode.instruction == 'open app "Clock" (install if not already installed)'
    assert [step.index for step in episode.steps] == [0, 1, 2, 3]
    for n, step in enumerate(episode.steps):
        assert (step.width, step.height) == (270, 600)
        assert step.image_path.name == f"GOOGLE_APPS-523638528775825151_{n}.png"
        assert step.image_path.is_file()


@needs_sample
def test_aitz_sample_gold_actions_decode_what_the_json_says() -> None:
    raw = json.loads(EPISODE_JSON.read_text())
    [episode] = load_aitz(EPISODE_JSON)
    gold = [step.gold.action for step in episode.steps]
    # step 0: code 6 HOME
    assert raw[0]["result_action_type"] == 6 and gold[0].type == "PRESS_HOME"
    # step 1: code 4, touch y 0.54 -> lift y 0.001: the finger moves up = SCROLL UP
    touch, lift = json.loads(raw[1]["result_touch_yx"]), json.loads(raw[1]["result_lift_yx"])
    assert raw[1]["result_action_type"] == 4 and lift[0] < touch[0]
    assert gold[1].type == "SCROLL" and gold[1].direction == "UP"
    # step 2: code 4 with touch == lift (a tap); y-first normalised -> device pixels
    ty, tx = json.loads(raw[2]["result_touch_yx"])
    assert gold[2].type == "CLICK"
    assert (gold[2].x, gold[2].y) == (round(tx * 270), round(ty * 600)) == (164, 299)
    # the tap hits the Clock icon, for which the OCR layout has no box
    assert episode.steps[2].gold.bbox is None
    # step 3: code 10 COMPLETE
    assert raw[3]["result_action_type"] == 10 and gold[3].type == "COMPLETE"


@needs_sample
def test_aitz_ui_positions_become_nodes_in_image_pixels() -> None:
    [episode] = load_aitz(EPISODE)
    step = episode.steps[3]
    assert len(step.nodes) == 11
    clock = next(node for node in step.nodes if node.text == "Clock")
    assert clock.bounds == (83, 43, 101, 48)  # [y=43, x=83, h=5, w=18]
    icon = step.nodes[0]
    assert icon.text == "" and icon.content_desc == "time icon"


def write_episode(folder: Path, steps: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (100, 200), "white").save(folder / "ep_0.png")
    records = []
    for n, fields in enumerate(steps):
        records.append({
            "episode_id": "ep", "step_id": n, "instruction": "search coffee",
            "image_path": "general/ep/ep_0.png",
            "ui_positions": "[[20, 10, 20, 50], [100, 0, 50, 100]]",
            "ui_text": '["Search", "Results"]',
            "ui_types": '["TEXT", "TEXT"]',
            "result_action_text": "", "result_touch_yx": "[-1.0, -1.0]",
            "result_lift_yx": "[-1.0, -1.0]", **fields,
        })
    path = folder / "ep.json"
    path.write_text(json.dumps(records))
    return path


def test_aitz_tap_inside_an_element_gets_its_box_as_gold_bbox(tmp_path: Path) -> None:
    path = write_episode(tmp_path / "ep", [
        {"result_action_type": 4, "result_touch_yx": "[0.15, 0.3]", "result_lift_yx": "[0.15, 0.3]"},
        {"result_action_type": 3, "result_action_text": "coffee"},
        {"result_action_type": 4, "result_touch_yx": "[0.5, 0.8]", "result_lift_yx": "[0.5, 0.2]"},
        {"result_action_type": 7},
    ])
    [episode] = load_aitz(path)
    tap, typed, swipe, enter = (step.gold for step in episode.steps)
    assert (tap.action.x, tap.action.y) == (30, 30)
    assert tap.bbox == (10, 20, 60, 40)  # the "Search" box, [y, x, h, w] = [20, 10, 20, 50]
    assert typed.action.type == "TYPE" and typed.action.text == "coffee"
    assert swipe.action.type == "SCROLL" and swipe.action.direction == "LEFT"
    assert enter.action.type == "PRESS_ENTER"


def test_aitz_errors_name_the_file_and_the_step(tmp_path: Path) -> None:
    path = write_episode(tmp_path / "ep", [{"result_action_type": 5},
                                           {"result_action_type": 99}])
    with pytest.raises(DatasetError, match=r"ep\.json step 1: unknown result_action_type 99"):
        load_aitz(path)


def test_aitz_missing_screenshot_and_bad_json_are_reported(tmp_path: Path) -> None:
    path = write_episode(tmp_path / "ep", [{"result_action_type": 10}])
    (tmp_path / "ep" / "ep_0.png").unlink()
    with pytest.raises(DatasetError, match=r"ep\.json step 0: screenshot .* not found"):
        load_aitz(path)
    path.write_text("[{")
    with pytest.raises(DatasetError, match=r"ep\.json: not valid JSON"):
        load_aitz(path)
    with pytest.raises(DatasetError, match="no such file"):
        load_aitz(tmp_path / "missing")


def write_star(tmp_path: Path, records: list[dict]) -> Path:
    Image.new("RGB", (200, 400), "white").save(tmp_path / "wifi.png")
    path = tmp_path / "toggles.json"
    path.write_text(json.dumps(records))
    return path


def test_star_records_give_a_positive_and_a_negative_sample(tmp_path: Path) -> None:
    path = write_star(tmp_path, [
        {"id": "wifi", "image": "wifi.png", "posInstruction": "Turn on Wi-Fi",
         "negInstruction": "Turn off Wi-Fi", "bbox": [100, 200, 300, 250], "state": 0,
         "function": "Wi-Fi"},
        {"image": "wifi.png", "posInstruction": "Enable dark mode", "bbox": [0, 0, 500, 500]},
    ])
    episodes = load_star(path)
    assert [e.id for e in episodes] == ["wifi+", "wifi-", "1+"]
    positive, negative = episodes[0].steps[0], episodes[1].steps[0]
    # bbox 0-1000 -> pixels of the 200 x 400 image
    assert positive.gold.bbox == (20, 80, 60, 100)
    assert positive.gold.action.to_json() == {"type": "CLICK", "x": 40, "y": 90}
    assert positive.toggle and positive.polarity == "positive"
    assert positive.instruction == "Turn on Wi-Fi"
    assert negative.gold.action.type == "COMPLETE" and negative.polarity == "negative"
    assert negative.inverse == positive.gold
    assert (negative.width, negative.height) == (200, 400)
    assert load_dataset("star", path)[2].instruction == "Enable dark mode"


@pytest.mark.parametrize("record, message", [
    ({"image": "wifi.png", "bbox": [0, 0, 10, 10]}, r"record 0: missing field 'posInstruction'"),
    ({"image": "wifi.png", "posInstruction": "x", "bbox": [0, 0, 1200, 10]}, r"record 0: bbox"),
    ({"image": "gone.png", "posInstruction": "x", "bbox": [0, 0, 10, 10]}, r"record 0: image 'gone.png' not found"),
])
def test_star_errors_name_the_file_and_the_record(tmp_path: Path, record: dict,
                                                  message: str) -> None:
    path = write_star(tmp_path, [record])
    with pytest.raises(DatasetError, match=r"toggles\.json " + message):
        load_star(path)


def test_unknown_format_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="unknown dataset format"):
        load_dataset("androidcontrol", tmp_path)
