"""Controls every new app has and the heuristic had no rule for, on hand-built apps.

Steppers (a number with − / + buttons): the heuristic sets them to the number the goal
says, and leaves alone the ones whose number it does not say. A request and its
confirmation ("Stop parking", then "Stop"): the goal is done, not a wrong turn to back
out of.

Every author of the held-out suites drew steppers (servings, bags, guests, a charge limit,
minutes before a vault locks) and the heuristic had no rule for them: it pressed back, or
tapped "Decrease" where "Increase" was due, at all but one of 31 teacher-path steps of the
development suites (docs/heuristic.md).
"""
from __future__ import annotations

import pytest

from agents.brain import loop
from agents.brain.backends.heuristic import HeuristicBackend
from agents.brain.backends.steppers import find_steppers, stepper_target
from agents.evaluation.episode import EpisodeMemory
from devices.actions import CLICK, COMPLETE, Action
from devices.sim import SimDevice
from tests.devices.sim_helpers import hand_built, tap_text

backend = HeuristicBackend()

# A gym's class page: guests to bring (0–3), minutes of reminder before class (5–60, step
# 5, at 30), and a Book button that books with the numbers shown.
CLASS_APP = """
app: {id: gymly, name: Gymly, package: com.test.gymly, description: Book gym classes}
state: {guests: 0, remind: 30, booked: false, booked_guests: null}
screens:
  home:
    title: Gymly
    elements:
      - {kind: row, id: spin_row, text: Spin 6 PM, subtitle: Studio B, on_tap: {go: spin}}
  spin:
    title: Spin 6 PM
    elements:
      - {kind: stepper, id: guests_stepper, text: Guests, var: guests, min: 0, max: 3}
      - {kind: stepper, id: remind_stepper, text: "Remind me before (minutes)", var: remind,
         min: 5, max: 60, step: 5}
      - {kind: button, id: book_button, text: Book class,
         on_tap: [{set: {booked: true, booked_guests: {var: guests}}}, {go: booked}]}
  booked:
    title: Booked
    elements:
      - {kind: text, id: booked_text, text: "You're booked for Spin 6 PM."}
"""

SUITE = """
suite: gymly
tasks:
  - id: two_guests
    instruction: book the 6 pm spin class for me and two guests
    success: gymly.booked and gymly.booked_guests == 2 and gymly.remind == 30
  - id: remind_ten
    instruction: book spin at 6, remind me 10 minutes before
    success: gymly.booked and gymly.booked_guests == 0 and gymly.remind == 10
  - id: no_number
    instruction: book spin for tonight
    success: gymly.booked and gymly.booked_guests == 0 and gymly.remind == 30
"""


def _act_alone(app_yaml: str, suite_yaml: str, tmp_path, task_id: str,
               max_steps: int = 12) -> tuple[SimDevice, list[Action], object]:
    """The heuristic acting on its own (no gate) on a hand-built app: every proposal is
    carried out, until COMPLETE or ``max_steps``."""
    bundle, suite = hand_built(tmp_path, app_yaml, suite_yaml)
    task = suite.task(task_id)
    device = SimDevice("controls", apps=bundle)
    device.reset(task)
    memory = EpisodeMemory(instruction=task.instruction)
    actions: list[Action] = []
    for _ in range(max_steps):
        proposal = backend.propose(memory.context(device.observe(), device.info.apps))
        if proposal.clarification is not None:
            break  # a question for the user: nobody here answers it
        assert proposal.action is not None, proposal.error
        actions.append(proposal.action)
        if proposal.action.type == COMPLETE:
            break
        target = loop.target_node(proposal.action, device.observe().nodes)
        outcome = device.perform(proposal.action)
        memory.history.append(loop.history_entry(
            len(memory.history) + 1, proposal.action, "agent", outcome.changed, target))
    return device, actions, task


def _run_alone(tmp_path, task_id: str) -> tuple[SimDevice, list[Action], object]:
    return _act_alone(CLASS_APP, SUITE, tmp_path, task_id)


def _taps(actions: list[Action]) -> list[str]:
    return [a.element or "" for a in actions if a.type == CLICK]


def test_it_raises_a_stepper_to_the_number_the_goal_says_and_books(tmp_path) -> None:
    device, actions, task = _run_alone(tmp_path, "two_guests")
    assert device.check(task)
    assert _taps(actions).count("Increase Guests") == 2
    assert not any("Decrease" in t or "Remind" in t for t in _taps(actions))


def test_it_lowers_a_stepper_by_its_own_step_and_leaves_the_other_alone(tmp_path) -> None:
    device, actions, task = _run_alone(tmp_path, "remind_ten")
    assert device.check(task)
    # 30 → 10 in steps of 5; "spin at 6" is a time, not six guests
    assert _taps(actions).count("Decrease Remind me before (minutes)") == 4
    assert "Increase Guests" not in _taps(actions)


