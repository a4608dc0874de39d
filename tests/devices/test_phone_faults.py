"""Faults of real phones, through the product's own step loop.

* the phone is unplugged while it performs a step → a ``device_error`` ticket (the loop
  does not crash), and the same phone works again once it is plugged back in;
* the device host dies while a step waits on its phone → that step becomes a ticket, and
  the restarted host does not run the request again (no duplicated action).
"""
from __future__ import annotations

import os
import threading

import pytest

from agents.brain.backends.base import Proposal
from agents.runtime.models import TaskStatus, TicketReason
from agents.runtime.services import lifecycle
from devices.actions import Action
from devices.adb.driver import AdbDevice
from devices.host import DeviceError, DeviceHost, LocalDeviceClient, RedisDeviceClient, \
    set_device_client
from devices.models import Device
from devices.sim import SimDevice
from tests.devices.hosts_helpers import adb_rig, hosts, wait_for  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)


def click_with_confidence(ctx):
    return Proposal(Action("CLICK", x=540, y=1200), confidence=5.0)


def test_a_phone_unplugged_mid_step_becomes_a_ticket_and_works_again_when_back(
        adb_rig, demo, inline_steps, scripted) -> None:
    phone = adb_rig.attach(SimDevice("fake-adb"))
    device = AdbDevice(phone.serial, adb_rig.client, video=False, timeout=3)
    previous = set_device_client(LocalDeviceClient(DeviceHost({phone.serial: device})))
    try:
        row = Device.objects.create(name=phone.serial, kind="adb", width=1080, height=2400)
        scripted([click_with_confidence])
        phone.before_act = lambda action: phone.adbd.unplug()  # the cable comes out
        task = lifecycle.create_task(demo["operator"], row, "Tap the middle", threshold=1,
                                     backend="scripted")
        inline_steps.drain()
        task.refresh_from_db()
        assert task.status == TaskStatus.WAITING_OPERATOR
        ticket = task.tickets.get()
        assert ticket.reason == TicketReason.DEVICE_ERROR
        assert phone.serial in ticket.note

        phone.before_act = None
        phone.adbd.plug()
        adb_rig.connect(phone)
        assert device.observe().nodes  # back online: the same phone answers again
    finally:
        set_device_client(previous)


@pytest.mark.services
def test_a_killed_host_turns_its_waiting_step_into_a_ticket_and_never_repeats_it(
        hosts, adb_rig) -> None:  # noqa: F811
    phone = adb_rig.attach(SimDevice("fake-adb"))
    env = {"ANDROID_ADB_SERVER_PORT": str(adb_rig.port), "KAIROS_ADB_CONNECT": phone.serial}
    host = hosts.start("b", "--devices", "", "--adb", "on", "--no-video", **env)
    wait_for(lambda: Device.objects.filter(name=phone.serial, status="online").exists(),
             what="the adb phone online")
    client = RedisDeviceClient(os.environ["KAIROS_TEST_REDIS_URL"], timeout=3)

    entered, release = threading.Event(), threading.Event()

    def hang(action):  # the phone is busy with this tap when its host dies
        entered.set()
        release.wait(30)

    phone.before_act = hang
    outcome: list = []
    caller = threading.Thread(target=lambda: outcome.append(_perform(client, phone.serial)))
    caller.start()
    assert entered.wait(30)
    host.kill()
    host.wait(10)
    caller.join(10)
    assert isinstance(outcome[0], DeviceError)  # the in-flight step is told, not left hanging
    # a request sent while the dead host still seems to own the phone queues and times out
    late = _perform(client, phone.serial, Action("PRESS_HOME"))
    assert isinstance(late, DeviceError)

    release.set()
    phone.before_act = None
    hosts.start("b2", "--devices", "", "--adb", "on", "--no-video", **env)
    wait_for(lambda: Device.objects.filter(name=phone.serial, status="online").exists()
             and client.present([phone.serial])[phone.serial], what="the phone back online")
    assert client.observe(phone.serial).nodes
    performed = [a["type"] for a in phone.actions]
    assert performed.count("CLICK") == 1 and "PRESS_HOME" not in performed


def _perform(client, serial, action=Action("CLICK", x=540, y=1200)):
    try:
        return client.perform(serial, action)
    except DeviceError as exc:
        return exc
