"""Experience memory's elements and decisions: where an element is (:class:`Locator`, by
resource-id, label, class and place among its siblings — never raw coordinates) and an
action bound to it (:class:`ActionTemplate`), with what must hold for it to apply again.

Split out of :mod:`agents.brain.experience.memory`, which re-exports every name here.
Pure Python (no Django).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from agents.brain.experience.screen import id_tail, rename_id, short_class
from agents.brain.experience.slots import (
    TextTemplate, label_named, singled_out, text_template,
)
from devices.actions import OPENAPP, POINT_TYPES, TYPE, Action
from devices.uitree import UINode, node_at


# --- elements ------------------------------------------------------------------------


def element_label(node: UINode, nodes: list[UINode]) -> str:
    """What a person reads on the element: its text or description, else its first
    text child (a list row's title)."""
    if node.text or node.content_desc:
        return node.text or node.content_desc
    for other in nodes:
        if other.parent == node.index and (other.text or other.content_desc):
            return other.text or other.content_desc
    return ""


def _parent_rid(node: UINode, by_index: dict[int, UINode]) -> str:
    parent = by_index.get(node.parent) if node.parent is not None else None
    return id_tail(parent) if parent is not None else ""


def _siblings(node_cls: str, parent_rid: str, depth: int, nodes: list[UINode]) -> list[UINode]:
    by_index = {n.index: n for n in nodes}
    return [n for n in nodes if short_class(n) == node_cls and n.depth == depth
            and _parent_rid(n, by_index) == parent_rid]


def _group(node: UINode, nodes: list[UINode]) -> tuple[str, str, list[UINode]]:
    """``node``'s class, its parent's id and its siblings (same class, same parent, same
    depth; ``node`` among them)."""
    cls, parent = short_class(node), _parent_rid(node, {n.index: n for n in nodes})
    return cls, parent, _siblings(cls, parent, node.depth, nodes)


@dataclass(frozen=True)
class Locator:
    """Where an element is, by what does not move: ``rid`` (resource-id tail), ``label``,
    ``cls`` (short class), ``parent`` (the parent's resource-id tail), ``depth`` and
    ``sibling`` (its place among same-class siblings). ``named``: the label came from the
    instruction — a slot, re-bound to the sibling the new instruction names."""

    rid: str
    label: str
    cls: str
    parent: str
    depth: int
    sibling: int
    named: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"rid": self.rid, "label": self.label, "cls": self.cls, "parent": self.parent,
                "depth": self.depth, "sibling": self.sibling, "named": self.named}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Locator":
        return cls(str(data.get("rid", "")), str(data.get("label", "")), str(data.get("cls", "")),
                   str(data.get("parent", "")), int(data.get("depth", 0)),
                   int(data.get("sibling", 0)), bool(data.get("named", False)))

    def renamed(self, rename: dict[str, str]) -> "Locator":
        """The locator on another entity's copy of its screen (``boots_day_save`` →
        ``lamp_day_save``; :func:`agents.brain.experience.screen.aligned`)."""
        if not rename:
            return self
        return replace(self, rid=rename_id(self.rid, rename),
                       parent=rename_id(self.parent, rename))

    def identity(self) -> str:
        """What makes two decisions the same decision: a named slot is one decision
        whichever sibling it names; otherwise the element."""
        if self.named:
            return f"named:{self.cls}:{self.parent}"
        return f"{self.cls}:{self.rid or self.label.lower()}"


def locate(node: UINode, nodes: list[UINode], instruction: str) -> Locator:
    cls, parent, siblings = _group(node, nodes)
    label = element_label(node, nodes)
    # A label is a slot only where the instruction names it AND the element is one of a
    # group the instruction chooses from (list rows, switches, radio buttons): by all its
    # words, or by the words only it has among them ("my hiking boots", "friday").
    named = bool(label) and node in siblings and _pick(siblings, nodes, instruction) is node
    return Locator(id_tail(node), label, cls, parent, node.depth,
                   siblings.index(node) if node in siblings else 0, named)


def resolve(locator: Locator, nodes: list[UINode], instruction: str) -> UINode | None:
    """The element ``locator`` means on this screen for this instruction, or None.

    A named slot binds the one sibling the new instruction names (none or several: None —
    ask, never the remembered one). Otherwise resource-id (unique), then label among the
    same class, then the place among siblings when the label still agrees."""
    if locator.named:
        return _pick(_siblings(locator.cls, locator.parent, locator.depth, nodes), nodes,
                     instruction)
    if locator.rid:
        hits = [n for n in nodes if id_tail(n) == locator.rid]
        if len(hits) == 1:
            return hits[0]
    if locator.label:
        hits = [n for n in nodes if short_class(n) == locator.cls
                and element_label(n, nodes).lower() == locator.label.lower()]
        if len(hits) == 1:
            return hits[0]
    group = _siblings(locator.cls, locator.parent, locator.depth, nodes)
    if 0 <= locator.sibling < len(group) and (
            not locator.label or element_label(group[locator.sibling], nodes) == locator.label):
        return group[locator.sibling]
    return None


def _pick(group: list[UINode], nodes: list[UINode], instruction: str) -> UINode | None:
    """The one of ``group`` the instruction singles out (:func:`singled_out`), or None."""
    labels = [element_label(n, nodes) for n in group]
    checked = [n.checked if n.checkable else None for n in group]
    index = singled_out(labels, instruction, checked)
    return group[index] if index is not None else None


