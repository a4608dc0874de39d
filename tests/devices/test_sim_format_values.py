"""App-format extensions app authors asked for on 2026-11-25: ``set`` and ``add`` that take
another variable's current value (``{var: name}``), conditional-text branches that show
variables and nest, and load errors that say when YAML read a word as true/false."""
from __future__ import annotations

import pytest
import yaml

from devices.actions import Action
from devices.sim import AppBundle, Oracle, SimDevice, SimLoadError, load_suite
from devices.sim.loader import load_app_data
from tests.devices.sim_helpers import hand_built, has_text, node, tap, tap_text

SALON_APP = """
app: {id: salon, name: Salon}
state: {picked_slot: null, booked_slot: null, booked: false, paid: false, note: null}
screens:
  main:
    title: "{booked ? 'Salon: {booked_slot}' : Salon}"
    elements:
      - {kind: radio_group, id: slot, text: Slot, var: picked_slot,
         options: [Morning, Noon, Evening]}
      - {kind: button, id: book, text: "{booked ? 'Rebook ({booked_slot})' : Book}",
         on_tap: {set: {booked_slot: {var: picked_slot}, booked: true}}}
      - {kind: text, id: status, text: "{booked ? Booked for {booked_slot} : Not booked}"}
      - {kind: text, id: pay_status,
         text: "{booked ? {paid ? 'Paid for {booked_slot}' : Unpaid} : Nothing to pay}"}
      - {kind: button, id: pay, text: Pay, on_tap: {set: {paid: true}}}
      - {kind: button, id: label_it, text: Label, on_tap: {set: {note: picked_slot}}}
"""
SALON_SUITE = """
tasks:
  - {id: book_evening, instruction: Book the evening slot, start: {app: salon},
     success: salon.booked_slot == "evening"}
  - {id: rebook_from_noon, instruction: Move my booking to the evening, start: {app: salon},
     state: {salon.booked: true, salon.booked_slot: noon}, success: salon.booked_slot == "evening"}
  - {id: rebook_from_morning, instruction: Move my booking to the evening, start: {app: salon},
     state: {salon.booked: true, salon.booked_slot: morning},
     success: salon.booked_slot == "evening"}
"""


@pytest.fixture()
def salon(tmp_path):
    bundle, suite = hand_built(tmp_path, SALON_APP, SALON_SUITE)
    device = SimDevice("salon", apps=bundle)
    device.reset(suite.task("book_evening"))
    return device, bundle, suite


# --- 1. set: {x: {var: y}} copies y's current value ----------------------------------------

def test_set_copies_the_choice_picked_in_a_radio_group(salon):
    device, _, _ = salon
    tap_text(device, "Noon")
    tap_text(device, "Book")
    assert device.state_vars["salon.booked_slot"] == "noon"
    assert has_text(device, "Booked for noon") and has_text(device, "Salon: noon")
    tap_text(device, "Evening")  # a copy, not a link: the booking stays until rebooked
    assert device.state_vars["salon.booked_slot"] == "noon"
    tap_text(device, "Rebook (noon)")
    assert device.state_vars["salon.booked_slot"] == "evening"
    assert has_text(device, "Booked for evening")


def test_a_literal_string_keeps_meaning_the_string(salon):
    device, _, _ = salon
    tap_text(device, "Noon")
    tap_text(device, "Label")
    assert device.state_vars["salon.note"] == "picked_slot"


def test_the_oracle_books_a_slot_that_only_a_copy_can_write(salon):
    _, bundle, suite = salon
    oracle = Oracle(bundle, suite.task("book_evening"))
    assert oracle.distance() == 2
    assert [a.element for a in oracle.shortest_path()] == ["Evening", "Book"]


WEIGH_APP = """
app: {id: weigh, name: Weigh}
state: {weight: '', saved_weight: null}
screens:
  main:
    elements:
      - {kind: field, id: weight_field, var: weight, hint: Weight in kg}
      - {kind: button, id: save, text: Save weight,
         on_tap: [{set: {saved_weight: {var: weight}}}, {set: {weight: ''}}]}
      - {kind: text, id: saved, text: "Saved: {saved_weight}"}
"""


def test_set_copies_what_was_typed(tmp_path):
    bundle, _ = hand_built(tmp_path, WEIGH_APP)
    device = SimDevice("w", apps=bundle)
    device.perform(Action("OPENAPP", app="Weigh"))
    device.perform(Action("TYPE", text="72.5"))
    tap_text(device, "Save weight")
    assert device.state_vars["weigh.saved_weight"] == "72.5"
    assert device.state_vars["weigh.weight"] == ""  # cleared after the copy was taken
    assert has_text(device, "Saved: 72.5")


