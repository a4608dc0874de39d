"""The oracle: shortest paths on small hand-built apps, judging, bounds, every bundled task."""
from __future__ import annotations

import pytest

from agents.brain.backends.base import StepContext
from agents.brain.backends.oracle import OracleBackend
from devices.actions import Action
from devices.sim import NoPathError, Oracle, SimDevice, bundled_suite_names, find_suite
from tests.devices.sim_helpers import hand_built, node

# Start → "Long way" → Middle → "Finish" → End, or Start → "Shortcut" → End; End holds the
# switch the task wants on. "Decoy" only sets a variable the task does not care about.
CHAIN_APP = """
app: {id: chain, name: Chain}
state: {flag: false, noise: false, count: 0}
screens:
  start:
    elements:
      - {kind: button, id: long_way, text: Long way, on_tap: {go: middle}}
      - {kind: button, id: shortcut, text: Shortcut, on_tap: {go: end}}
      - {kind: button, id: decoy, text: Decoy, on_tap: {toggle: noise}}
  middle:
    elements:
      - {kind: button, id: finish, text: Finish, on_tap: {go: end}}
  end:
    elements:
      - {kind: switch, id: flag_switch, text: Flag, var: flag}
"""
CHAIN_SUITE = """
tasks:
  - {id: flag_on, instruction: Turn the flag on, success: chain.flag == true}
  - {id: already, instruction: Turn the flag on, state: {chain.flag: true}, success: chain.flag}
  - {id: never, instruction: Count to five, success: chain.count == 5}
  - {id: in_app, instruction: Turn the flag on, start: {app: chain}, success: chain.flag}
"""


@pytest.fixture()
def chain(tmp_path):
    bundle, suite = hand_built(tmp_path, CHAIN_APP, CHAIN_SUITE)
    return bundle, suite


def _phone(bundle, task) -> SimDevice:
    device = SimDevice("o", apps=bundle)
    device.reset(task)
    return device


def test_distance_is_the_shortest_path_length(chain):
    bundle, suite = chain
    task = suite.task("flag_on")
    device = _phone(bundle, task)
    oracle = Oracle(device, task)
    assert oracle.distance() == 3  # open the app, Shortcut, tap the switch
    path = oracle.shortest_path()
    assert len(path) == 3
    assert [a.element for a in path[1:]] == ["Shortcut", "Flag"]
    in_app = suite.task("in_app")
    assert Oracle(_phone(bundle, in_app), in_app).distance() == 2


def test_all_optimal_first_actions_are_offered(chain):
    bundle, suite = chain
    task = suite.task("flag_on")
    oracle = Oracle(_phone(bundle, task), task)
    kinds = {(a.type, a.element or a.app) for a in oracle.next_actions()}
    assert kinds == {("CLICK", "Chain"), ("OPENAPP", "Chain")}


def test_an_action_off_every_shortest_path_is_judged_wrong(chain):
    bundle, suite = chain
    task = suite.task("in_app")
    device = _phone(bundle, task)
    oracle = Oracle(device, task)
    nodes = device.observe().nodes
    at = lambda rid: Action("CLICK", x=node(nodes, rid=rid).center[0],  # noqa: E731
                            y=node(nodes, rid=rid).center[1])
    state = device.snapshot()
    assert oracle.judge(state, at("shortcut"))
    assert not oracle.judge(state, at("long_way"))  # reaches the goal, but not shortest
    assert not oracle.judge(state, at("decoy"))
    assert not oracle.judge(state, Action("WAIT"))  # a no-op never gets closer
    assert not oracle.judge(state, Action("COMPLETE"))  # not done yet
    # Any point inside the right element is right, not just its centre.
    left, top, right, bottom = node(nodes, rid="shortcut").bounds
    assert oracle.judge(state, Action("CLICK", x=left + 5, y=bottom - 5))


def test_complete_is_the_only_right_action_once_the_goal_holds(chain):
    bundle, suite = chain
    task = suite.task("already")
    device = _phone(bundle, task)
    oracle = Oracle(device, task)
    assert oracle.distance() == 0
    assert oracle.next_actions() == [Action("COMPLETE")]
    assert oracle.judge(None, Action("COMPLETE"))
    assert not oracle.judge(None, Action("OPENAPP", app="Chain"))


def test_unreachable_goal_raises_no_path_error(chain):
    bundle, suite = chain
    task = suite.task("never")
    oracle = Oracle(_phone(bundle, task), task)
    with pytest.raises(NoPathError, match="no path to the success state of task 'never'"):
        oracle.distance()
    assert oracle.judge(None, Action("IMPOSSIBLE"))
    bounded = suite.task("flag_on")
    with pytest.raises(NoPathError, match="within 2 actions"):
        Oracle(_phone(bundle, bounded), bounded, max_depth=2).distance()