def test_a_goal_without_a_number_taps_no_stepper(tmp_path) -> None:
    device, actions, task = _run_alone(tmp_path, "no_number")
    assert device.check(task)
    assert not any(t.startswith(("Increase", "Decrease")) for t in _taps(actions))


def test_the_stepper_is_read_from_the_ui_tree(tmp_path) -> None:
    bundle, suite = hand_built(tmp_path, CLASS_APP, SUITE)
    device = SimDevice("steppers", apps=bundle)
    device.reset(suite.task("two_guests"))
    tap_text(device, "Gymly")
    tap_text(device, "Spin 6 PM")
    steppers = {s.label: s.value for s in find_steppers(device.observe().nodes)}
    assert steppers == {"Guests": 0, "Remind me before (minutes)": 30}


@pytest.mark.parametrize("goal, label, wanted", [
    # the number beside the stepper's words or unit
    ("set it to 8 servings, we're 8 people", "Servings", 8),
    ("cap her at 3 GB a month", "Limit in GB", 3),
    ("put 20 bucks on her lunch card", "Amount to add ($)", 20),
    ("keep 40% in the battery for power cuts", "Backup reserve (%)", 40),
    ("bump my daily step goal up to 10k", "Daily steps", 10000),
    ("log 45 mins of yoga", "Duration (min)", 45),
    # "a", "an", "one" right before what the stepper counts
    ("add a checked bag to my flight, just the one", "Bags to add", 1),
    ("keep the car an extra hour, I need it till 2", "Extra hours", 1),
    ("book boxing at 6:30 for me and one guest", "Guests ($20 each)", 1),
    # the value being replaced is not the one wanted
    ("make it lock after 5 min instead of 15", "Lock after (minutes)", 5),
])
def test_the_goals_number_for_a_stepper(goal, label, wanted) -> None:
    assert stepper_target(goal, label) == wanted


@pytest.mark.parametrize("goal, label", [
    ("book me into spin at 6 tonight", "Guests"),             # a time
    ("start charging at 1 in the morning", "Charge limit (%)"),
    ("turn off the 2 step thing", "Lock after (minutes)"),    # a name, not a count
    ("sign me and my 4 year old up for storytime", "People coming"),  # an age
    ("add one checked bag to my flight on the 22nd", "Passengers"),   # a date; not this stepper
    ("pay with the card ending 4471", "Amount to add ($)"),   # a card ending
    ("park the van in zone 2140", "Hours"),                    # a zone number
])
def test_numbers_that_are_not_the_steppers_are_left(goal, label) -> None:
    assert stepper_target(goal, label) is None


# -- a request and its confirmation --------------------------------------------------

# A parking app: "Stop parking" asks "Stop this session?" with Keep parking / Stop; the
# session screen then says nothing of the goal's words.
PARKING_APP = """
app: {id: parky, name: Parky, package: com.test.parky, description: Pay for street parking}
state: {active: true}
screens:
  home:
    title: Parky
    elements:
      - {kind: row, id: session_row, text: Zone 2140, subtitle: "Until 6:00 PM", on_tap: {go: session}}
  session:
    title: Zone 2140
    elements:
      - {kind: text, id: zone_text, text: "Plate KRX 482"}
      - {kind: button, id: stop_button, text: Stop parking, visible: active, on_tap: {open: stop_confirm}}
      - {kind: text, id: ended_text, text: "Session ended at 4:12 PM", visible: not active}
      - {kind: button, id: receipt_button, text: Email receipt}
dialogs:
  stop_confirm:
    title: Stop this session?
    text: You will be charged until now.
    buttons:
      - {text: Keep parking}
      - {text: Stop, id: stop_confirm_button, on_tap: {set: {active: false}}}
"""

PARKING_SUITE = """
suite: parky
tasks:
  - id: done_parking
    instruction: I'm done parking, stop charging me
    success: not parky.active
"""


def test_after_a_request_and_its_confirmation_the_goal_is_done(tmp_path) -> None:
    bundle, suite = hand_built(tmp_path, PARKING_APP, PARKING_SUITE)
    task = suite.task("done_parking")
    device = SimDevice("parky", apps=bundle)
    device.reset(task)
    memory = EpisodeMemory(instruction=task.instruction)
    for label in ("Parky", "Zone 2140", "Stop parking", "Stop"):
        node = next(n for n in device.observe().nodes if n.label == label)
        action = Action(CLICK, x=node.center[0], y=node.center[1], element=label)
        outcome = device.perform(action)
        memory.history.append(loop.history_entry(len(memory.history) + 1, action, "agent",
                                                 outcome.changed, node))
    assert device.check(task)
    proposal = backend.propose(memory.context(device.observe(), device.info.apps))
    # it pressed back here before: nothing on the screen names "stop charging"
    assert proposal.action is not None and proposal.action.type == COMPLETE


