"""Shared helpers for the simulator tests (not a test module)."""
from __future__ import annotations

from pathlib import Path

from devices.actions import Action
from devices.sim import AppBundle, SimDevice, load_app, load_suite
from devices.uitree import UINode


def node(nodes: list[UINode], *, text: str | None = None, rid: str | None = None,
         cls: str | None = None, desc: str | None = None) -> UINode:
    for n in nodes:
        if text is not None and n.text != text:
            continue
        if rid is not None and not n.resource_id.endswith(rid):
            continue
        if cls is not None and n.short_class != cls:
            continue
        if desc is not None and n.content_desc != desc:
            continue
        return n
    raise AssertionError(f"no node text={text} rid={rid} cls={cls} desc={desc}")


def has_text(device: SimDevice, text: str) -> bool:
    return any(n.text == text for n in device.observe().nodes)


def tap(device: SimDevice, n: UINode):
    x, y = n.center
    return device.perform(Action("CLICK", x=x, y=y))


def tap_text(device: SimDevice, text: str):
    return tap(device, node(device.observe().nodes, text=text))


def hand_built(tmp_path: Path, app_yaml: str, suite_yaml: str | None = None):
    """Write an app (and a suite) into tmp_path; return (bundle, suite or None)."""
    app_file = tmp_path / "app.yaml"
    app_file.write_text(app_yaml)
    bundle = AppBundle([load_app(app_file)])
    suite = None
    if suite_yaml is not None:
        suite_file = tmp_path / "suite.yaml"
        suite_file.write_text(suite_yaml)
        suite = load_suite(suite_file, apps=bundle)
    return bundle, suite