def test_typing_an_equivalent_text_is_judged_right():
    suite = find_suite("everyday")
    task = suite.task("add_alarm_645")  # success: clock.custom_time ~= "6:45 AM"
    device = SimDevice("o", apps=suite.bundle)
    device.reset(task)
    oracle = Oracle(device, task)
    path = oracle.shortest_path()
    typing = next(i for i, a in enumerate(path) if a.type == "TYPE")
    for action in path[:typing]:
        device.perform(action)
    assert oracle.judge(device.snapshot(), Action("TYPE", text="6:45 am"))
    assert not oracle.judge(device.snapshot(), Action("TYPE", text="7:45 AM"))


def test_hidden_preference_steers_the_oracle_and_its_answers():
    suite = find_suite("complex")
    task = suite.task("latte_medium_hot")
    device = SimDevice("o", apps=suite.bundle)
    device.reset(task)
    oracle = Oracle(device, task)
    for action in oracle.shortest_path():
        device.perform(action)
    assert device.state_vars["coffee.sweetness"] == "less"
    assert oracle.answer("How sweet should it be?") == "Less sweet please"


def test_oracle_backend_proposes_the_optimal_action_with_full_confidence():
    suite = find_suite("toggles")
    task = suite.task("wifi_off")
    device = SimDevice("o", apps=suite.bundle)
    device.reset(task)
    backend = OracleBackend(device=device, task=task)
    assert backend.name == "oracle"
    proposal = backend.propose(StepContext(task.instruction, device.observe()))
    assert proposal.confidence == 5.0 and proposal.action.element == "Wi-Fi"
    device.perform(proposal.action)
    proposal = backend.propose(StepContext(task.instruction, device.observe()))
    assert proposal.action == Action("COMPLETE")


@pytest.mark.parametrize("suite_name", bundled_suite_names())
def test_every_bundled_task_is_solved_by_replaying_the_oracle_path(suite_name):
    suite = find_suite(suite_name)
    for task in suite.tasks:
        if not task.has_predicate:
            continue
        device = SimDevice("replay", apps=suite.bundle)
        device.reset(task)
        oracle = Oracle(device, task)
        distance = oracle.distance()
        path = oracle.shortest_path()
        assert len(path) == distance
        fresh = SimDevice("fresh", apps=suite.bundle)
        fresh.reset(task)
        for action in path:
            assert oracle.judge(fresh.snapshot(), action), (task.id, action)
            outcome = fresh.perform(action)
            assert outcome.ok, (task.id, action, outcome.error)
        assert fresh.check(task), task.id
        if "verify" in task.tags:
            assert distance == 0, task.id


# Shortest lengths recorded from the plain breadth-first oracle before it was made faster
# (2026-11-21). Any speed-up must keep them: the oracle is the ground truth for RE and
# for judging. The profiles count the optimal next actions along the path the oracle
# takes, so a search that finds the length but misses a tied optimal action fails too.
PINNED_LENGTHS = {
    ("complex", "shop_earbuds_delivery"): 10,
    ("complex", "shop_nimbus_logged_out"): 9,
    ("complex", "shop_runner_network_failure"): 9,
    ("complex", "shop_travel_fold_product_ad"): 9,
    ("complex", "latte_with_permission"): 7,
    ("complex", "cappuccino_loading"): 8,
    ("complex", "message_mom_popup_at_step"): 6,
    ("complex", "bluetooth_on_with_popup"): 4,
    ("everyday", "shop_wireless_under_100"): 10,
    ("everyday", "shop_buy_earbuds"): 9,
    ("everyday", "dnd_then_text_alex"): 8,
    ("everyday", "flat_white_signed_out"): 9,
    ("everyday", "add_alarm_645"): 5,
    ("everyday", "location_on_popup_at_step"): 4,
    ("toggles", "wifi_off_then_bluetooth_on"): 6,
    ("toggles", "alarm_9am_off"): 2,
    ("toggles", "wifi_off_verify"): 0,
}
PINNED_PROFILES = {
    ("complex", "shop_earbuds_delivery"): [2, 2, 1, 1, 1, 1, 1, 1, 1, 1],
    ("everyday", "dnd_then_text_alex"): [4, 1, 1, 2, 1, 1, 1, 1],
    ("complex", "message_mom_popup_at_step"): [2, 1, 2, 1, 1, 1],
    ("complex", "cappuccino_loading"): [2, 1, 1, 1, 3, 2, 1, 1],
}


@pytest.mark.parametrize("suite_name,task_id", sorted(PINNED_LENGTHS))
def test_shortest_lengths_match_the_recorded_values(suite_name, task_id):
    suite = find_suite(suite_name)
    task = suite.task(task_id)
    device = SimDevice("pinned", apps=suite.bundle)
    device.reset(task)
    assert Oracle(device, task).distance() == PINNED_LENGTHS[(suite_name, task_id)]


@pytest.mark.parametrize("suite_name,task_id", sorted(PINNED_PROFILES))
def test_every_tied_optimal_action_is_still_offered(suite_name, task_id):
    suite = find_suite(suite_name)
    task = suite.task(task_id)
    device = SimDevice("pinned", apps=suite.bundle)
    device.reset(task)
    oracle = Oracle(device, task)
    profile = []
    for action in oracle.shortest_path():
        profile.append(len(oracle.next_actions()))
        device.perform(action)
    assert profile == PINNED_PROFILES[(suite_name, task_id)]
    assert device.check(task)
