"""SimDevice: the Device protocol, transitions, typing, scrolling and the frame cache."""
from __future__ import annotations

import threading

from devices.actions import Action
from devices.protocol import Device
from devices.sim import SimDevice, find_suite
from tests.devices.sim_helpers import hand_built, has_text, node, tap, tap_text


def test_it_implements_the_device_protocol_and_lists_the_bundled_apps():
    device = SimDevice("sim-1")
    assert isinstance(device, Device)
    assert device.info.kind == "sim"
    names = {a.name for a in device.info.apps}
    assert {"Settings", "Clock", "Coffee"} <= names
    obs = device.observe()
    assert obs.app == "com.android.launcher3"
    assert (obs.width, obs.height) == (1080, 2400)
    assert node(obs.nodes, text="Coffee").clickable


def test_launcher_icon_and_openapp_open_the_app():
    device = SimDevice("d")
    out = tap_text(device, "Settings")
    assert out.ok and out.changed
    assert device.observe().app == "com.kairos.settings"
    device.perform(Action("PRESS_HOME"))
    out = device.perform(Action("OPENAPP", app="the clock app"))
    assert out.ok and device.observe().app == "com.kairos.clock"


def test_openapp_of_an_unknown_app_fails_with_the_installed_apps_named():
    device = SimDevice("d")
    out = device.perform(Action("OPENAPP", app="Tetris"))
    assert not out.ok and not out.changed
    assert "Tetris" in out.error and "Settings" in out.error


def test_tapping_a_switch_toggles_its_state_and_node():
    device = SimDevice("d")
    device.perform(Action("OPENAPP", app="Settings"))
    tap_text(device, "Connected devices")
    switch = node(device.observe().nodes, rid="bluetooth_switch")
    assert switch.cls == "android.widget.Switch" and switch.checkable and not switch.checked
    assert switch.resource_id == "com.kairos.settings:id/bluetooth_switch"
    out = tap(device, switch)
    assert out.changed
    assert node(device.observe().nodes, rid="bluetooth_switch").checked
    assert device.state_vars["settings.bluetooth"] is True


def test_airplane_mode_turns_radios_off_like_a_phone():
    device = SimDevice("d")
    device.perform(Action("OPENAPP", app="Settings"))
    tap_text(device, "Network & internet")
    tap_text(device, "Airplane mode")
    assert device.state_vars["settings.airplane"] is True
    assert device.state_vars["settings.wifi"] is False


def test_back_walks_the_back_stack_then_leaves_the_app():
    device = SimDevice("d")
    device.perform(Action("OPENAPP", app="Settings"))
    tap_text(device, "Network & internet")
    device.perform(Action("PRESS_BACK"))
    assert has_text(device, "Connected devices")
    device.perform(Action("PRESS_BACK"))
    assert device.observe().app == "com.android.launcher3"
    out = device.perform(Action("PRESS_BACK"))
    assert out.ok and not out.changed


def test_type_without_a_focused_field_fails_readably():
    device = SimDevice("d")
    device.perform(Action("OPENAPP", app="Clock"))
    tap(device, node(device.observe().nodes, desc="Add alarm"))
    out = device.perform(Action("TYPE", text="6:45 AM"))  # two fields: which one?
    assert not out.ok and "tap a field first" in out.error
    device.perform(Action("PRESS_HOME"))
    out = device.perform(Action("TYPE", text="hello"))
    assert not out.ok and "no text field" in out.error


def test_typing_goes_into_the_focused_field_and_enter_hides_the_keyboard():
    device = SimDevice("d")
    device.perform(Action("OPENAPP", app="Clock"))
    tap(device, node(device.observe().nodes, desc="Add alarm"))
    tap(device, node(device.observe().nodes, rid="alarm_label"))
    assert device.observe().extra["keyboard"]
    out = device.perform(Action("TYPE", text="Gym"))
    assert out.ok and out.changed
    label = node(device.observe().nodes, rid="alarm_label")
    assert label.text == "Gym" and label.focused
    # TYPE replaces the text rather than appending.
    device.perform(Action("TYPE", text="Run"))
    assert node(device.observe().nodes, rid="alarm_label").text == "Run"
    device.perform(Action("PRESS_ENTER"))
    obs = device.observe()
    assert not obs.extra["keyboard"] and not node(obs.nodes, rid="alarm_label").focused


