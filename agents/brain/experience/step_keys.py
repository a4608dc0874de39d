"""Experience memory's step keys: the step before as a key that survives changing
parameters (:func:`step_key`, :func:`pick_group`), and whether two of them are the same
step (:func:`prev_matches`) — the precondition "what was just done".

Split out of :mod:`agents.brain.experience.memory`, which re-exports every name here.
Pure Python (no Django).
"""
from __future__ import annotations

import json
import re
from typing import Any

from agents.brain.experience.slots import label_named, named_equally, text_template
from agents.brain.experience.templates import _group, element_label, target_of
from devices.actions import CLICK, OPENAPP, POINT_TYPES, TYPE, Action, validate_action
from devices.uitree import UINode


def pick_group(action: dict[str, Any] | Action | None, nodes: list[UINode] | None) -> str:
    """Where ``action`` (a tap on the screen ``nodes``) picked one of several: its element's
    sibling group ("RadioButton:pl_day_group" — same class, same parent, at least two),
    else "". What comes after a pick depends on the group, not on which one was picked:
    after any departure, the class; after any day, the time."""
    if action is None or not nodes:
        return ""
    if isinstance(action, dict):
        checked = validate_action(action)
        if not isinstance(checked, Action):
            return ""
        action = checked
    node = target_of(action, nodes)
    if node is None:
        return ""
    cls, parent, group = _group(node, nodes)
    return f"{cls}:{parent}" if len(group) >= 2 and node in group and parent else ""


def step_key(action: dict[str, Any] | Action | None, summary: str, instruction: str,
             group: str = "") -> str:
    """The previous step as a key that survives changing parameters: its type and its
    element's label ("CLICK save goal"), a label the instruction names as ``<named>``,
    typed text as its template, an app by name; ``group``: :func:`pick_group` of the tap
    (the pick is then the same step whichever sibling it picked). What a form needs next
    depends on what was just done: "Save goal" on the goal screen before typing is not
    after it."""
    if action is None:
        return ""
    if isinstance(action, Action):
        action = action.to_json()
    kind = str(action.get("type", ""))
    if kind == TYPE:
        typed = text_template(str(action.get("text") or ""), instruction)
        return f"{kind}|{json.dumps(typed.to_json())}"
    if kind == OPENAPP:
        # opening an app is tapping its icon, whose label is the app's name
        return f"{CLICK}|{str(action.get('app') or '').lower()}"
    if kind in POINT_TYPES:
        label = ""
        if "'" in summary:
            label = summary.split("'", 1)[1].rsplit("'", 1)[0]
        key = f"{kind}|{label.lower()}" + (f"{GROUP_MARK}{group}>" if group else "")
        if label and label_named(label, instruction):
            # a row or option the instruction names: another instruction names another one
            return key + NAMED_MARK
        return key
    return kind


NAMED_MARK = "|<named>"
GROUP_MARK = "|<in:"


def _key_parts(key: str) -> tuple[str, str, str, bool]:
    """(head, label, group, named) of a :func:`step_key`."""
    named = key.endswith(NAMED_MARK)
    if named:
        key = key[:-len(NAMED_MARK)]
    group = ""
    if GROUP_MARK in key and key.endswith(">"):
        key, _, group = key.partition(GROUP_MARK)
        group = group[:-1]
    head, _, label = key.partition("|")
    return head, label, group, named


def with_screen(key: str, nodes: list[UINode], instruction: str) -> str:
    """``key`` (the step before) marked named when what it tapped is still on this screen
    and the instruction singles it out among its siblings: the day or the option picked
    on a form that is still open ("friday" for "Friday, Dec 4")."""
    if "|" not in key or key.endswith(NAMED_MARK):
        return key
    label = _key_parts(key)[1]
    if not label:
        return key
    hits = [n for n in nodes if element_label(n, nodes).lower() == label]
    if len(hits) != 1:
        return key
    node = hits[0]
    group = _group(node, nodes)[2]
    if len(group) < 2 or node not in group:
        return key
    # tapped, it may now be the option already chosen: any of those named best counts
    tied = named_equally([element_label(n, nodes) for n in group], instruction)
    return key + NAMED_MARK if group.index(node) in tied else key


def _renamed_key(key: str, rename: dict[str, str]) -> str:
    """A remembered step key on another entity's copy of the screen: a label made from an
    id ("lamp in row") renamed as the ids are ("boots in row")."""
    if not rename or "|" not in key:
        return key
    head, _, label = key.partition("|")
    return head + "|" + re.sub(r"[a-z0-9]+", lambda m: rename.get(m.group(0), m.group(0)),
                               label)


def prev_matches(remembered: str, current: str) -> bool:
    """Is the step before the same? The same label (whether or not each instruction says
    it), a label each instruction says — the day each wanted, the parcel each named — or
    a pick in the same group of siblings (:func:`pick_group`)."""
    if remembered == current:
        return True
    r_head, r_label, r_group, r_named = _key_parts(remembered)
    c_head, c_label, c_group, c_named = _key_parts(current)
    if r_head != c_head or "|" not in remembered or "|" not in current:
        return False
    if r_group and r_group == c_group:
        return True
    if r_named and c_named:
        return True
    return r_label == c_label
