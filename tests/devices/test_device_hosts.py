"""Device hosts across machines: two (or three) ``device_host`` processes on one Redis.

One host has simulated phones, one the fake adb phone (reached through the real adb
server), and a third is configured with the first one's phone: it must wait, never drive
it at the same time, and take it over when the first host dies.
"""
from __future__ import annotations

import os
import time

import pytest

from devices.actions import Action
from devices.host import DeviceError, RedisDeviceClient
from devices.models import Device
from devices.sim import SimDevice
from tests.devices.hosts_helpers import adb_rig, hosts, wait_for  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_two_hosts_on_one_redis_each_serve_their_own_phones(hosts, adb_rig) -> None:
    phone = adb_rig.attach(SimDevice("fake-adb"))
    Device.objects.create(name="hA-sim")
    a = hosts.start("a", "--devices", "hA-sim", "--adb", "off")
    b = hosts.start("b", "--devices", "", "--adb", "on", "--no-video",
                    ANDROID_ADB_SERVER_PORT=str(adb_rig.port), KAIROS_ADB_CONNECT=phone.serial)
    wait_for(lambda: hosts.owner_of("hA-sim") and hosts.owner_of(phone.serial),
             what="both hosts to announce their phones")
    assert hosts.owner_of("hA-sim") != hosts.owner_of(phone.serial)

    client = RedisDeviceClient(os.environ["KAIROS_TEST_REDIS_URL"], timeout=10)
    assert client.info(phone.serial).kind == "adb"
    assert client.perform(phone.serial, Action("OPENAPP", app="Shop")).ok
    assert phone.sim.observe().app == "com.kairos.shop"  # the request reached that phone
    assert client.observe("hA-sim").app == "com.android.launcher3"
    row = wait_for(lambda: Device.objects.filter(name=phone.serial, status="online").first(),
                   what="the adb phone's row")
    assert row.kind == "adb" and (row.width, row.height) == (1080, 2400)

    # A third host configured with host A's phone waits instead of driving it too.
    hosts.start("c", "--devices", "hA-sim", "--adb", "off")
    wait_for(lambda: any("hA-sim" in h.get("waiting", []) for h in hosts.listing()),
             what="host C to wait for hA-sim")
    owner_a = hosts.owner_of("hA-sim")
    listed = hosts.listing_command()  # what an admin sees
    assert f"{phone.serial} (adb)" in listed and "hA-sim (sim)" in listed
    assert "hA-sim (waiting: another host owns it)" in listed

    # Host A dies without a word: host C takes its phone over.
    a.kill()
    a.wait(10)
    new_owner = wait_for(lambda: (hosts.owner_of("hA-sim") or "") not in ("", owner_a)
                         and hosts.owner_of("hA-sim"), what="host C to take hA-sim over")
    assert new_owner != owner_a
    assert client.observe("hA-sim").nodes

    # Host B dies too: a live host sees its phone's owner key expire and marks it offline,
    # and callers are told so at once instead of waiting out their timeout.
    b.kill()
    b.wait(10)
    wait_for(lambda: Device.objects.filter(name=phone.serial, status="offline").exists(),
             what="the dead host's phone offline")
    started = time.monotonic()
    with pytest.raises(DeviceError, match="offline"):
        client.observe(phone.serial)
    assert time.monotonic() - started < 2


def test_an_unplugged_phone_goes_offline_and_comes_back_online(hosts, adb_rig) -> None:
    phone = adb_rig.attach(SimDevice("fake-adb"))
    hosts.start("b", "--devices", "", "--adb", "on", "--no-video",
                ANDROID_ADB_SERVER_PORT=str(adb_rig.port), KAIROS_ADB_CONNECT=phone.serial)
    wait_for(lambda: Device.objects.filter(name=phone.serial, status="online").exists(),
             what="the adb phone online")
    phone.adbd.unplug()
    wait_for(lambda: Device.objects.filter(name=phone.serial, status="offline").exists(),
             what="the unplugged phone offline")
    phone.adbd.plug()
    wait_for(lambda: Device.objects.filter(name=phone.serial, status="online").exists(),
             what="the phone online again")
    client = RedisDeviceClient(os.environ["KAIROS_TEST_REDIS_URL"], timeout=10)
    assert client.observe(phone.serial).nodes


def test_device_host_with_adb_on_and_no_adb_server_refuses_to_start_clearly(settings) -> None:
    from django.core.management import CommandError, call_command

    from devices.adb.fake.rig import free_port

    settings.REDIS_URL = os.environ["KAIROS_TEST_REDIS_URL"]
    settings.ANDROID_ADB_SERVER_PORT = free_port()  # nothing listens there
    with pytest.raises(CommandError, match=f"no adb server answers at 127.0.0.1:"
                                           f"{settings.ANDROID_ADB_SERVER_PORT}"):
        call_command("device_host", "--devices", "", "--adb", "on")
