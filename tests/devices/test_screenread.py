"""Screens without a usable UI tree are read from the screenshot (issue 27): OCR text
where it is drawn and switches by their shape, as detected nodes of the usual schema —
and only when the tree is missing or names nothing."""
from __future__ import annotations

from difflib import SequenceMatcher

import pytest

from devices.actions import Action
from devices.screenread import (
    OCR_SWITCH, OCR_TEXT, detect_nodes, find_switches, read_screen, tree_is_useful,
)
from devices.sim import SimDevice
from devices.uitree import UINode


def _screen(*taps: str):
    sim = SimDevice("ocr")
    sim.perform(Action("OPENAPP", app="Settings"))
    for label in taps:
        node = next(n for n in sim.observe().nodes if n.text == label)
        sim.perform(Action("CLICK", x=node.center[0], y=node.center[1]))
    return sim.observe()


def _detected_at(detected: list[UINode], tree_node: UINode) -> list[UINode]:
    return [n for n in detected if tree_node.contains(*n.center)]


def test_ocr_finds_each_row_title_where_the_screen_draws_it() -> None:
    obs = _screen()
    detected = detect_nodes(obs.image, obs.width, obs.height, package=obs.app)
    assert all(n.extra["detected"] and n.package == obs.app for n in detected)
    for label in ("Settings", "About phone", "Location", "Kairos virtual phone"):
        drawn = next(n for n in obs.nodes if n.text == label)
        found = [n for n in _detected_at(detected, drawn) if n.cls == OCR_TEXT]
        # OCR may misread a letter ("Locatlon"), so the line must be close, not equal
        read = [SequenceMatcher(None, n.text.replace(" ", "").lower(),
                                label.replace(" ", "").lower()).ratio() for n in found]
        assert max(read, default=0) >= 0.8, (label, [n.text for n in found])


def test_switches_are_found_by_their_shape_with_their_state_and_label() -> None:
    obs = _screen("Network & internet")
    detected = detect_nodes(obs.image, obs.width, obs.height)
    switches = [n for n in detected if n.cls == OCR_SWITCH]
    assert len(switches) == 2
    for tree_switch in (n for n in obs.nodes if n.checkable):
        match = next(s for s in switches if tree_switch.contains(*s.center))
        assert match.checked == tree_switch.checked and match.checkable and match.clickable
        assert match.text.lower() == tree_switch.text.lower()  # the text level with it, left


def test_a_useful_tree_is_used_as_it_is_and_ocr_does_not_run() -> None:
    obs = _screen()
    nodes, detected = read_screen(obs.nodes, obs.image, obs.width, obs.height)
    assert detected is False and nodes == obs.nodes


@pytest.mark.parametrize("tree", [
    [],  # the dump failed
    [UINode(index=0, cls="android.webkit.WebView", text="Checkout", bounds=(0, 0, 1080, 2400))],
    [UINode(index=0, cls="android.view.View", bounds=(0, 0, 1080, 2400)),
     UINode(index=1, cls="android.view.View", bounds=(0, 84, 1080, 400), parent=0)],
], ids=["no-tree", "one-name-for-the-whole-screen", "no-labels"])
def test_a_missing_or_useless_tree_is_merged_with_what_the_screenshot_shows(tree) -> None:
    obs = _screen()
    assert not tree_is_useful(tree, obs.width, obs.height)
    nodes, detected = read_screen(tree, obs.image, obs.width, obs.height)
    assert detected is True
    assert nodes[:len(tree)] == tree  # what the tree had stays, first
    assert [n.index for n in nodes] == list(range(len(nodes)))
    assert any(n.cls == OCR_TEXT and "About" in n.text for n in nodes[len(tree):])
    assert all(UINode.from_json(n.to_json()) == n for n in nodes)  # the schema holds


def test_the_evidence_says_a_step_was_decided_on_detected_elements() -> None:
    from agents.brain.backends.heuristic import HeuristicBackend
    from agents.brain.backends.base import StepContext
    from devices.protocol import Observation

    obs = _screen("Connected devices")
    nodes, _ = read_screen([], obs.image, obs.width, obs.height, package=obs.app)
    seen = Observation(frame=1, width=obs.width, height=obs.height, app=obs.app, nodes=nodes,
                       image=obs.image, jpeg=obs.jpeg)
    backend = HeuristicBackend()
    proposal = backend.propose(StepContext(instruction="Turn on Bluetooth", observation=seen))
    assert proposal.evidence.get("detected") is True
    # it taps the switch the screenshot shows, at the switch
    switch = next(n for n in nodes if n.cls == OCR_SWITCH)
    assert proposal.action.type == "CLICK" and switch.contains(proposal.action.x, proposal.action.y)
    tree = backend.propose(StepContext(instruction="Turn on Bluetooth", observation=obs))
    assert "detected" not in tree.evidence


def test_a_pill_shaped_button_with_text_is_not_taken_for_a_switch() -> None:
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (360, 800), "white")
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((120, 385, 195, 415), radius=15, fill="#1A73E8")
    draw.text((142, 390), "Buy", fill="white", font=ImageFont.load_default(size=16))
    assert find_switches(image)  # its shape alone is a switch's (a coloured pill)
    nodes = detect_nodes(image, 1080, 2400)
    assert not any(n.cls == OCR_SWITCH for n in nodes)
    assert any(n.cls == OCR_TEXT and n.text == "Buy" for n in nodes)