LEVELS_APP = """
app: {id: levels, name: Levels}
state: {front_level: null, back_level: null, front_saved: null, back_saved: null}
screens:
  main:
    elements:
      - for_each: {front: {name: Front}, back: {name: Back}}
        kind: radio_group
        id: "{item}_group"
        text: "{item.name} level"
        var: "{item}_level"
        options: [Low, High]
      - for_each: {front: {name: Front}, back: {name: Back}}
        kind: button
        id: "save_{item}"
        text: "Save {item.name}"
        on_tap: {set: {"{item}_saved": {var: "{item}_level"}}}
      - {kind: text, id: saved, text: "Saved: {front_saved} / {back_saved}"}
"""


def test_a_copy_per_item_reads_the_items_own_variable(tmp_path):
    bundle, _ = hand_built(tmp_path, LEVELS_APP)
    device = SimDevice("l", apps=bundle)
    device.perform(Action("OPENAPP", app="Levels"))
    tap(device, node(device.observe().nodes, rid="back_group_high"))
    tap(device, node(device.observe().nodes, rid="front_group_low"))
    tap_text(device, "Save Back")
    assert device.state_vars["levels.back_saved"] == "high"
    assert device.state_vars["levels.front_saved"] is None
    assert has_text(device, "Saved: \u2014 / high")
    tap_text(device, "Save Front")
    assert has_text(device, "Saved: low / high")


def test_a_copy_may_read_another_apps_variable(tmp_path):
    notes = load_app_data(yaml.safe_load("""
app: {id: notes, name: Notes}
state: {text: ''}
screens:
  main:
    elements:
      - {kind: field, id: note_field, var: text, hint: Note}
"""), "notes.yaml")
    mail = load_app_data(yaml.safe_load("""
app: {id: mail, name: Mail}
state: {body: ''}
screens:
  main:
    elements:
      - {kind: button, id: paste, text: Paste note, on_tap: {set: {body: {var: notes.text}}}}
      - {kind: text, id: body_text, text: "Body: {body}"}
"""), "mail.yaml")
    bundle = AppBundle([notes, mail])
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(
        "tasks:\n  - {id: t, instruction: Mail my note, success: mail.body == 'hi'}\n")
    task = load_suite(suite_file, apps=bundle).task("t")
    path = Oracle(bundle, task).shortest_path()
    # open Notes (icon or OPENAPP), type, open Mail, paste
    assert len(path) == 4 and path[1].text == "hi" and path[3].element == "Paste note"
    device = SimDevice("m", apps=bundle)
    device.reset(task)
    for action in path:
        device.perform(action)
    assert device.check(task) and has_text(device, "Body: hi")
    with pytest.raises(SimLoadError, match=r"on_tap.set.body.var: unknown variable 'notes.txt'"):
        AppBundle([notes, load_app_data(yaml.safe_load(
            "app: {id: mail, name: Mail}\nstate: {body: ''}\nscreens:\n  main:\n    elements:\n"
            "      - {kind: button, text: Paste, on_tap: {set: {body: {var: notes.txt}}}}\n"),
            "mail.yaml")])


# --- 2. conditional-text branches show variables and nest ----------------------------------

def test_conditional_branches_show_variables_and_nest(salon):
    device, _, _ = salon
    assert has_text(device, "Not booked") and has_text(device, "Nothing to pay")
    assert has_text(device, "Salon") and has_text(device, "Book")
    tap_text(device, "Morning")
    tap_text(device, "Book")
    assert has_text(device, "Booked for morning") and has_text(device, "Unpaid")
    tap_text(device, "Pay")
    assert has_text(device, "Paid for morning")


def test_a_variable_shown_in_a_branch_keeps_the_oracles_labels_current(salon):
    """The oracle shares one layout between states that show the same; a label whose
    branch shows ``{booked_slot}`` must not be shared between two booked slots."""
    _, bundle, suite = salon
    from_noon = Oracle(bundle, suite.task("rebook_from_noon")).shortest_path()
    from_morning = Oracle(bundle, suite.task("rebook_from_morning")).shortest_path()
    assert [a.element for a in from_noon] == ["Evening", "Rebook (noon)"]
    assert [a.element for a in from_morning] == ["Evening", "Rebook (morning)"]


# --- 3. add: {x: {var: y}} adds y's current number ------------------------------------------

WALLET_APP = """
app: {id: wallet, name: Wallet}
state: {balance: 0, top_up: 0, typed: '', flag: false}
screens:
  main:
    elements:
      - {kind: text, id: balance_text, text: "Balance: {balance}"}
      - {kind: stepper, id: top_up_stepper, text: Top up, var: top_up, min: 0, max: 50, step: 10}
      - {kind: button, id: add_funds, text: Add funds, on_tap: {add: {balance: {var: top_up}}}}
      - {kind: button, id: take_five, text: Take five, on_tap: {add: {balance: -5}}}
      - {kind: field, id: amount, var: typed, hint: Amount}
      - {kind: button, id: add_typed, text: Add typed amount,
         on_tap: {add: {balance: {var: typed}}}}
"""


