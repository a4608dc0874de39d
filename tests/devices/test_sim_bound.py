"""The oracle's A* lower bound and value classes: sound (consistent, never above the true
distance), and the oracle stays exact where the bound does not apply."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from devices.sim import Oracle, SimDevice, find_suite
from devices.sim.bound import conjuncts
from devices.sim.expr import parse
from devices.sim.oracle import clear_cache
from devices.sim.world import World
from tests.devices.sim_helpers import hand_built

ERRANDS = str(Path(__file__).resolve().parent / "fixtures" / "errands.yaml")

# Tasks with every perturbation kind, the bound's chained conjuncts and cross-app goals
# (the two-app errands use the additive bound over their apps).
TASKS = [
    (ERRANDS, "buy_earbuds_then_text"),
    (ERRANDS, "alarm_then_text"),
    ("complex", "shop_earbuds_delivery"),
    ("complex", "shop_nimbus_logged_out"),
    ("complex", "message_mom_popup_at_step"),
    ("complex", "cappuccino_loading"),
    ("complex", "maps_museum_network_failure"),
    ("complex", "latte_with_permission"),
    ("everyday", "dnd_then_text_alex"),
    ("toggles", "wifi_off_then_bluetooth_on"),
]


def _search(suite_name: str, task_id: str):
    suite = find_suite(suite_name)
    task = suite.task(task_id)
    clear_cache()
    oracle = Oracle(World(suite.bundle, task.perturbations), task)
    return oracle, oracle._search


def _h(search, state) -> float:
    return 0 if search.is_goal(state) else max(1, search.bound(state))


@pytest.mark.parametrize("suite_name,task_id", TASKS)
def test_the_bound_is_consistent_on_every_edge_a_plain_search_explores(suite_name, task_id):
    oracle, search = _search(suite_name, task_id)
    assert search.bound is not None
    start = oracle._state(None)
    seen = {search.key(start): start}
    queue = [start]
    edges = 0
    while queue and len(seen) < 1500:
        s = queue.pop(0)
        assert search.bound.nav.is_normal(s), s  # actions only build normal stacks
        h = _h(search, s)
        for action, s2, k2 in search.expand(s, search.key(s)):
            assert h <= 1 + _h(search, s2), (action, s.stack, s2.stack)
            edges += 1
            if k2 not in seen:
                seen[k2] = s2
                queue.append(s2)
    assert edges > 100
    assert _h(search, start) <= oracle.distance()


def test_the_bound_chains_conjuncts_that_no_single_action_can_write():
    # Filters (wireless, under $100) and the product page (the cart) have no writer in
    # common: from the cart the bound counts both trips, not just the longer one.
    oracle, search = _search("everyday", "shop_wireless_under_100")
    start = oracle._state(None)
    singles = max(d.get(search.bound.nav.node_of(start), 0) for d in search.bound.dist)
    assert search.bound(start) > singles
    assert search.bound(start) <= oracle.distance() == 10


def test_conjuncts_split_only_a_top_level_and():
    parts = conjuncts(parse('a.x and (a.y or a.z) and not a.w == "and"'))
    assert [p.source for p in parts] == ["a.x", "(a.y or a.z)", 'not a.w == "and"']
    assert [p.source for p in conjuncts(parse("a.x or a.y and a.z"))] == ["a.x or a.y and a.z"]


def test_typed_values_that_nothing_tells_apart_share_a_state():
    _, search = _search("complex", "shop_earbuds_delivery")
    world = search.world
    i = world.var_index["shop.query"]
    base = world.initial_state()

    def with_query(text):
        values = list(base.values)
        values[i] = text
        return replace(base, values=tuple(values))

    # Both contain "earbud", which is all the Shop's search reads.
    assert search.key(with_query("earbuds")) == search.key(with_query("Pulse Sport Earbuds"))
    assert search.key(with_query("earbuds")) != search.key(with_query("black"))
    # A value the oracle never types (keyed in letter by letter) stays apart.
    assert search.key(with_query("earbudsx")) != search.key(with_query("earbuds"))


CHAIN_APP = """
app: {id: chain, name: Chain}
state: {flag: false}
screens:
  start:
    elements:
      - {kind: button, id: long_way, text: Long way, on_tap: {go: middle}}
      - {kind: button, id: shortcut, text: Shortcut, on_tap: {go: end}}
  middle:
    elements:
      - {kind: button, id: finish, text: Finish, on_tap: {go: end}}
  end:
    elements:
      - {kind: switch, id: flag_switch, text: Flag, var: flag}
"""
CHAIN_SUITE = """
tasks:
  - {id: flag_on, instruction: Turn the flag on, start: {app: chain}, success: chain.flag}
"""


def test_a_stack_no_action_could_build_is_searched_without_the_bound(tmp_path):
    bundle, suite = hand_built(tmp_path, CHAIN_APP, CHAIN_SUITE)
    task = suite.task("flag_on")
    device = SimDevice("b", apps=bundle)
    device.reset(task)
    oracle = Oracle(device, task)
    nav = oracle._search.bound.nav
    start = device.snapshot().state
    assert nav.is_normal(start)
    # "end" below "middle" never happens by actions (Finish goes from middle to end).
    odd = replace(start, stack=("end", "middle"))
    assert not nav.is_normal(odd)
    # Finish clears the stack back to "end" (clear-top), then the switch: 2 actions.
    assert oracle.distance(odd) == 2
    assert oracle.distance() == 2
