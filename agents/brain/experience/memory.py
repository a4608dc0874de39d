"""Experience memory: what an installation learned from its people, and matching it.

Pure Python (no Django; the database store is ``agents/runtime/experience_store.py``). An entry is
one step a person decided or confirmed: the app (package), the screen's signature
(:mod:`agents.brain.experience.screen`), the instruction, and the action bound to its element
by locators — resource-id, label, class, place among its siblings (LEARNING lesson 1;
AppAgent's element docs key on resource-id + parent + index, and orphan on a new layout,
so here each locator is kept apart and tried in turn) — never raw coordinates. Typed text
and tapped labels that came from the instruction are slots (:mod:`agents.brain.experience.slots`).
Each entry has a polarity: +1 a person confirmed this action on this screen for this
instruction, −1 a person corrected it (lesson 7: a correction demotes, the history stays).

:func:`lookup` finds the entries of the current app on the same kind of screen whose
precondition holds (the state of the switch the instruction names, the fields' state),
weighs them by how alike the instructions are, groups them by decision and re-binds the
best one to the new instruction, with its evidence. Whether that is good enough to act
alone is the calibrator's call (:mod:`agents.brain.calibration.experience`).
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Protocol

from agents.brain.experience.screen import (
    Signature, aligned, id_tail, rename_id, screen_signature, short_class,
)
from agents.brain.experience.slots import (
    TextTemplate, intent_similarity, label_named, named_equally, shape, singled_out,
    text_template,
)
from devices.actions import CLICK, OPENAPP, POINT_TYPES, TYPE, Action, validate_action
from devices.uitree import UINode, node_at

CONFIRM = 1
CONTRADICT = -1
# Sources of an entry: what production recorded (LEARNING lesson 3: never the agent's own
# "finished").
SOURCES = ("approve", "edit", "takeover", "verdict", "spot_check", "import")
# A screen this alike (Jaccard of the structure) counts as the same kind when the exact
# signature was never seen (lesson 6: a similarity, checked per representation).
NEAR_SCREEN = 0.8
# An earlier instruction counts when it is at least this relevant (0.7 × intent-word
# similarity + 0.3 × the same numbers and names).
MIN_RELEVANCE = 0.35
# How many of the best-scored decisions are bound to the screen at each lookup.
BIND_TOP = 3
# A "strong" memory carries at least this share of the weight of every decision that fits.
STRONG_SHARE = 0.7


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


# --- entries and stores --------------------------------------------------------------


@dataclass
class Entry:
    """One remembered step (one row of the store)."""

    app: str
    signature: str  # Signature.key
    tokens: tuple[str, ...]
    fields: tuple[tuple[str, bool], ...]
    instruction: str
    action: ActionTemplate
    pre: dict[str, Any]
    polarity: int = CONFIRM
    source: str = "approve"
    task: str = ""
    created: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return {"app": self.app, "signature": self.signature, "tokens": list(self.tokens),
                "fields": [list(f) for f in self.fields], "instruction": self.instruction,
                "action": self.action.to_json(), "pre": self.pre, "polarity": self.polarity,
                "source": self.source, "task": self.task, "created": self.created}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Entry":
        if not isinstance(data, dict):
            raise ValueError("an entry must be an object")
        try:
            polarity = int(data.get("polarity", CONFIRM))
            if polarity not in (CONFIRM, CONTRADICT):
                raise ValueError("polarity must be 1 or -1")
            source = str(data.get("source", "import"))
            if source not in SOURCES:
                raise ValueError(f"unknown source {source!r}")
            return cls(
                app=str(data["app"]), signature=str(data["signature"]),
                tokens=tuple(str(t) for t in data.get("tokens", [])),
                fields=tuple((str(f[0]), bool(f[1])) for f in data.get("fields", [])),
                instruction=str(data["instruction"]),
                action=ActionTemplate.from_json(data["action"]),
                pre=dict(data.get("pre") or {}), polarity=polarity, source=source,
                task=str(data.get("task", "")), created=float(data.get("created", time.time())))
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            raise ValueError(f"malformed entry: {exc!r}") from None

    @property
    def screen(self) -> Signature:
        return Signature(frozenset(self.tokens), self.fields, self.signature)


@dataclass(frozen=True)
class Episode:
    """An earlier task a person verified, for a planner's prompt (D-PoT §5.5)."""

    app: str
    goal: str
    start: str  # the start screen, summarised
    actions: tuple[str, ...]  # the verified actions, in words

    def to_json(self) -> dict[str, Any]:
        return {"app": self.app, "goal": self.goal, "start": self.start,
                "actions": list(self.actions)}