def test_keyboard_keys_type_letters():
    device = SimDevice("d")
    device.perform(Action("OPENAPP", app="Clock"))
    tap(device, node(device.observe().nodes, desc="Add alarm"))
    tap(device, node(device.observe().nodes, rid="alarm_label"))
    keys = {t.arg: t for t in device.view().targets if t.special == "key"}
    for ch in "hi":
        x0, y0, x1, y1 = keys[ch].bounds
        device.perform(Action("CLICK", x=(x0 + x1) // 2, y=(y0 + y1) // 2))
    assert node(device.observe().nodes, rid="alarm_label").text == "hi"


def test_type_goes_into_the_only_field_on_screen(tmp_path):
    bundle, _ = hand_built(tmp_path, """
app: {id: notes, name: Notes}
state: {note: ""}
screens:
  main:
    elements:
      - {kind: field, id: note_field, var: note, hint: Write a note}
""")
    device = SimDevice("d", apps=bundle)
    device.perform(Action("OPENAPP", app="Notes"))
    out = device.perform(Action("TYPE", text="buy milk"))
    assert out.ok
    field = node(device.observe().nodes, rid="note_field")
    assert field.text == "buy milk" and field.focused


def test_scroll_up_brings_later_list_items_into_view():
    device = SimDevice("d")
    device.perform(Action("OPENAPP", app="Clock"))
    obs = device.observe()
    assert node(obs.nodes, rid="alarm_list").scrollable
    assert not has_text(device, "12:00 PM")
    out = device.perform(Action("SCROLL", direction="UP"))
    assert out.changed and has_text(device, "12:00 PM")
    assert not has_text(device, "5:30 AM")
    device.perform(Action("SCROLL", direction="DOWN"))
    assert has_text(device, "5:30 AM")
    out = device.perform(Action("SCROLL", direction="LEFT"))
    assert out.ok and not out.changed


def test_long_press_runs_its_own_transition_else_the_click():
    device = SimDevice("d")
    suite = find_suite("everyday")
    device.reset(suite.task("add_alarm_645"))
    device.perform(Action("OPENAPP", app="Clock"))
    tap(device, node(device.observe().nodes, desc="Add alarm"))
    device.perform(Action("CLICK", x=540, y=444))
    device.perform(Action("TYPE", text="6:45 AM"))
    device.perform(Action("PRESS_BACK"))  # hide the keyboard
    tap_text(device, "Save")
    device.perform(Action("SCROLL", direction="UP"))
    custom = node(device.observe().nodes, text="6:45 AM")
    x, y = custom.center
    device.perform(Action("LONG_CLICK", x=x, y=y))
    assert has_text(device, "Delete the 6:45 AM alarm?")
    device.perform(Action("PRESS_BACK"))
    noon = node(device.observe().nodes, text="12:00 PM")
    x, y = noon.center
    device.perform(Action("LONG_CLICK", x=x, y=y))  # no long-press handler: a click
    assert device.state_vars["clock.alarm_1200"] is True


def test_open_choice_is_a_radio_group_named_by_its_heading():
    device = SimDevice("d")
    device.perform(Action("OPENAPP", app="Coffee"))
    tap_text(device, "Latte")
    nodes = device.observe().nodes
    group = node(nodes, cls="RadioGroup", desc="Sweetness")
    options = [n for n in nodes if n.parent == group.index]
    assert [n.text for n in options] == ["No sugar", "Less sweet", "Regular"]
    assert all(n.cls == "android.widget.RadioButton" and n.checkable and not n.checked
               for n in options)
    assert nodes[group.index - 1].text == "Sweetness"
    tap(device, options[1])
    assert device.state_vars["coffee.sweetness"] == "less"
    assert node(device.observe().nodes, text="Less sweet").checked


def test_invalid_and_terminal_actions_never_raise():
    device = SimDevice("d")
    out = device.perform({"type": "CLICK", "x": 5000, "y": 10})
    assert not out.ok and "off the" in out.error
    out = device.perform({"type": "FLY"})
    assert not out.ok and "unknown action type" in out.error
    frame = device.observe().frame
    out = device.perform(Action("COMPLETE"))
    assert out.ok and not out.changed and device.observe().frame == frame


def test_unchanged_screen_is_never_rendered_again():
    device = SimDevice("d")
    first = device.observe()
    renders = device.render_count
    again = device.observe()
    frame = device.latest_frame()
    assert again.frame == first.frame == frame.number
    assert device.render_count == renders
    out = device.perform(Action("CLICK", x=540, y=1800))  # empty launcher space
    assert out.ok and not out.changed
    assert device.observe().frame == first.frame and device.render_count == renders
    device.perform(Action("OPENAPP", app="Settings"))
    obs = device.observe()
    device.latest_frame()
    device.observe()
    assert obs.frame == first.frame + 1
    assert device.render_count == renders + 1


def test_wait_for_frame_wakes_on_a_change_and_times_out_without_one():
    device = SimDevice("d")
    current = device.latest_frame().number
    assert device.wait_for_frame(current, timeout=0.05) is None
    worker = threading.Thread(target=device.perform, args=(Action("OPENAPP", app="Clock"),))
    worker.start()
    frame = device.wait_for_frame(current, timeout=10)
    worker.join()
    assert frame is not None and frame.number == current + 1


def test_snapshot_and_restore_bring_back_the_exact_state():
    device = SimDevice("d")
    device.perform(Action("OPENAPP", app="Settings"))
    tap_text(device, "Network & internet")
    snap = device.snapshot()
    hash(snap)
    frame = device.observe().frame
    tap_text(device, "Wi-Fi")
    device.perform(Action("PRESS_HOME"))
    device.restore(snap)
    assert device.snapshot() == snap
    assert device.state_vars["settings.wifi"] is True
    assert node(device.observe().nodes, rid="wifi_switch").checked
    assert device.observe().frame > frame  # the screen changed back: a new frame


def test_reset_applies_the_tasks_initial_state_and_start_screen():
    device = SimDevice("d")
    task = find_suite("toggles").task("bluetooth_on_verify")
    device.perform(Action("OPENAPP", app="Coffee"))
    device.reset(task)
    assert device.state_vars["settings.bluetooth"] is True
    assert node(device.observe().nodes, rid="bluetooth_switch").checked
    assert device.check(task)
    device.reset()
    assert device.observe().app == "com.android.launcher3"
    assert device.state_vars["settings.bluetooth"] is False
