"""Live video from an adb phone: the scrcpy session through the real adb server.

What an operator notices: the screen they see is the phone's newest screen (never one
behind), and the video comes back by itself when the scrcpy server dies.
"""
from __future__ import annotations

import pytest

from devices.actions import Action
from devices.adb.driver import AdbDevice
from devices.adb.fake.rig import FakeAdbRig
from devices.adb.scrcpy import jpeg_to_image
from devices.sim import SimDevice


@pytest.fixture(scope="module")
def rig():
    rig = FakeAdbRig()
    yield rig
    rig.close()


@pytest.fixture
def streaming(rig):
    phone = rig.attach(SimDevice("fake-video"))
    device = AdbDevice(phone.serial, rig.client, video=True, timeout=5)
    assert device.session.wait_up(10), "no first frame"
    yield phone, device
    device.close()


def server_of(phone):
    return next(iter(phone.servers.values()))


def test_the_last_frame_sent_is_the_last_frame_shown(streaming) -> None:
    phone, device = streaming
    session = device.session
    for step in [Action("OPENAPP", app="Settings"), Action("PRESS_HOME"),
                 Action("OPENAPP", app="Clock"), Action("PRESS_HOME")]:
        before = session.latest_frame().number
        phone.sim.perform(step)  # the screen changes on the phone
        frame = session.wait_for_frame(before, 5)
        assert frame is not None, f"no frame after {step.type}"
        # decoded without a frame of lag: what is shown is what the phone sent last
        assert session.frame_pts == server_of(phone).last_sent_pts
    shown = jpeg_to_image(session.latest_frame().jpeg).resize((60, 133))
    truth = phone.sim.observe().image.resize((60, 133))
    diff = sum(abs(a - b) for p, q in zip(shown.getdata(), truth.getdata())
               for a, b in zip(p, q)) / (60 * 133 * 3)
    assert diff < 12, f"the shown frame is not the phone's screen (mean diff {diff:.1f})"


def test_a_touch_of_a_stale_video_size_is_dropped_as_the_server_does(streaming) -> None:
    from devices.adb import scrcpy

    phone, device = streaming
    device.session.send(scrcpy.inject_touch(scrcpy.MOTION_DOWN, 10, 10, 999, 999),
                        scrcpy.inject_touch(scrcpy.MOTION_UP, 10, 10, 999, 999))
    assert device.perform(Action("OPENAPP", app="Settings")).ok  # control socket in order
    assert server_of(phone).dropped_touches == 2
    assert [a["type"] for a in phone.actions] == ["OPENAPP"]


def test_the_stream_reconnects_when_the_scrcpy_server_dies(streaming) -> None:
    phone, device = streaming
    session = device.session
    before = session.latest_frame().number
    phone.kill_scrcpy()
    assert session.wait_for_frame(before, 10) is not None  # the new server's first frame
    assert session.restarts >= 1 and session.up.is_set()
    after = session.latest_frame().number
    assert device.perform(Action("OPENAPP", app="Maps")).ok
    assert session.wait_for_frame(after, 5) is not None
    assert phone.sim.observe().app == "com.kairos.maps"


def test_a_rotated_phone_streams_at_the_turned_size_and_taps_land_right(streaming) -> None:
    phone, device = streaming
    session = device.session
    phone.sim.perform(Action("OPENAPP", app="Shop"))
    before = session.wait_for_frame(session.latest_frame().number, 5).number
    server_of(phone).rotate()
    frame = session.wait_for_frame(before, 5)
    assert (frame.width, frame.height) == (800, 360)  # the decoder follows the new size
    assert device.screen_size == (2400, 1080)
    obs = device.observe()
    assert (obs.width, obs.height) == (2400, 1080) and obs.image.size == (800, 360)
    # The Shop's search field, (540, 364) upright, is at (364, 539) once turned left.
    phone.actions.clear()
    assert device.perform(Action("CLICK", x=364, y=539)).ok
    tap = phone.actions[0]
    assert tap["type"] == "CLICK" and abs(tap["x"] - 540) <= 6 and abs(tap["y"] - 364) <= 6
    assert server_of(phone).dropped_touches == 0
