"""App-format extensions authors asked for: labels that depend on state, confirm-before-
change on a switch, "nothing else changed" in a task's predicate, and dashes that render
as dashes (issue 12 item 8)."""
from __future__ import annotations

import pytest
from PIL import ImageChops

from devices.actions import Action
from devices.sim import Oracle, SimDevice, SimLoadError
from tests.devices.sim_helpers import hand_built, has_text, node, tap, tap_text

LOCK_APP = """
app: {id: lock, name: Lock}
state: {locked: true, rec: true, lights: false, note: ''}
screens:
  main:
    title: "{locked ? Locked : Unlocked}"
    elements:
      - {kind: button, id: lock_tile, text: "Front door: {locked ? 'Locked' : 'Unlocked'}",
         on_tap: {toggle: locked}}
      - {kind: switch, id: rec_switch, text: Recording, var: rec,
         confirm: {when: off, title: "Stop recording?", text: Motion will not be saved.,
                   button: Stop}}
      - {kind: switch, id: lights_switch, text: Lights, var: lights}
      - {kind: field, id: note_field, var: note, hint: Note}
"""
LOCK_SUITE = """
tasks:
  - {id: unlock, instruction: Unlock the door, start: {app: lock}, success: lock.locked == false}
  - {id: stop_rec, instruction: Stop recording, start: {app: lock}, success: lock.rec == false,
     unchanged: [lock]}
  - {id: stop_rec_note, instruction: Stop recording, start: {app: lock},
     success: lock.rec == false, unchanged: {apps: [lock], except: [lock.note]}}
"""


@pytest.fixture()
def lock(tmp_path):
    bundle, suite = hand_built(tmp_path, LOCK_APP, LOCK_SUITE)
    device = SimDevice("lock", apps=bundle)
    device.reset(suite.task("unlock"))
    return device, bundle, suite


def test_a_label_follows_the_state_it_names(lock):
    device, _, _ = lock
    assert has_text(device, "Front door: Locked") and has_text(device, "Locked")
    tap_text(device, "Front door: Locked")
    assert has_text(device, "Front door: Unlocked") and has_text(device, "Unlocked")
    assert device.state_vars["lock.locked"] is False


def test_a_switch_asks_before_the_change_it_guards_and_only_then(lock):
    device, _, _ = lock
    tap_text(device, "Recording")  # on → off asks first
    assert has_text(device, "Stop recording?") and device.state_vars["lock.rec"] is True
    tap_text(device, "Cancel")
    assert device.state_vars["lock.rec"] is True and not has_text(device, "Stop recording?")
    tap_text(device, "Recording")
    tap_text(device, "Stop")
    assert device.state_vars["lock.rec"] is False
    tap_text(device, "Recording")  # off → on is not guarded
    assert device.state_vars["lock.rec"] is True and not has_text(device, "Stop recording?")


def test_the_oracle_walks_through_the_confirmation(lock):
    _, bundle, suite = lock
    path = Oracle(bundle, suite.task("stop_rec")).shortest_path()
    assert [a.element for a in path] == ["Recording", "Stop"]


def test_nothing_else_changed_is_part_of_the_predicate(lock):
    device, bundle, suite = lock
    task = suite.task("stop_rec")
    assert task.success.source == (
        'lock.rec == false and lock.lights == false and lock.locked == true and lock.note == ""')
    device.reset(task)
    tap_text(device, "Lights")  # a side effect the user did not ask for
    tap_text(device, "Recording")
    tap_text(device, "Stop")
    assert not device.check(task)
    tap_text(device, "Lights")
    assert device.check(task)
    # an author may exempt what the task may touch on the way
    assert "lock.note" not in suite.task("stop_rec_note").success.names