class Store(Protocol):
    """Where entries live: :class:`MemoryStore` here, the database in production."""

    def add(self, entry: Entry) -> None: ...
    def candidates(self, app: str, signature: str) -> list[Entry]: ...
    def signatures(self, app: str) -> list[Signature]: ...
    def outcomes(self, kind: str) -> tuple[int, int]: ...
    def add_outcome(self, kind: str, right: bool) -> None: ...
    def add_episode(self, episode: Episode) -> None: ...
    def episodes(self, app: str | None = None) -> list[Episode]: ...


class MemoryStore:
    """Entries in a dict keyed by (app, signature): one installation's memory for
    ``evaluate --learn`` and the tests; ``export``/``load`` give the JSON format the
    admin pages use."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], list[Entry]] = {}
        self._signatures: dict[str, dict[str, Signature]] = {}
        self._outcomes: dict[str, list[int]] = {}
        self._episodes: list[Episode] = []

    def add(self, entry: Entry) -> None:
        self._entries.setdefault((entry.app, entry.signature), []).append(entry)
        self._signatures.setdefault(entry.app, {})[entry.signature] = entry.screen

    def candidates(self, app: str, signature: str) -> list[Entry]:
        return list(self._entries.get((app, signature), ()))

    def signatures(self, app: str) -> list[Signature]:
        return list(self._signatures.get(app, {}).values())

    def outcomes(self, kind: str) -> tuple[int, int]:
        right, wrong = self._outcomes.get(kind, [0, 0])
        return right, wrong

    def add_outcome(self, kind: str, right: bool) -> None:
        counts = self._outcomes.setdefault(kind, [0, 0])
        counts[0 if right else 1] += 1

    def add_episode(self, episode: Episode) -> None:
        self._episodes.append(episode)

    def episodes(self, app: str | None = None) -> list[Episode]:
        return [e for e in self._episodes if app is None or e.app == app]

    def entries(self) -> Iterable[Entry]:
        for bucket in self._entries.values():
            yield from bucket

    def forget(self, app: str) -> int:
        gone = [key for key in self._entries if key[0] == app]
        count = sum(len(self._entries.pop(key)) for key in gone)
        self._signatures.pop(app, None)
        self._episodes = [e for e in self._episodes if e.app != app]
        return count


# --- matching ------------------------------------------------------------------------


@dataclass
class Match:
    """One remembered decision that fits the current step, with its evidence."""

    template: ActionTemplate
    action: Action | None  # re-bound to this screen and instruction; None: could not bind
    confirmed: int
    contradicted: int
    screen_similarity: float
    intent_similarity: float
    score: float
    share: float  # of the positive weight of every fitting decision
    examples: list[str] = field(default_factory=list)  # instructions it was learned from

    @property
    def kind(self) -> str:
        """The kind of memory whose outcomes are pooled (LEARNING lesson 5). "agreed": on
        exactly this kind of screen, never corrected, clearly the decision that fits best
        (``STRONG_SHARE``), re-bound, for an instruction that shares words with one it was
        learned from. Anything else is "disputed": people disagreed, or it barely fits."""
        agreed = (self.action is not None and self.confirmed >= 1 and self.contradicted == 0
                  and self.screen_similarity >= 1.0 and self.share >= STRONG_SHARE
                  and self.intent_similarity >= 0.25)
        return "agreed" if agreed else "disputed"

    def evidence(self) -> dict[str, Any]:
        return {
            "memory_screen": round(self.screen_similarity, 4),
            "memory_intent": round(self.intent_similarity, 4),
            "memory_confirmed": self.confirmed,
            "memory_contradicted": self.contradicted,
            "memory_share": round(self.share, 4),
            "memory_slots": self.template.slots,
            "memory_bound": self.action is not None,
            "memory_kind": self.kind,
        }


@dataclass
class Lookup:
    app: str
    signature: Signature
    matches: list[Match]

    @property
    def best(self) -> Match | None:
        return self.matches[0] if self.matches else None

    def for_action(self, action: Action | None, nodes: list[UINode], instruction: str
                   ) -> Match | None:
        """The remembered decision that ``action`` (another backend's proposal) is."""
        if action is None:
            return None
        template = template_of(action, nodes, instruction)
        if template is None:
            return None
        key = template.key()
        for match in self.matches:
            if match.template.key() == key:
                return match
            if match.action is not None and match.action.same_as(action):
                return match
        return None


def lookup(store: Store, app: str, nodes: list[UINode], instruction: str,
           prev: str | None = None, done: Iterable[Action] = ()) -> Lookup:
    """Every remembered decision that fits this step, best first (see the module doc).

    ``prev``: :func:`step_key` of the step before (None: not checked); ``done``: actions
    already performed in this episode — a remembered tap is not proposed twice."""
    done = list(done)
    signature = screen_signature(nodes)
    screen_sim = 1.0
    # (entry, how its ids are renamed to this screen's): this kind of screen, and the same
    # kind of screen shown for another entity (ids differing in one segment throughout)
    entries: list[tuple[Entry, dict[str, str]]] = [
        (e, {}) for e in store.candidates(app, signature.key)]
    best_sig, best_sim, best_rename = None, 0.0, {}
    for other in store.signatures(app):
        if other.key == signature.key:
            continue
        sim, rename = aligned(signature, other)
        if rename and sim >= 1.0:
            entries.extend((e, dict(rename)) for e in store.candidates(app, other.key))
        elif sim > best_sim:
            best_sig, best_sim, best_rename = other, sim, dict(rename)
    if not entries:
        if best_sig is None or best_sim < NEAR_SCREEN:
            return Lookup(app, signature, [])
        entries = [(e, best_rename) for e in store.candidates(app, best_sig.key)]
        screen_sim = best_sim
    current_named = named_state(nodes, instruction)
    if prev is not None:
        prev = with_screen(prev, nodes, instruction)
    my_shape = shape(instruction)
    groups: dict[str, dict[str, Any]] = {}
    for entry, rename in entries:
        if entry.pre.get("named") != current_named:
            continue
        if prev is not None and not prev_matches(
                _renamed_key(str(entry.pre.get("prev", "")), rename), prev):
            continue
        intent = intent_similarity(entry.instruction, instruction)
        if intent == 0.0 and _opposite(entry.instruction, instruction):
            continue
        relevance = 0.7 * intent + 0.3 * (1.0 if shape(entry.instruction) == my_shape else 0.0)
        if relevance < MIN_RELEVANCE:
            continue
        template = entry.action.renamed(rename)
        key = template.key()
        group = groups.setdefault(key, {"template": template, "plus": 0.0, "minus": 0.0,
                                        "confirmed": set(), "contradicted": set(),
                                        "intent": 0.0, "examples": [], "entries": []})
        ref = entry.task or f"{entry.instruction}@{entry.created}"
        if entry.polarity == CONFIRM:
            group["plus"] += relevance
            group["confirmed"].add(ref)
            group["intent"] = max(group["intent"], intent)
            if entry.instruction not in group["examples"]:
                group["examples"].append(entry.instruction)
            group["entries"].append(entry)
        else:
            group["minus"] += relevance
            group["contradicted"].add(ref)
    total = sum(max(0.0, g["plus"] - g["minus"]) for g in groups.values())
    matches: list[Match] = []
    ranked = sorted(groups.values(), key=lambda g: (g["plus"] - g["minus"], len(g["confirmed"])),
                    reverse=True)
    for rank, group in enumerate(ranked):
        template: ActionTemplate = group["template"]
        # Only the leading decisions are bound to this screen (binding reads the whole
        # tree); the others are listed with what people did, unbound.
        action = bind(template, nodes, instruction) if rank < BIND_TOP else None
        if action is not None and template.locator is not None:
            # the switch the person tapped was off (on): it must be off (on) again
            node = resolve(template.locator, nodes, instruction)
            wanted = next((e.pre.get("target_checked") for e in group["entries"]
                           if "target_checked" in e.pre), None)
            if node is not None and wanted is not None and node.checked != wanted:
                action = None
            if node is not None and not template.locator.named and _names_another(
                    node, nodes, instruction):
                # a remembered choice among options ("EU 42", "Cycling") is not replayed
                # where this instruction names another of them
                action = None
        if action is not None and action.type in POINT_TYPES and any(
                action.same_as(earlier) for earlier in done):
            continue  # tapped already in this episode: a replay would undo or repeat it
        score = group["plus"] - group["minus"]
        matches.append(Match(
            template=template, action=action, confirmed=len(group["confirmed"]),
            contradicted=len(group["contradicted"]), screen_similarity=screen_sim,
            intent_similarity=group["intent"], score=score,
            share=(max(0.0, score) / total) if total > 0 else 0.0,
            examples=group["examples"][:3]))
    matches.sort(key=lambda m: (m.score, m.confirmed), reverse=True)
    return Lookup(app, signature, matches)


def _opposite(a: str, b: str) -> bool:
    from agents.brain.experience.slots import direction

    da, db = direction(a), direction(b)
    return da is not None and db is not None and da != db


# --- learning ------------------------------------------------------------------------


def remember(store: Store, *, app: str, nodes: list[UINode], instruction: str,
             action: Action, polarity: int, source: str, task: str = "",
             prev: str = "") -> Entry | None:
    """Store one step a person decided (``polarity`` +1) or corrected (−1); ``prev``:
    :func:`step_key` of the step before it in its episode."""
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}")
    template = template_of(action, nodes, instruction)
    if template is None:
        return None
    signature = screen_signature(nodes)
    entry = Entry(app=app, signature=signature.key, tokens=tuple(sorted(signature.tokens)),
                  fields=signature.fields, instruction=instruction, action=template,
                  pre={**precondition(template, nodes, instruction),
                       "prev": with_screen(prev, nodes, instruction)},
                  polarity=polarity,
                  source=source, task=task)
    store.add(entry)
    return entry


