"""What Android's standard apps are for, as data (issue 27): matched by package on any
vendor's phone and by launcher label, never over a simulated app's own description."""
from __future__ import annotations

from agents.appknowledge import known, knowledge, label_for_package, with_purposes
from agents.backends.heuristic import HeuristicBackend
from agents.backends.base import StepContext
from devices.protocol import AppInfo, Observation
from devices.uitree import UINode
from PIL import Image


def test_the_data_covers_the_standard_apps_with_what_they_are_for() -> None:
    labels = {app.label for app in knowledge()}
    assert {"Settings", "Clock", "Phone", "Messages", "Contacts", "Camera", "Photos",
            "Chrome", "Maps", "Calendar", "Play Store", "Gmail", "YouTube"} <= labels
    settings = known("com.android.settings")
    for word in ("Wi-Fi", "Bluetooth", "airplane mode", "display", "sound", "battery",
                 "location"):
        assert word.lower() in settings.purpose.lower()
    assert {"alarm", "timer", "stopwatch"} <= set(known(label="Clock").purpose.lower()
                                                  .replace(",", " ").split())
    packages = [p for app in knowledge() for p in app.packages]
    assert len(packages) == len(set(packages)), "a package belongs to one app"


def test_vendors_packages_and_labels_find_the_same_app() -> None:
    assert known("com.sec.android.app.clockpackage").label == "Clock"  # Samsung
    assert known("com.android.deskclock").label == "Clock"  # AOSP, Xiaomi
    assert known("com.miui.gallery").label == "Photos"
    assert known("com.unknown.vendor.gallery", "Gallery").label == "Photos"  # by label
    assert known("com.unknown.app", "Tally Counter") is None
    assert label_for_package("com.samsung.android.messaging") == "Messages"


def test_only_empty_descriptions_are_filled() -> None:
    sim = AppInfo("Settings", "com.kairos.settings", "Wi-Fi and Bluetooth")
    phone = AppInfo("Settings", "com.android.settings")
    stranger = AppInfo("Tally Counter", "org.example.tally")
    out = with_purposes((sim, phone, stranger))
    assert out[0].description == "Wi-Fi and Bluetooth"  # the simulator's own words stay
    assert "Bluetooth" in out[1].description
    assert out[2].description == ""


def _launcher(apps: tuple[AppInfo, ...], goal: str):
    nodes = [UINode(index=0, cls="android.widget.FrameLayout", package="com.android.launcher3",
                    bounds=(0, 0, 1080, 2400))]
    obs = Observation(frame=1, width=1080, height=2400, app="com.android.launcher3",
                      nodes=nodes, image=Image.new("RGB", (36, 80)), jpeg=b"")
    return HeuristicBackend().propose(StepContext(instruction=goal, observation=obs,
                                                  apps=apps))


def test_on_a_real_phone_the_agent_opens_settings_for_bluetooth() -> None:
    apps = (AppInfo("Settings", "com.android.settings"), AppInfo("Clock", "com.android.deskclock"),
            AppInfo("Tally Counter", "org.example.tally"))
    before = _launcher(apps, "Turn on Bluetooth")
    assert before.action.type == "IMPOSSIBLE"  # the phone alone says nothing of Settings
    after = _launcher(with_purposes(apps), "Turn on Bluetooth")
    assert after.action.type == "OPENAPP" and after.action.app == "Settings"
    alarm = _launcher(with_purposes(apps), "Set an alarm for 7 am")
    assert alarm.action.app == "Clock"
    # an app nobody describes is still found by its name
    tally = _launcher(with_purposes(apps), "Open Tally Counter")
    assert tally.action.app == "Tally Counter"
