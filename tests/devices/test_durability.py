"""The device host's action log and saved phone states (devices/durability.py)."""
from __future__ import annotations

from devices.actions import Action
from devices.durability import read_action_log
from devices.host import attach_journal, build_sim_host


def open_settings(host, step: int = 0):
    return host.handle("p1", "perform", {"action": Action("OPENAPP", app="Settings").to_json(),
                                         "origin": {"task": "t1", "step": step}})


def test_a_new_host_on_the_same_journal_restores_the_phone(tmp_path):
    host = build_sim_host(["p1"])
    assert attach_journal(host, tmp_path) == []
    open_settings(host)

    again = build_sim_host(["p1"])
    assert attach_journal(again, tmp_path) == ["p1"]
    assert again.device("p1").observe().app == "com.kairos.settings"


def test_each_steps_action_runs_once_and_is_logged_with_its_ids(tmp_path):
    host = build_sim_host(["p1"])
    attach_journal(host, tmp_path)
    first = open_settings(host)
    host.handle("p1", "perform", {"action": {"type": "PRESS_HOME"}})  # no step named
    repeated = open_settings(host)  # the same step again: not run, first outcome back

    assert first["changed"] and repeated["details"].get("repeated") is True
    assert host.device("p1").observe().app != "com.kairos.settings"  # still home
    log = read_action_log(tmp_path / "actions.jsonl")
    assert [(e["task"], e["step"], e["action"]["type"]) for e in log] == [
        ("t1", 0, "OPENAPP"), (None, None, "PRESS_HOME")]
    assert host.handle("p1", "performed", {"origin": {"task": "t1", "step": 0}})["changed"]
    assert host.handle("p1", "performed", {"origin": {"task": "t1", "step": 1}}) is None


def test_the_steps_performed_survive_a_restart(tmp_path):
    host = build_sim_host(["p1"])
    attach_journal(host, tmp_path)
    open_settings(host)
    again = build_sim_host(["p1"])
    attach_journal(again, tmp_path)
    assert again.handle("p1", "performed", {"origin": {"task": "t1", "step": 0}}) is not None


def test_a_damaged_state_file_starts_the_phone_fresh(tmp_path):
    host = build_sim_host(["p1"])
    attach_journal(host, tmp_path)
    open_settings(host)
    (tmp_path / "p1.state.json").write_text("{not json")

    again = build_sim_host(["p1"])
    assert attach_journal(again, tmp_path) == []
    assert again.device("p1").observe().app != "com.kairos.settings"


def test_a_log_line_cut_by_a_kill_is_ignored(tmp_path):
    log = tmp_path / "actions.jsonl"
    log.write_text('{"task": "a", "step": 0}\n{"task": "a", "st')
    assert read_action_log(log) == [{"task": "a", "step": 0}]


def test_a_kill_between_saving_the_state_and_logging_is_repaired_at_restore(tmp_path):
    host = build_sim_host(["p1"])
    attach_journal(host, tmp_path)
    open_settings(host)
    log = tmp_path / "actions.jsonl"
    log.write_text("")  # as if killed after the state was saved, before the log line

    again = build_sim_host(["p1"])
    attach_journal(again, tmp_path)

    assert [(e["task"], e["step"]) for e in read_action_log(log)] == [("t1", 0)]
    assert again.device("p1").observe().app == "com.kairos.settings"
    attach_journal(build_sim_host(["p1"]), tmp_path)  # a second restart adds nothing
    assert len(read_action_log(log)) == 1


def test_a_reset_keeps_the_steps_already_performed(tmp_path):
    host = build_sim_host(["p1"])
    attach_journal(host, tmp_path)
    open_settings(host)
    host.handle("p1", "reset", {})
    again = build_sim_host(["p1"])
    attach_journal(again, tmp_path)
    assert again.handle("p1", "performed", {"origin": {"task": "t1", "step": 0}}) is not None