def screen_summary(nodes: list[UINode], limit: int = 8) -> str:
    """A start screen in a few words: its title and controls (for a planner's prompt)."""
    seen: list[str] = []
    for node in nodes:
        if node.package == "com.android.systemui":
            continue
        label = node.text or node.content_desc
        if not label or not (node.clickable or "title" in node.resource_id):
            continue
        if label not in seen:
            seen.append(label)
        if len(seen) >= limit:
            break
    return ", ".join(seen)


def similar_episodes(store: Store, instruction: str, app: str | None, k: int = 3
                     ) -> list[Episode]:
    """The ``k`` verified episodes whose goals are most like ``instruction`` (D-PoT
    §5.5: the planner sees earlier goals *and their executed actions*)."""
    scored = [(intent_similarity(e.goal, instruction), i, e)
              for i, e in enumerate(store.episodes(app))]
    scored = [s for s in scored if s[0] > 0]
    scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
    return [e for _, _, e in scored[:k]]


__all__ = [
    "ActionTemplate", "CONFIRM", "CONTRADICT", "Entry", "Episode", "Locator", "Lookup",
    "Match", "MemoryStore", "SOURCES", "Store", "bind", "locate", "lookup", "named_state",
    "pick_group", "remember", "resolve", "screen_summary", "similar_episodes", "step_key",
    "template_of",
]