@pytest.mark.parametrize("suite_text, message", [
    ("tasks:\n  - {id: t, instruction: x, success: lock.rec, unchanged: [nope]}\n",
     "tasks[0].unchanged.apps[0]: no installed app 'nope'"),
    ("tasks:\n  - {id: t, instruction: x, success: lock.rec, unchanged: {apps: [lock], except: [lock.nope]}}\n",
     "tasks[0].unchanged.except[0]: unknown variable 'lock.nope'"),
    ("tasks:\n  - {id: t, instruction: x, unchanged: [lock]}\n",
     "tasks[0].unchanged: needs a success predicate"),
])
def test_bad_unchanged_lists_name_the_place(tmp_path, suite_text, message):
    with pytest.raises(SimLoadError, match=message.replace("[", r"\[").replace("]", r"\]")):
        hand_built(tmp_path, LOCK_APP, suite_text)


@pytest.mark.parametrize("app_text, message", [
    (LOCK_APP.replace("confirm: {when: off,", "confirm: {when: sometimes,"),
     "confirm.when: expected on, off or always"),
    (LOCK_APP.replace("{locked ? 'Locked' : 'Unlocked'}", "{lockd ? 'Locked' : 'Unlocked'}"),
     "unknown variable 'lockd'"),
])
def test_bad_format_extensions_name_the_place(tmp_path, app_text, message):
    with pytest.raises(SimLoadError, match=message):
        hand_built(tmp_path, app_text)


def test_dashes_render_as_dashes_not_boxes(tmp_path):
    """Pillow's bundled font has no em dash: the renderer draws a hyphen, so a label with
    one reads as text (the UI tree keeps the real character)."""
    frames = []
    for label in ("Wi\u2014Fi \u2013 on", "Wi-Fi - on"):
        app = f'app: {{id: d, name: D}}\nscreens:\n  main:\n    elements:\n      - {{kind: text, id: t, text: "{label}"}}\n'
        bundle, _ = hand_built(tmp_path, app)
        device = SimDevice("d", apps=bundle)
        device.perform(Action("OPENAPP", app="D"))
        observation = device.observe()
        assert any(n.text == label for n in observation.nodes)
        frames.append(observation.image)
    assert ImageChops.difference(frames[0], frames[1]).getbbox() is None


HOUSE_APP = """
app: {id: house, name: House, start: members}
state: {sam: true, jordan: true, front_rec: true, back_rec: true}
screens:
  members:
    elements:
      - kind: list
        id: member_list
        items:
          - for_each: {sam: {name: Sam Rivera}, jordan: {name: Jordan Lee}}
            id: "{item}_row"
            text: "{item.name}"
            visible: "{item}"
            on_tap: {go: "member_{item}"}
      - for_each: {front: {name: Front door}, back: {name: Backyard}}
        kind: switch
        id: "{item}_rec_switch"
        text: "{item.name} camera"
        var: "{item}_rec"
  member:
    for_each: {sam: {name: Sam Rivera}, jordan: {name: Jordan Lee}}
    title: "{item.name}"
    elements:
      - {kind: button, id: "remove_{item}", text: Remove from home, on_tap: {open: "remove_{item}"}}
dialogs:
  remove:
    for_each: {sam: {name: Sam Rivera}, jordan: {name: Jordan Lee}}
    title: "Remove {item.name}?"
    buttons:
      - {text: Cancel, id: "remove_{item}_cancel"}
      - {text: Remove, id: "remove_{item}_confirm", on_tap: [{set: {"{item}": false}}, {go: members}]}
"""


def test_one_screen_dialog_and_row_per_item(tmp_path):
    suite = ("tasks:\n  - {id: t, instruction: Remove Jordan, success: house.jordan == false,"
             " unchanged: [house]}\n")
    bundle, loaded = hand_built(tmp_path, HOUSE_APP, suite)
    app = bundle.by_id["house"]
    assert {"member_sam", "member_jordan"} <= set(app.screens)
    assert {"remove_sam", "remove_jordan"} <= set(app.dialogs)
    device = SimDevice("h", apps=bundle)
    device.perform(Action("OPENAPP", app="House"))
    assert has_text(device, "Front door camera") and has_text(device, "Backyard camera")
    tap_text(device, "Jordan Lee")
    assert has_text(device, "Jordan Lee")  # the item's title
    tap_text(device, "Remove from home")
    assert has_text(device, "Remove Jordan Lee?")
    tap_text(device, "Remove")
    assert device.state_vars["house.jordan"] is False and device.state_vars["house.sam"] is True
    assert not has_text(device, "Jordan Lee")
    path = Oracle(bundle, loaded.task("t")).shortest_path()
    assert [a.element for a in path[1:]] == ["Jordan Lee", "Remove from home", "Remove"]


