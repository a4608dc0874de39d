"""``bench tokens``: the prompt measurements on the bundled suites (no timing asserted)."""
from __future__ import annotations

import json
from io import StringIO

from agents.evaluation.bench.tokens import bench_tokens, oracle_target, task_goal
from devices.actions import Action
from devices.sim import SimDevice, find_suite


def test_bench_tokens_reports_the_contract_keys_with_sane_values() -> None:
    result = bench_tokens(suites=("toggles",), tasks=["wifi_off_then_bluetooth_on", "dnd_on"])

    for key in ("recommend_token_ratio", "target_recall", "history_token_ratio"):
        assert isinstance(result[key], float), key
    assert 0 < result["recommend_token_ratio"] <= 1
    assert 0 <= result["target_recall"] <= 1
    assert 0 < result["history_token_ratio"] < 1  # one line per step beats full turns
    assert result["episodes"] == 2
    assert result["steps"] >= result["targeted_steps"] >= 2
    assert result["recommended_tokens_per_step"] <= result["full_tokens_per_step"]
    assert result["recommended_elements_per_step"] <= result["full_elements_per_step"]
    assert result["compact_history_tokens_per_episode"] < result["react_history_tokens_per_episode"]
    assert result["recommend_k"] >= 1 and result["tokenizer"]
    assert set(result["suites"]) == {"toggles"}
    assert result["targets_recalled"] + result["missed_targets_total"] == result["targeted_steps"]
    assert json.loads(json.dumps(result)) == result  # the command prints it as JSON


def test_the_goal_carries_the_answers_the_user_would_give() -> None:
    complex_suite = find_suite("complex")
    latte = complex_suite.task("latte_medium_hot")
    assert task_goal(latte) == f"{latte.instruction} (Less sweet please)"
    signed_out = complex_suite.task("shop_nimbus_logged_out")
    assert "My password is" in task_goal(signed_out)
    plain = find_suite("toggles").task("dnd_on")
    assert task_goal(plain) == plain.instruction


def test_a_type_targets_the_focused_field_and_a_tap_the_node_under_it() -> None:
    suite = find_suite("toggles")
    device = SimDevice("t", apps=suite.bundle)
    nodes = device.view().nodes
    icon = next(n for n in nodes if n.label == "Settings")
    assert oracle_target(Action("CLICK", x=icon.center[0], y=icon.center[1]), nodes).key == icon.key
    assert oracle_target(Action("TYPE", text="x"), nodes) is None  # no field on the launcher
    assert oracle_target(Action("PRESS_BACK"), nodes) is None


def test_the_bench_command_prints_one_json_object(monkeypatch) -> None:
    from django.core.management import call_command

    import agents.evaluation.bench.tokens as module

    original = module.bench_tokens
    monkeypatch.setattr(module, "bench_tokens", lambda: original(("toggles",), tasks=["dnd_on"]))
    out = StringIO()
    call_command("bench", "tokens", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["bench"] == "tokens" and data["episodes"] == 1
    assert {"recommend_token_ratio", "target_recall", "history_token_ratio"} <= set(data)