# A school lunch card: "Amount to add ($)" resets to 0 once paid; a battery whose reserve
# stepper is the whole setting (no Save).
LUNCH_APP = """
app: {id: lunchy, name: Lunchy, package: com.test.lunchy, description: School lunch money}
state: {top_up: 0, balance: 5, reserve: 20, price: 100, listed: false}
screens:
  home:
    title: Lunchy
    elements:
      - {kind: row, id: card_row, text: Mila's lunch card, subtitle: "Balance {balance}", on_tap: {go: card}}
      - {kind: row, id: battery_row, text: Battery, on_tap: {go: battery}}
  card:
    title: Mila's lunch card
    elements:
      - {kind: stepper, id: top_up_stepper, text: "Amount to add ($)", var: top_up, min: 0, max: 50, step: 10}
      - {kind: button, id: pay_button, text: Pay,
         on_tap: [{add: {balance: {var: top_up}}}, {set: {top_up: 0}}]}
      - {kind: text, id: balance_text, text: "Balance {balance}"}
  battery:
    title: Battery
    elements:
      - {kind: stepper, id: reserve_stepper, text: "Backup reserve (%)", var: reserve, min: 0, max: 100, step: 10}
      - {kind: text, id: reserve_note, text: "The battery keeps this much for power cuts."}
  sale:
    title: Sell your ticket
    elements:
      - {kind: stepper, id: price_stepper, text: "Price ($)", var: price, min: 50, max: 120, step: 10}
      - {kind: button, id: list_button, text: List for sale, on_tap: {set: {listed: true}}}
"""

LUNCH_SUITE = """
suite: lunchy
tasks:
  - id: twenty_bucks
    instruction: put 20 bucks on milas lunch card
    start: {app: lunchy, screen: card}
    success: lunchy.balance == 25
  - id: reserve_40
    instruction: keep 40% in the battery for power cuts
    start: {app: lunchy, screen: battery}
    success: lunchy.reserve == 40
  - id: sell_80
    instruction: sell my ticket for 80 dollars
    start: {app: lunchy, screen: sale}
    success: lunchy.listed and lunchy.price == 80
"""


def _run_lunchy(tmp_path, task_id: str) -> tuple[SimDevice, list[Action], object]:
    return _act_alone(LUNCH_APP, LUNCH_SUITE, tmp_path, task_id)


def test_a_stepper_back_at_zero_after_paying_is_not_paid_again(tmp_path) -> None:
    device, actions, task = _run_lunchy(tmp_path, "twenty_bucks")
    assert device.check(task), actions  # 5 + 20, once
    assert _taps(actions).count("Pay") == 1
    assert actions[-1].type == COMPLETE


def test_a_stepper_that_is_the_whole_setting_finishes_the_task(tmp_path) -> None:
    device, actions, task = _run_lunchy(tmp_path, "reserve_40")
    assert device.check(task)
    assert actions[-1].type == COMPLETE


def test_a_set_stepper_is_not_done_while_a_button_of_any_words_may_save_it(tmp_path) -> None:
    # "List for sale" is no word the heuristic knows for saving, but it is a button: the
    # price is not done once set (it said COMPLETE there, held-out fresh11_apps)
    device, actions, task = _run_lunchy(tmp_path, "sell_80")
    assert _taps(actions)[:2] == ["Decrease Price ($)", "Decrease Price ($)"]
    assert len(actions) == 2 or actions[2].type != COMPLETE  # (2: it asked which app)


@pytest.mark.parametrize("goal, kind, target", [
    ("put the wifi on", "toggle", "wifi"),
    ("kill the wifi and put bluetooth on while you're at it", "toggle", "bluetooth"),
    ("put bluetooth off", "toggle", "bluetooth"),
    # an amount or a person put somewhere is not a switch turned on
    ("put 20 bucks on milas lunch acct", "click", None),
    ("put $20 on her card", "click", None),
    ("put him on her pickup list", "click", None),
    ("put me on the waitlist", "click", None),
])
def test_put_on_is_a_switch_only_when_nothing_is_put_somewhere(goal, kind, target) -> None:
    from agents.brain.backends.heuristic import parse_intent
    from agents.brain.planning import split_goal

    intent = parse_intent(split_goal(goal)[-1])
    assert intent.kind == kind
    if target:
        assert intent.target == target
