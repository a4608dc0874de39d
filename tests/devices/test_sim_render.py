"""What a person sees on the simulated phone's frames."""
from __future__ import annotations

from PIL import Image, ImageChops, ImageStat

from devices.actions import Action
from devices.sim import SimDevice
from tests.devices.sim_helpers import node, tap, tap_text


def _crop(image: Image.Image, bounds, scale: float) -> Image.Image:
    left, top, right, bottom = bounds
    return image.crop((int(left * scale), int(top * scale), int(right * scale), int(bottom * scale)))


def _settings_network(device: SimDevice) -> None:
    device.perform(Action("OPENAPP", app="Settings"))
    tap_text(device, "Network & internet")


def test_switch_on_and_off_render_differently():
    device = SimDevice("r")
    _settings_network(device)
    obs = device.observe()
    wifi = node(obs.nodes, rid="wifi_switch")
    assert wifi.checked
    left, top, right, bottom = wifi.bounds
    knob_area = (right - 260, top, right, bottom)  # where the switch graphic is drawn
    on = _crop(obs.image, knob_area, device.scale)
    tap(device, wifi)
    obs = device.observe()
    assert not node(obs.nodes, rid="wifi_switch").checked
    off = _crop(obs.image, knob_area, device.scale)
    diff = ImageStat.Stat(ImageChops.difference(on, off).convert("L")).mean[0]
    assert diff > 10
    # ON has the blue track; OFF has none.
    def blue_pixels(img: Image.Image) -> int:
        return sum(1 for r, g, b in img.getdata() if b > 180 and r < 80)
    assert blue_pixels(on) > 50
    assert blue_pixels(off) == 0


def test_text_of_elements_is_drawn():
    device = SimDevice("r")
    _settings_network(device)
    obs = device.observe()
    label = node(obs.nodes, text="Mobile network")
    region = _crop(obs.image, (label.bounds[0], label.bounds[1], label.bounds[0] + 400,
                               label.bounds[3]), device.scale).convert("L")
    dark = sum(1 for v in region.getdata() if v < 120)
    assert dark > 40  # glyphs, not blank background


def test_dialog_dims_the_screen_behind_it():
    device = SimDevice("r")
    device.perform(Action("OPENAPP", app="Coffee"))
    tap_text(device, "Latte")
    before = device.observe().image
    tap_text(device, "Place order")  # no choices made: the "Almost there" dialog opens
    obs = device.observe()
    assert obs.extra["dialog"] == "missing_choice"
    point = (20, 300)  # left edge of the content, outside the dialog card
    assert sum(obs.image.getpixel(point)) < sum(before.getpixel(point)) * 0.6
    assert node(obs.nodes, text="Almost there")


def test_focused_field_shows_a_focus_ring_and_the_keyboard():
    device = SimDevice("r")
    device.perform(Action("OPENAPP", app="Clock"))
    tap(device, node(device.observe().nodes, desc="Add alarm"))
    obs = device.observe()
    field = node(obs.nodes, rid="alarm_time")
    unfocused = _crop(obs.image, field.bounds, device.scale)
    keyboard_area = (0, 1500, 1080, 2200)
    no_keyboard = _crop(obs.image, keyboard_area, device.scale)
    tap(device, field)
    obs = device.observe()
    assert node(obs.nodes, rid="alarm_time").focused
    focused = _crop(obs.image, field.bounds, device.scale)
    assert ImageStat.Stat(ImageChops.difference(unfocused, focused).convert("L")).mean[0] > 3
    keyboard = _crop(obs.image, keyboard_area, device.scale)
    assert ImageStat.Stat(ImageChops.difference(no_keyboard, keyboard).convert("L")).mean[0] > 10


def test_frames_are_jpeg_at_the_reduced_scale():
    device = SimDevice("r")
    frame = device.latest_frame()
    assert frame.jpeg[:2] == b"\xff\xd8"
    assert (frame.width, frame.height) == (360, 800)
    assert device.info.width == 1080 and device.info.height == 2400