def test_an_item_field_that_does_not_exist_names_the_item(tmp_path):
    with pytest.raises(SimLoadError, match=r"screens.member.for_each.sam: no field 'nmae'"):
        hand_built(tmp_path, HOUSE_APP.replace('title: "{item.name}"', 'title: "{item.nmae}"'))


THERMO_APP = """
app: {id: thermo, name: Thermo}
state: {temp: 19, level: low}
screens:
  main:
    elements:
      - {kind: stepper, id: temp_stepper, text: Temperature, var: temp, min: 16, max: 21}
"""


def test_a_stepper_moves_its_number_within_its_bounds(tmp_path):
    bundle, suite = hand_built(tmp_path, THERMO_APP, (
        "tasks:\n  - {id: t, instruction: Set 17 degrees, start: {app: thermo},"
        " success: thermo.temp == 17}\n"))
    device = SimDevice("t", apps=bundle)
    device.reset(suite.task("t"))
    plus = node(device.observe().nodes, desc="Increase Temperature")
    for _ in range(4):
        tap(device, plus)
    assert device.state_vars["thermo.temp"] == 21  # stops at max
    assert node(device.observe().nodes, rid="temp_stepper_value").text == "21"
    path = Oracle(bundle, suite.task("t")).shortest_path()
    assert [a.element for a in path] == ["Decrease Temperature"] * 2


@pytest.mark.parametrize("change, message", [
    ("min: 16, max: 21}", "min: 22, max: 21}"),
    ("var: temp,", "var: level,"),
])
def test_a_bad_stepper_names_the_place(tmp_path, change, message):
    expected = "min is above max" if "min" in change else "'level' must start as a number"
    with pytest.raises(SimLoadError, match=expected):
        hand_built(tmp_path, THERMO_APP.replace(change, message))


TONES_APP = """
app: {id: tones, name: Tones}
state: {tone: chime}
screens:
  main:
    elements:
      - kind: list
        id: tone_list
        rows: 4
        items:
          - for_each: [chime, bells, harp, piano, marimba, birds, waves, rain]
            kind: radio
            id: "tone_{item}"
            text: "{item}"
            var: tone
            value: "{item}"
"""


def test_radio_rows_in_a_scrolling_list_form_one_choice(tmp_path):
    bundle, suite = hand_built(tmp_path, TONES_APP, (
        "tasks:\n  - {id: t, instruction: Pick rain, start: {app: tones},"
        " success: tones.tone == \"rain\"}\n"))
    device = SimDevice("t", apps=bundle)
    device.reset(suite.task("t"))
    radios = [n for n in device.observe().nodes if n.short_class == "RadioButton"]
    assert [(n.text, n.checked) for n in radios][:2] == [("chime", True), ("bells", False)]
    tap_text(device, "harp")
    radios = {n.text: n.checked for n in device.observe().nodes if n.short_class == "RadioButton"}
    assert radios["harp"] and not radios["chime"]
    assert device.state_vars["tones.tone"] == "harp"
    path = Oracle(bundle, suite.task("t")).shortest_path()
    assert path[-1].element == "rain" and any(a.type == "SCROLL" for a in path)


def test_a_radio_without_a_value_names_the_place(tmp_path):
    with pytest.raises(SimLoadError, match=r"a radio needs the 'value' it sets"):
        hand_built(tmp_path, TONES_APP.replace('            value: "{item}"\n', ""))
