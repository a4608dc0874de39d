"""Training-data export: read back as LLaMA-Factory would, and as the agent's parser would."""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from agents.runtime.models import Ticket
from agents.brain.scoring import ScoredAction, parse_scored_action
from devices.actions import action_to_text, validate_action
from tests.frontend.review_data import run_episodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def episodes(demo, scripted, inline_steps, phones):
    return run_episodes(demo, scripted, inline_steps, phones)


def export(tmp_path: Path, *args: str) -> dict:
    out = io.StringIO()
    call_command("export_training", *args, "--out", str(tmp_path), "--json", stdout=out)
    return json.loads(out.getvalue())


def load_llamafactory(root: Path) -> list[dict]:
    """Load the dataset the way LLaMA-Factory's sharegpt converter reads it (data/README.md:
    dataset_info.json names the file, the columns and the role tags; messages alternate
    user / assistant starting with the user; one <image> tag per entry of ``images``;
    image paths are relative to the dataset directory)."""
    info = json.loads((root / "dataset_info.json").read_text())
    assert len(info) == 1
    (name, entry), = info.items()
    assert entry["formatting"] == "sharegpt"
    columns, tags = entry["columns"], entry["tags"]
    records = [json.loads(line) for line in (root / entry["file_name"]).read_text().splitlines()]
    for record in records:
        assert set(record) == {columns["messages"], columns["images"]}
        messages = record[columns["messages"]]
        assert len(messages) % 2 == 0 and messages
        for turn, message in enumerate(messages):
            expected = tags["user_tag"] if turn % 2 == 0 else tags["assistant_tag"]
            assert message[tags["role_tag"]] == expected
            assert isinstance(message[tags["content_tag"]], str)
        images = record[columns["images"]]
        tag_count = sum(m[tags["content_tag"]].count("<image>") for m in messages)
        assert tag_count == len(images) == 1
        for image in images:
            assert not Path(image).is_absolute() and (root / image).is_file(), image
    return records


def test_llamafactory_export_loads_and_its_targets_parse_back(tmp_path, episodes):
    summary = export(tmp_path, "--format", "llamafactory")
    records = load_llamafactory(tmp_path)
    # approve → the agent's action scored 5; edit → the agent's scored 1 plus the person's
    # scored 5; take-over → labelled by its first input, which tapped the proposed
    # Settings icon: the agent's action scored 5, not 1 (issue 24).
    assert summary["records"] == 3 and len(records) == 4 == summary["samples"]
    scores = sorted(r["messages"][1]["content"].rsplit("Score: ", 1)[1] for r in records)
    assert scores == ["1", "5", "5", "5"]

    by_target: dict[str, list[str]] = {}
    for r in records:
        by_target.setdefault(r["messages"][1]["content"], []).append(r["messages"][0]["content"])
    for ticket in Ticket.objects.select_related("step", "task__device"):
        screen = (ticket.step.screen_width, ticket.step.screen_height)
        proposed = validate_action(ticket.step.proposed_action, screen)
        label = {"approve": 5, "edit": 1, "takeover": 5}[ticket.decision]
        target = f"Action: {action_to_text(proposed, screen)}\nScore: {label}"
        assert target in by_target
        parsed = parse_scored_action(target, screen)
        assert isinstance(parsed, ScoredAction) and parsed.score == label
        assert action_to_text(parsed.action, screen) == action_to_text(proposed, screen)
        assert abs(parsed.action.x - proposed.x) <= screen[0] / 1000 + 1
        prompt = next(p for p in by_target[target] if ticket.task.instruction in p)
        assert prompt.endswith("Screenshot:\n<image>")
        assert "Settings" in prompt  # the UI elements of that screen
    assert any(r["messages"][1]["content"].startswith("Action: PRESS_HOME\nScore: 5")
               for r in records)


def test_jsonl_export_writes_one_full_record_per_handoff(tmp_path, episodes):
    summary = export(tmp_path, "--format", "jsonl")
    lines = [json.loads(x) for x in (tmp_path / "kairos_handoffs.jsonl").read_text().splitlines()]
    assert summary["records"] == len(lines) == 3
    edited = next(r for r in lines if r["human"]["decision"] == "edit")
    assert edited["instruction"] == "Go back to the home screen"
    assert edited["agent"]["confidence"] == 2.0 and edited["agent"]["action"]["type"] == "CLICK"
    assert edited["human"]["action"] == {"type": "PRESS_HOME"}
    assert edited["human"]["operator"] == "operator" and edited["label"] == 1
    assert edited["ui_elements"] and (tmp_path / edited["screenshot"]).is_file()
    assert not (tmp_path / "dataset_info.json").exists()


def test_episodes_export_every_step_including_the_operators(tmp_path, episodes):
    export(tmp_path, "--format", "jsonl", "--episodes")
    lines = [json.loads(x) for x in (tmp_path / "kairos_episodes.jsonl").read_text().splitlines()]
    assert len(lines) == 3
    taken = next(e for e in lines if e["instruction"] == "Turn on Wi-Fi for me")
    assert [s["decided_by"] for s in taken["steps"]] == ["agent", "operator", "agent"]
    assert taken["steps"][0]["ticket"]["decision"] == "takeover"
    assert taken["steps"][1]["proposed_action"] is None
    assert taken["success"] is None or isinstance(taken["success"], bool)

    out = tmp_path / "lf"
    summary = export(out, "--format", "llamafactory", "--episodes")
    records = load_llamafactory(out)
    assert summary["samples"] == len(records) >= 3


def test_filters_select_what_is_exported_and_bad_ones_are_refused(tmp_path, episodes):
    assert export(tmp_path / "a", "--format", "jsonl", "--decision", "edit")["records"] == 1
    assert export(tmp_path / "b", "--format", "jsonl", "--since", "2999-01-01")["records"] == 0
    assert export(tmp_path / "c", "--format", "jsonl", "--backend", "heuristic")["records"] == 0
    with pytest.raises(CommandError, match="is not a date"):
        export(tmp_path / "d", "--format", "jsonl", "--since", "last week")
    with pytest.raises(CommandError, match="before --since"):
        export(tmp_path / "e", "--format", "jsonl", "--since", "2026-02-01",
               "--until", "2026-01-01")
    with pytest.raises(CommandError):
        export(tmp_path / "f", "--format", "csv")


def test_the_log_filter_downloads_as_a_streamed_zip(client, demo, episodes, tmp_path):
    client.force_login(demo["admin"])
    response = client.get("/review/export.zip", {"decision": "edit"})
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "application/zip"
    assert "attachment" in response["Content-Disposition"]
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    archive.extractall(tmp_path)
    records = load_llamafactory(tmp_path)
    assert len(records) == 2  # the edited handoff: the agent's action and the person's

    episodes = client.get("/review/export.zip", {"q": "wi-fi", "format": "jsonl",
                                                 "episodes": "1"})
    archive = zipfile.ZipFile(io.BytesIO(b"".join(episodes.streaming_content)))
    lines = archive.read("kairos_episodes.jsonl").decode().splitlines()
    assert [json.loads(x)["instruction"] for x in lines] == ["Turn on Wi-Fi for me"]
    assert "dataset_info.json" not in archive.namelist()

    bad = client.get("/review/export.zip", {"format": "xml", "min_conf": "7"})
    assert bad.status_code == 400
    assert "format" in bad.json()["detail"] and "min_conf" in bad.json()["detail"]