def _names_another(node: UINode, nodes: list[UINode], instruction: str) -> bool:
    """``node`` is an option (checkable) and ``instruction`` singles out another of its
    sibling options (:func:`_pick`). A row that leads elsewhere ("Settings" beside
    "Savings") is a way, not a choice: it is not checked."""
    if not node.checkable:
        return False
    group = _group(node, nodes)[2]
    if len(group) < 2 or node not in group:
        return False
    named = _pick(group, nodes, instruction)
    return named is not None and named is not node


def target_of(action: Action, nodes: list[UINode]) -> UINode | None:
    if action.type not in POINT_TYPES or action.x is None or action.y is None:
        return None
    return node_at(nodes, action.x, action.y, clickable_only=True) or node_at(
        nodes, action.x, action.y)


# --- decisions -----------------------------------------------------------------------


@dataclass(frozen=True)
class ActionTemplate:
    """An action with its element as a :class:`Locator` and typed text as a template."""

    type: str
    locator: Locator | None = None
    text: TextTemplate | None = None
    app: str = ""
    direction: str = ""

    def renamed(self, rename: dict[str, str]) -> "ActionTemplate":
        if not rename or self.locator is None:
            return self
        return replace(self, locator=self.locator.renamed(rename))

    def key(self) -> str:
        parts = [self.type]
        if self.locator is not None:
            parts.append(self.locator.identity())
        if self.text is not None:
            parts.append(json.dumps(self.text.to_json()))
        if self.app:
            parts.append(self.app.lower())
        if self.direction:
            parts.append(self.direction)
        return "|".join(parts)

    @property
    def slots(self) -> int:
        named = 1 if self.locator is not None and self.locator.named else 0
        return named + (len(self.text.slots) if self.text is not None else 0)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type}
        if self.locator is not None:
            data["locator"] = self.locator.to_json()
        if self.text is not None:
            data["text"] = self.text.to_json()
        if self.app:
            data["app"] = self.app
        if self.direction:
            data["direction"] = self.direction
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ActionTemplate":
        return cls(
            str(data["type"]),
            Locator.from_json(data["locator"]) if data.get("locator") else None,
            TextTemplate.from_json(data["text"]) if data.get("text") is not None else None,
            str(data.get("app", "")), str(data.get("direction", "")))

    def describe(self) -> str:
        if self.locator is not None:
            what = ("the one the instruction names" if self.locator.named
                    else f"'{self.locator.label or self.locator.rid}'")
            return f"{self.type} {what}"
        if self.text is not None:
            return f"{self.type} " + "".join(
                p[1] if p[0] == "lit" else f"<{p[1]} {p[2] + 1} of the instruction>"
                for p in self.text.parts)
        return f"{self.type} {self.app or self.direction}".strip()


def template_of(action: Action, nodes: list[UINode], instruction: str) -> ActionTemplate | None:
    """The action as a template, or None where it cannot be bound to an element."""
    if action.type in POINT_TYPES:
        node = target_of(action, nodes)
        if node is None:
            return None
        return ActionTemplate(action.type, locator=locate(node, nodes, instruction))
    if action.type == TYPE:
        return ActionTemplate(TYPE, text=text_template(action.text or "", instruction))
    if action.type == OPENAPP:
        return ActionTemplate(OPENAPP, app=action.app or "")
    return ActionTemplate(action.type, direction=str(action.direction or ""))


def bind(template: ActionTemplate, nodes: list[UINode], instruction: str) -> Action | None:
    """The template as an action on this screen for this instruction, or None."""
    if template.locator is not None:
        node = resolve(template.locator, nodes, instruction)
        if node is None:
            return None
        x, y = node.center
        return Action(template.type, x=x, y=y)
    if template.type == TYPE:
        assert template.text is not None
        text = template.text.bind(instruction)
        return Action(TYPE, text=text) if text is not None else None
    if template.type == OPENAPP:
        return Action(OPENAPP, app=template.app)
    if template.direction:
        return Action(template.type, direction=template.direction)
    return Action(template.type)


def named_state(nodes: list[UINode], instruction: str) -> bool | None:
    """The checked state of the one switch or checkbox the instruction names on this
    screen, or None (none, or several): the precondition that tells "turn it on" from
    "it is already on". An option of a group (a radio button) is chosen, not switched:
    whether the named one is chosen already is its own state (``target_checked``), and
    whether "Visa" or "my amex" names its option fully must not make two requests to
    choose one differ."""
    hits = [n for n in nodes if n.checkable and short_class(n) != "RadioButton"
            and label_named(element_label(n, nodes), instruction)]
    return hits[0].checked if len(hits) == 1 else None


def precondition(template: ActionTemplate, nodes: list[UINode], instruction: str) -> dict[str, Any]:
    """What must hold for the decision to apply again: the named element's state and, for
    a tap on a switch, the switch's own state."""
    pre: dict[str, Any] = {"named": named_state(nodes, instruction)}
    if template.locator is not None:
        node = resolve(template.locator, nodes, instruction)
        if node is not None and node.checkable:
            pre["target_checked"] = node.checked
    return pre
