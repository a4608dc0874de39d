"""Perturbations as data (OS-Kairos §3, Fig. 2): pop-ups, permissions, network, sign-in, loading."""
from __future__ import annotations

from devices.actions import Action
from devices.sim import SimDevice, find_suite
from devices.sim.suite import SimTask
from tests.devices.sim_helpers import has_text, node, tap, tap_text


def _device(suite: str, task_id: str) -> tuple[SimDevice, SimTask]:
    s = find_suite(suite)
    task = s.task(task_id)
    device = SimDevice("p", apps=s.bundle)
    device.reset(task)
    return device, task


def test_popup_hijacks_the_screen_until_closed():
    device, task = _device("complex", "bluetooth_on_with_popup")
    device.perform(Action("OPENAPP", app="Settings"))
    tap_text(device, "Connected devices")
    assert has_text(device, "Boost your battery!")
    switch = node(device.observe().nodes, rid="bluetooth_switch")
    tap(device, switch)  # under the dialog: the tap only cancels the pop-up
    assert device.state_vars["settings.bluetooth"] is False
    assert not has_text(device, "Boost your battery!")
    tap(device, node(device.observe().nodes, rid="bluetooth_switch"))
    assert device.check(task)


def test_a_popup_is_modal_for_typing_too():
    """Keys go to the dialog's window: the search field under a pop-up takes no text."""
    device, task = _device("complex", "shop_echo_home_ad")
    device.perform(Action("OPENAPP", app="Shop"))
    assert has_text(device, "Flash sale!")
    result = device.perform(Action("TYPE", text="headphones"))
    assert not result.ok and "dialog" in (result.error or "")
    assert device.state_vars["shop.query"] in ("", None)
    tap_text(device, "Close")
    assert device.perform(Action("TYPE", text="headphones")).ok
    assert device.state_vars["shop.query"] == "headphones"


def test_popup_accept_button_leads_away():
    device, _ = _device("complex", "bluetooth_on_with_popup")
    device.perform(Action("OPENAPP", app="Settings"))
    tap_text(device, "Connected devices")
    tap_text(device, "Install now")
    assert device.observe().app == "com.android.launcher3"


def test_popup_at_a_given_step():
    device, _ = _device("everyday", "location_on_popup_at_step")
    device.perform(Action("OPENAPP", app="Settings"))
    assert not has_text(device, "Rate this phone!")
    device.perform(Action("WAIT"))
    assert has_text(device, "Rate this phone!")
    tap_text(device, "Not now")
    device.perform(Action("WAIT"))
    assert not has_text(device, "Rate this phone!")


def test_permission_dialog_must_be_answered():
    device, _ = _device("complex", "latte_with_permission")
    device.perform(Action("OPENAPP", app="Coffee"))
    obs = device.observe()
    allow = node(obs.nodes, text="Allow")
    assert allow.package == "com.android.permissioncontroller"
    device.perform(Action("PRESS_BACK"))
    assert has_text(device, "Allow")  # not cancelable
    tap(device, node(device.observe().nodes, text="Allow"))
    assert device.state_vars["coffee.perm_location"] is True
    device.perform(Action("PRESS_HOME"))
    device.perform(Action("OPENAPP", app="Coffee"))
    assert not has_text(device, "Allow")


def test_network_failure_needs_retry():
    device, _ = _device("everyday", "cappuccino_network_failure")
    device.perform(Action("OPENAPP", app="Coffee"))
    tap_text(device, "Cappuccino")
    assert has_text(device, "No internet connection")
    assert not any(n.cls.endswith("RadioGroup") for n in device.observe().nodes)
    tap_text(device, "Retry")
    assert node(device.observe().nodes, cls="RadioGroup", desc="Size")


def test_signed_out_app_needs_the_password_first():
    device, task = _device("everyday", "flat_white_signed_out")
    device.perform(Action("OPENAPP", app="Coffee"))
    assert has_text(device, "Sign in to Coffee to continue")
    assert node(device.observe().nodes, rid="email").text == "alex@example.com"
    tap(device, node(device.observe().nodes, rid="password"))
    device.perform(Action("TYPE", text="wrong"))
    assert node(device.observe().nodes, rid="password").password
    device.perform(Action("PRESS_BACK"))
    tap(device, node(device.observe().nodes, rid="sign_in_button"))
    assert has_text(device, "Wrong password")
    tap_text(device, "OK")
    tap(device, node(device.observe().nodes, rid="password"))
    device.perform(Action("TYPE", text="latte123"))
    device.perform(Action("PRESS_ENTER"))
    assert has_text(device, "Latte")
    assert "latte123" in task.answer("What is your password?")


def test_loading_screen_needs_wait():
    device, _ = _device("everyday", "alarm_7am_off_loading")
    device.perform(Action("OPENAPP", app="Clock"))
    assert has_text(device, "Loading…")
    out = device.perform(Action("CLICK", x=540, y=1000))
    assert not out.changed
    device.perform(Action("WAIT"))
    assert has_text(device, "Loading…")
    out = device.perform(Action("WAIT"))
    assert out.changed and has_text(device, "7:00 AM")
