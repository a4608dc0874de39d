"""When is a screen still the screen an action was decided on? (devices/uitree.py)"""
from __future__ import annotations

from dataclasses import replace

from devices.actions import Action
from devices.sim import SimDevice
from devices.uitree import screen_signature


def test_the_status_bar_clock_ticking_does_not_change_the_screen():
    nodes = SimDevice("p").observe().nodes
    later = [replace(n, text="9:42") if n.resource_id.endswith(":id/clock") else n
             for n in nodes]
    assert later != nodes
    assert screen_signature(later) == screen_signature(nodes)


def test_another_app_or_a_changed_state_is_another_screen():
    phone = SimDevice("p")
    launcher = phone.observe().nodes
    phone.perform(Action("OPENAPP", app="Settings"))
    settings = phone.observe().nodes
    assert screen_signature(settings) != screen_signature(launcher)
    wifi_off = [replace(n, text=n.text.replace("Wi-Fi On", "Wi-Fi Off")) for n in settings]
    assert wifi_off != settings
    assert screen_signature(wifi_off) != screen_signature(settings)