def test_add_takes_the_steppers_value(tmp_path):
    bundle, _ = hand_built(tmp_path, WALLET_APP)
    device = SimDevice("w", apps=bundle)
    device.perform(Action("OPENAPP", app="Wallet"))
    plus = node(device.observe().nodes, desc="Increase Top up")
    tap(device, plus)
    tap(device, plus)
    tap_text(device, "Add funds")
    assert device.state_vars["wallet.balance"] == 20 and has_text(device, "Balance: 20")
    tap_text(device, "Add funds")
    tap_text(device, "Take five")  # a literal amount works as before
    assert device.state_vars["wallet.balance"] == 35 and has_text(device, "Balance: 35")


def test_add_takes_a_typed_number_and_ignores_other_text(tmp_path):
    bundle, _ = hand_built(tmp_path, WALLET_APP)
    device = SimDevice("w", apps=bundle)
    device.perform(Action("OPENAPP", app="Wallet"))
    tap_text(device, "Add typed amount")  # nothing typed: nothing added
    assert device.state_vars["wallet.balance"] == 0
    device.perform(Action("TYPE", text="15"))
    tap_text(device, "Add typed amount")
    assert device.state_vars["wallet.balance"] == 15
    device.perform(Action("TYPE", text="lots"))
    tap_text(device, "Add typed amount")
    assert device.state_vars["wallet.balance"] == 15


def test_the_oracle_tops_up_with_the_stepper(tmp_path):
    bundle, suite = hand_built(tmp_path, WALLET_APP, (
        "tasks:\n  - {id: t, instruction: Put 40 on my balance, start: {app: wallet},"
        " success: wallet.balance == 40}\n"))
    task = suite.task("t")
    path = Oracle(bundle, task).shortest_path()
    assert [a.element for a in path] == ["Increase Top up"] * 2 + ["Add funds"] * 2
    device = SimDevice("w", apps=bundle)
    device.reset(task)
    for action in path:
        device.perform(action)
    assert device.check(task)


# --- bad input names the place ----------------------------------------------------------------

@pytest.mark.parametrize("app_text, message", [
    (SALON_APP.replace("{var: picked_slot}", "{var: picked_slto}"),
     r"screens.main.elements\[1\].on_tap.set.booked_slot.var: unknown variable 'picked_slto'"),
    (SALON_APP.replace("{var: picked_slot}", "{var: picked_slot, default: noon}"),
     r"on_tap.set.booked_slot: .*\{var: name\}"),
    (SALON_APP.replace("{var: picked_slot}", "{var: 5}"),
     r"on_tap.set.booked_slot.var: expected a variable name"),
    (WALLET_APP.replace("{var: top_up}", "{var: top_upp}"),
     r"screens.main.elements\[2\].on_tap.add.balance.var: unknown variable 'top_upp'"),
    (WALLET_APP.replace("{var: top_up}", "{var: flag}"),
     r"on_tap.add.balance.var: 'flag' .*number"),
    (SALON_APP.replace("'Paid for {booked_slot}'", "'Paid for {booked_slto}'"),
     r"screens.main.elements\[3\].text: unknown variable 'booked_slto'"),
    (SALON_APP.replace("'Paid for {booked_slot}'", "'Paid for { booked_slot'"),
     r"screens.main.elements\[3\].text: .*branch"),
], ids=["set_unknown", "set_extra_key", "set_not_a_name", "add_unknown", "add_not_a_number",
        "branch_unknown", "branch_lone_brace"])
def test_bad_values_name_the_place(tmp_path, app_text, message):
    with pytest.raises(SimLoadError, match=message):
        hand_built(tmp_path, app_text)


# --- 4. words YAML reads as true/false ------------------------------------------------------

ITEMS = "for_each: {front: {name: Front}, back: {name: Back}}\n        kind: button"


@pytest.mark.parametrize("app_text, message", [
    # a for_each field name: `on` reads as true
    (LEVELS_APP.replace(ITEMS, "for_each: {front: {name: Front, on: x}, back: {name: Back}}\n"
                               "        kind: button"),
     r"elements\[1\].for_each.front: the field name true is YAML's reading of an unquoted "
     r"yes, on or true; put the word in quotes"),
    # item keys: `yes` and `no` read as true and false
    (LEVELS_APP.replace(ITEMS, "for_each: [yes, no]\n        kind: button"),
     r"elements\[1\].for_each: the item key true is YAML's reading of an unquoted yes, on or "
     r"true; put the word in quotes"),
    # a text
    (LEVELS_APP.replace('text: "Save {item.name}"', "text: no"),
     r"elements\[1\].for_each.front.text: .*false is YAML's reading of an unquoted no, off or "
     r"false; put the word in quotes"),
    # a variable name
    (WEIGH_APP.replace("state: {weight: ''", "state: {on: true, weight: ''"),
     r"state: the variable name true is YAML's reading of an unquoted yes, on or true; "
     r"put the word in quotes"),
], ids=["field_name", "item_keys", "text", "variable_name"])
def test_a_word_yaml_reads_as_true_or_false_names_the_place(tmp_path, app_text, message):
    with pytest.raises(SimLoadError, match=message):
        hand_built(tmp_path, app_text)
