"""The apps a phone lists are the ones a person can open, named as its launcher names
them (issue 27): launcher activities, not the hundreds of packages ``pm list packages``
shows (``com.android.providers.media`` is not an app called "Media")."""
from __future__ import annotations

from pathlib import Path

import pytest

from devices.adb.driver import AdbDevice, label_for, parse_launcher_activities
from devices.adb.fake.rig import FakeAdbRig
from devices.sim import SimDevice

RECORDED = Path(__file__).parent / "fixtures" / "query_activities_launcher.txt"


def test_a_recorded_cmd_package_answer_gives_each_launcher_app_once_with_its_label() -> None:
    # The answer is in the layout Android 14's ``cmd package query-activities`` prints
    # (blocks of ActivityInfo/ApplicationInfo, labels as resource ids), with a Samsung
    # clock and an app whose label is not localised.
    activities = parse_launcher_activities(RECORDED.read_text())
    assert activities == [
        ("com.android.settings", None), ("com.sec.android.app.clockpackage", None),
        ("org.example.tally", "Tally Counter"), ("com.google.android.apps.maps", None),
    ]
    names = [label_for(package, label) for package, label in activities]
    # a Samsung clock is "Clock"; an app's own label wins; resource ids name nothing
    assert names == ["Settings", "Clock", "Tally Counter", "Maps"]


def test_the_brief_form_is_read_too() -> None:
    brief = ("2 activities found:\n  Activity #0:\n    priority=0 preferredOrder=0\n"
             "    com.android.settings/.Settings\n  Activity #1:\n    priority=0\n"
             "    com.whatsapp/.Main\n")
    assert parse_launcher_activities(brief) == [("com.android.settings", None),
                                                ("com.whatsapp", None)]
    assert parse_launcher_activities("No activities found\n") == []


@pytest.fixture(scope="module")
def rig():
    rig = FakeAdbRig()
    yield rig
    rig.close()


def test_a_real_phone_lists_its_launcher_apps_not_its_system_services(rig) -> None:
    phone = rig.attach(SimDevice("real-apps"), real_phone=True)
    device = AdbDevice(phone.serial, rig.client, video=False, timeout=5)
    names = {a.name: a.package for a in device.info.apps}
    assert names["Settings"] == "com.android.settings"
    assert names["Clock"] == "com.google.android.deskclock"
    assert names["Shop"] == "com.kairos.shop"  # an app nobody knows: its package's word
    assert not {"Media", "Gms", "Systemui", "Bluetooth", "Android"} & set(names)
    assert all(a.description == "" for a in device.info.apps)  # a phone describes nothing
    assert any(c.startswith("cmd package query-activities") for c in phone.commands)
