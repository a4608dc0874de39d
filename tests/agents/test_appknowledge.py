"""What Android's standard apps are for, as data (issue 27): matched by package on any
vendor's phone and by launcher label, never over a simulated app's own description."""
from __future__ import annotations

from agents.brain.appknowledge import with_purposes
from devices.android_apps import known, knowledge, label_for_package
from agents.brain.backends.heuristic import HeuristicBackend
from agents.brain.backends.base import StepContext
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


def _launcher(apps: tuple[AppInfo, ...], goal: str, *, asked: list[str] | None = None,
              answers: list[str] | None = None):
    nodes = [UINode(index=0, cls="android.widget.FrameLayout", package="com.android.launcher3",
                    bounds=(0, 0, 1080, 2400))]
    obs = Observation(frame=1, width=1080, height=2400, app="com.android.launcher3",
                      nodes=nodes, image=Image.new("RGB", (36, 80)), jpeg=b"")
    return HeuristicBackend().propose(StepContext(instruction=goal, observation=obs,
                                                  apps=apps, asked=list(asked or []),
                                                  answers=list(answers or [])))


def test_on_a_real_phone_the_agent_opens_settings_for_bluetooth() -> None:
    apps = (AppInfo("Settings", "com.android.settings"), AppInfo("Clock", "com.android.deskclock"),
            AppInfo("Tally Counter", "org.example.tally"))
    before = _launcher(apps, "Turn on Bluetooth")
    # the phone alone says nothing of Settings: the user is asked which app
    assert before.action is None and before.clarification is not None
    after = _launcher(with_purposes(apps), "Turn on Bluetooth")
    assert after.action.type == "OPENAPP" and after.action.app == "Settings"
    alarm = _launcher(with_purposes(apps), "Set an alarm for 7 am")
    assert alarm.action.app == "Clock"
    # an app nobody describes is still found by its name
    tally = _launcher(with_purposes(apps), "Open Tally Counter")
    assert tally.action.app == "Tally Counter"


# --- an app nobody describes is asked about (issue 27, item 1) -------------------------

PHONE = (AppInfo("Tally Counter", "org.example.tally"), AppInfo("Wanderlog", "com.wanderlog"),
         AppInfo("Pocket Ledger", "org.example.ledger"))


def test_when_no_app_fits_the_user_is_asked_which_with_the_apps_as_quick_replies() -> None:
    asked = _launcher(PHONE, "Plan my trip to Lisbon")
    assert asked.action is None and asked.clarification is not None
    assert asked.clarification.question == "Which app should I use for “Plan my trip to Lisbon”?"
    assert asked.clarification.options == ["Tally Counter", "Wanderlog", "Pocket Ledger"]
    assert asked.confidence is not None and asked.confidence < 4


def test_the_app_the_answer_names_is_opened_and_an_answer_naming_none_is_impossible() -> None:
    goal = "Plan my trip to Lisbon"
    question = _launcher(PHONE, goal).clarification.question
    opened = _launcher(PHONE, goal, asked=[question], answers=["Wanderlog, please"])
    assert opened.action is not None and (opened.action.type, opened.action.app) == (
        "OPENAPP", "Wanderlog")
    assert opened.confidence == 5.0  # the user chose it
    none = _launcher(PHONE, goal, asked=[question], answers=["I don't have one"])
    assert none.action is not None and none.action.type == "IMPOSSIBLE"
    assert none.clarification is None  # never the same question twice
    assert "No installed app fits the goal" in none.thought


def test_a_phone_with_no_apps_is_impossible_without_asking() -> None:
    empty = _launcher((), "Plan my trip to Lisbon")
    assert empty.clarification is None
    assert empty.action is not None and empty.action.type == "IMPOSSIBLE"


def test_at_most_eight_apps_are_offered_the_most_plausible_first() -> None:
    many = tuple(AppInfo(f"Tool {n}", f"org.example.tool{n}") for n in range(12)) + (
        AppInfo("Travelbook", "com.example.travelbook"),)
    asked = _launcher(many, "Find travel deals for Lisbon")
    options = asked.clarification.options
    assert len(options) == 8
    assert options[0] == "Travelbook"  # shares "travel" with the goal
    assert options[1:] == [f"Tool {n}" for n in range(7)]  # then the phone's order
