"""``run_task "INSTRUCTION" --device SERIAL`` drives an attached adb phone in the foreground."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from devices.adb.fake.rig import FakeAdbRig
from devices.models import Device
from devices.sim import SimDevice

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rig(settings):
    rig = FakeAdbRig()
    settings.ANDROID_ADB_SERVER_PORT = rig.port
    settings.KAIROS_ADB_HOST = "127.0.0.1"
    yield rig
    rig.close()


def test_run_task_with_a_serial_drives_that_adb_phone(rig) -> None:
    phone = rig.attach(SimDevice("fake-adb"))
    out = StringIO()
    call_command("run_task", "Open the Shop app", "--device", phone.serial, "--threshold", "0",
                 "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["actions"][0]["type"] == "OPENAPP" and result["actions"][0]["by"] == "agent"
    assert phone.sim.observe().app == "com.kairos.shop"  # it happened on the phone
    assert {"type": "OPENAPP", "app": "Shop"} in phone.actions
    assert Device.objects.get(name=phone.serial).kind == "adb"


def test_an_unknown_serial_says_so_and_falls_back_to_a_simulated_phone(rig) -> None:
    err = StringIO()
    call_command("run_task", "Open the Shop app", "--device", "R58M000", "--threshold", "0",
                 "--json", stdout=StringIO(), stderr=err)
    assert "no adb phone 'R58M000'" in err.getvalue()
    assert Device.objects.get(name="R58M000").kind == "sim"


def _run(phone, instruction: str) -> dict:
    out = StringIO()
    call_command("run_task", instruction, "--device", phone.serial, "--threshold", "0",
                 "--json", stdout=out)
    return json.loads(out.getvalue())


def test_turn_on_bluetooth_on_a_phone_that_describes_no_app(rig) -> None:
    """A real phone lists system services among its packages and says nothing of what an
    app is for: the agent still knows Bluetooth lives in Settings (issue 27)."""
    phone = rig.attach(SimDevice("real-phone"), real_phone=True)
    result = _run(phone, "Turn on Bluetooth")
    assert phone.sim.state_vars["settings.bluetooth"] is True  # it happened on the phone
    assert result["status"] == "succeeded", result
    assert {"type": "OPENAPP", "app": "Settings"} in phone.actions
    assert not any(a.get("app") in ("Bluetooth", "Systemui", "Media") for a in phone.actions)


def test_turn_on_bluetooth_from_the_screenshot_when_the_tree_cannot_be_read(rig) -> None:
    """``uiautomator dump`` answers "ERROR: could not get idle state." on every screen:
    the agent reads the screenshot (OCR text and the switch's shape) and still succeeds."""
    from devices.adb.fake.phone import IDLE_STATE_ERROR

    phone = rig.attach(SimDevice("busy-phone"), real_phone=True)
    phone.dump_error = IDLE_STATE_ERROR
    result = _run(phone, "Turn on Bluetooth")
    assert phone.sim.state_vars["settings.bluetooth"] is True
    assert result["status"] == "succeeded", result
    assert not any(c.startswith("cat /sdcard") for c in phone.commands if "uiautomator" in c)
    from agents.runtime.models import Step

    steps = Step.objects.filter(task__device__name=phone.serial).order_by("index")
    # what the operator's element list and the logs show: the detected elements
    assert all(any(n["class"] == "ocr.Text" for n in s.ui_nodes) for s in steps)
    assert any(n["class"] == "ocr.Switch" and n["text"] == "Bluetooth"
               for s in steps for n in s.ui_nodes)
