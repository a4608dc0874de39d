"""The adb driver end to end: adbutils → the real adb server → a fake phone (a simulated
phone speaking the adb transport and the scrcpy device end).

What a user notices: the agent sees the phone's screen and UI tree, and every action of
the action space lands on the phone — through scrcpy while the video is up, through
``input``/``monkey`` without it — with text typed exactly.
"""
from __future__ import annotations

import pytest

from devices.actions import Action
from devices.adb.driver import AdbDevice, AdbDeviceError, escape_input_text
from devices.adb.fake.rig import FakeAdbRig
from devices.sim import SimDevice


@pytest.fixture(scope="module")
def rig():
    rig = FakeAdbRig()
    yield rig
    rig.close()


@pytest.fixture
def phone(rig):
    return rig.attach(SimDevice("fake-phone"))


def shown_text(sim: SimDevice) -> str:
    return next(n.text for n in sim.observe().nodes if n.focused and "Edit" in n.short_class)


def test_observe_reads_the_ui_tree_screenshot_and_foreground_app(rig, phone) -> None:
    device = AdbDevice(phone.serial, rig.client, video=False, timeout=5)
    phone.sim.perform(Action("OPENAPP", app="Settings"))
    obs = device.observe()
    assert device.info.kind == "adb" and (device.info.width, device.info.height) == (1080, 2400)
    assert {a.name for a in device.info.apps} >= {"Settings", "Maps", "Shop"}
    assert obs.app == "com.kairos.settings"
    assert "detected" not in obs.extra  # a good tree: the screenshot is not read (no OCR)
    expected = {(n.text, n.bounds) for n in phone.sim.observe().nodes}
    assert {(n.text, n.bounds) for n in obs.nodes} == expected
    assert obs.image.size == (360, 800) and obs.jpeg[:2] == b"\xff\xd8"
    assert any("uiautomator dump" in c for c in phone.commands)
    assert any(c.startswith("screencap") for c in phone.commands)


@pytest.mark.parametrize("video", [False, True], ids=["adb-input", "scrcpy-control"])
def test_every_action_reaches_the_phone(rig, phone, video) -> None:
    device = AdbDevice(phone.serial, rig.client, video=video, timeout=5)
    try:
        if video:
            assert device.session.wait_up(10)
        steps = [Action("OPENAPP", app="Shop"), Action("CLICK", x=540, y=364),
                 Action("TYPE", text="red shoes"), Action("PRESS_ENTER"),
                 Action("PRESS_BACK"), Action("SCROLL", direction="UP"),
                 Action("LONG_CLICK", x=540, y=1200), Action("PRESS_HOME")]
        outcomes = [device.perform(a) for a in steps]
        assert all(o.ok for o in outcomes), [o.error for o in outcomes]
        kinds = [a["type"] for a in phone.actions]
        assert kinds == ["OPENAPP", "CLICK", "TYPE", "PRESS_ENTER", "PRESS_BACK", "SCROLL",
                         "LONG_CLICK", "PRESS_HOME"]
        assert phone.actions[2]["text"] == "red shoes"
        assert phone.actions[5]["direction"] == "UP"  # the finger moved up
        assert outcomes[0].changed and phone.sim.observe().app == "com.android.launcher3"
        assert "app_process" in " ".join(phone.commands) or not video
    finally:
        device.close()


@pytest.mark.parametrize("text", ["it's 100%sure & $HOME", "a  b;c|d`e`\"f\""])
def test_typed_text_arrives_exactly_through_input_text(rig, phone, text) -> None:
    device = AdbDevice(phone.serial, rig.client, video=False, timeout=5)
    device.perform(Action("OPENAPP", app="Shop"))
    device.perform(Action("CLICK", x=540, y=364))
    device.perform(Action("TYPE", text="old text"))
    assert device.perform(Action("TYPE", text=text)).ok
    assert shown_text(phone.sim) == text  # TYPE replaced what the field held


def test_non_ascii_text_is_pasted_through_scrcpy_and_refused_clearly_without(rig, phone):
    plain = AdbDevice(phone.serial, rig.client, video=False, timeout=5)
    plain.perform(Action("OPENAPP", app="Shop"))
    plain.perform(Action("CLICK", x=540, y=364))
    refused = plain.perform(Action("TYPE", text="Grüße 世界"))
    assert not refused.ok and "non-ASCII" in refused.error
    device = AdbDevice(phone.serial, rig.client, video=True, timeout=5)
    try:
        assert device.session.wait_up(10)
        assert device.perform(Action("TYPE", text="Grüße 世界")).ok
        assert shown_text(phone.sim) == "Grüße 世界"
    finally:
        device.close()


def test_openapp_by_label_or_package_and_a_clear_error_for_an_unknown_app(rig, phone) -> None:
    device = AdbDevice(phone.serial, rig.client, video=False, timeout=5)
    assert device.perform(Action("OPENAPP", app="com.kairos.maps")).ok
    assert phone.sim.observe().app == "com.kairos.maps"
    assert device.perform(Action("OPENAPP", app="settings")).ok
    assert phone.sim.observe().app == "com.kairos.settings"
    missing = device.perform(Action("OPENAPP", app="Photoshop"))
    assert not missing.ok and "no app named 'Photoshop'" in missing.error


def test_a_phone_that_went_away_raises_a_device_error_not_a_hang(rig, phone) -> None:
    device = AdbDevice(phone.serial, rig.client, video=False, timeout=3)
    phone.adbd.unplug()
    rig.wait_state(phone.serial, "offline")
    with pytest.raises(AdbDeviceError, match=phone.serial):
        device.observe()
    phone.adbd.plug()
    rig.connect(phone)
    assert device.observe().nodes  # back online: the same driver works again


def test_input_text_escaping_splits_a_literal_percent_s() -> None:
    assert escape_input_text("a b") == ["input text 'a%sb'"]
    assert escape_input_text("x%sy") == ["input text 'x%'", "input text 'sy'"]
    assert escape_input_text("it's") == ["input text 'it'\\''s'"]
    with pytest.raises(ValueError):
        escape_input_text("é")
