"""The heuristic in a dialog its own taps opened: the dialog is part of the task.

Found on fresh2_apps and fresh5_apps (read 2026-11-25, fourth session; development
material since): after choosing a lending period inside the app's "Borrow …?" dialog, the
agent cancelled the dialog at confidence 4 as "an unexpected pop-up"; after tapping
"Subscribe", it cancelled "Confirm subscription" — a dialog that asks nothing with a "?"
but whose go-ahead repeats the tapped label. The apps here are new; the rule is general.
"""
from __future__ import annotations

from tests.agents.screens import HandBuiltPhone

PEDAL = """
app: {id: pedal, name: Pedal, package: com.example.pedal, start: bike,
      description: City bike rental and memberships}
state: {period: '', rented: false, plus: false}
screens:
  bike:
    title: City bike 42
    elements:
      - {kind: text, id: bike_note, text: "Docked at Harbor Street"}
      - {kind: button, id: rent_button, text: Rent, on_tap: {open: rent}}
      - {kind: button, id: plus_button, text: Join Plus, on_tap: {open: plus}}
dialogs:
  rent:
    title: Rent City bike 42?
    text: Pick how long you need it.
    elements:
      - kind: radio_group
        id: period_group
        text: Rent for
        var: period
        options:
          - {value: "1", text: 1 hour}
          - {value: "3", text: 3 hours}
    buttons:
      - {text: Cancel, id: rent_cancel}
      - {text: Rent, id: rent_go, on_tap: {set: {rented: true}}}
  plus:
    title: Confirm membership
    text: Your card is charged $9 today and every month until you cancel.
    buttons:
      - {text: Cancel, id: plus_cancel}
      - {text: Join Plus, id: plus_go, on_tap: {set: {plus: true}}}
"""

SUITE = """
suite: pedal
tasks:
  - {id: rent_3h, instruction: rent the bike for 3 hours, success: "pedal.rented and pedal.period == '3'"}
  - {id: join_plus, instruction: join plus, success: pedal.plus}
  - {id: rent_any, instruction: rent this bike, success: pedal.rented}
"""


def _phone(tmp_path, task_id: str) -> HandBuiltPhone:
    return HandBuiltPhone(tmp_path, PEDAL, SUITE, task_id, "Pedal")


def test_after_choosing_inside_its_own_dialog_the_agent_goes_ahead_not_cancels(tmp_path):
    phone = _phone(tmp_path, "rent_3h")
    phone.tap("Rent")
    phone.tap("3 hours")
    proposal = phone.propose()
    assert proposal.action is not None and proposal.action.element == "Rent", proposal.thought
    phone.tap("Rent")
    assert phone.done()


def test_a_confirm_dialog_whose_go_ahead_repeats_the_tapped_label_is_the_taps_own(tmp_path):
    phone = _phone(tmp_path, "join_plus")
    phone.tap("Join Plus")
    proposal = phone.propose()
    assert proposal.action is not None and proposal.action.element == "Join Plus", proposal.thought


def test_a_choice_inside_the_dialog_comes_before_its_go_ahead(tmp_path):
    """Found on fresh5_apps: "borrow the midnight library for three weeks" went ahead in
    "Borrow …?" before choosing the lending period, at 4."""
    phone = _phone(tmp_path, "rent_3h")
    phone.tap("Rent")
    proposal = phone.propose()
    assert proposal.action is not None and proposal.action.element == "3 hours", proposal.thought


def test_a_choice_inside_the_dialog_the_goal_does_not_make_is_not_made_alone(tmp_path):
    phone = _phone(tmp_path, "rent_any")
    phone.tap("Rent")
    proposal = phone.propose()
    assert proposal.clarification is not None or proposal.confidence < 4, proposal.thought
    assert proposal.action is None or proposal.action.element != "Cancel"
