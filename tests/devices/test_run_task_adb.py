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
