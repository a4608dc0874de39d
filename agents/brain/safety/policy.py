"""Which taps commit a harm a person must approve, recognised from the screen.

Pure Python (no Django). The guard in :func:`agents.brain.loop.decide` asks a person before any
tap this policy flags, whatever the agent's confidence and whatever γ — OS-Kairos's gate
(§4.2) decides *whether the agent is right*; this decides *whether being right is
enough*. The classes of harm (money, destruction, security, communication, account and
membership changes) come from a data file, ``default_policy.yaml`` beside this module,
which an admin replaces or extends with ``KAIROS_SENSITIVE_POLICY`` (docs/safety.md).

What is read, all from what the phone shows (never from the app's internals, so the
same rules hold on apps nobody listed):

* the tapped control's label (text, else content description): "Delete", "Disarm";
* a verb on the control with an object on the control, its screen title or its dialog:
  "Open" on the "Garage door" screen;
* a control that shows a protected state — a tile "Front door: Locked" is tapped to
  unlock; a control that names a price ("Get 100 GB for $1.99/month");
* a switch that is on and protects something ("Recording", "Tamper alerts"): switching
  it off lowers protection;
* inside a dialog, the button that goes ahead when the dialog names a harm ("Remove Sam
  Rivera?"), is the app's own "are you sure?" ("This can't be undone"), or asks a question
  the button repeats ("Empty bin?" → "Empty bin").
"""
from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

import yaml

from devices.uitree import UINode, descendants, is_dialog_root

DEFAULT_POLICY_FILE = Path(__file__).resolve().parent / "default_policy.yaml"
POLICY_ENV = "KAIROS_SENSITIVE_POLICY"
CONFIRMATION = "confirmation"  # the class reported for a bare "are you sure?"

_CLASS_KEYS = {"actions", "verbs", "objects", "protected_states", "protections",
               "protective_verbs", "amount_fields", "exposures"}
_TOP_KEYS = {"classes", "confirmations", "dismissals", "go_aheads"}


class PolicyError(ValueError):
    """A policy file that cannot be used; the message names the file and the place."""


def _norm(text: str) -> str:
    """Lower-case words separated by single spaces, padded, for whole-word matching."""
    text = text.lower().replace("\u2019", "'")
    return " " + " ".join(re.findall(r"[a-z0-9']+", text)) + " "


def _find(phrases: Iterable[str], text: str) -> str | None:
    """The first phrase that occurs in ``text`` (already normalised) as whole words."""
    for phrase in phrases:
        if _norm(phrase) in text:
            return phrase
    return None


@dataclass(frozen=True)
class HarmClass:
    name: str
    actions: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    objects: tuple[str, ...] = ()
    protected_states: tuple[str, ...] = ()
    protections: tuple[str, ...] = ()
    protective_verbs: tuple[str, ...] = ()
    amount_fields: tuple[str, ...] = ()
    exposures: tuple[str, ...] = ()


@dataclass(frozen=True)
class Harm:
    """Why a tap is sensitive: the class of harm and what on the screen said so."""

    kind: str  # a class name, or "confirmation"
    evidence: str  # the phrase found
    where: str  # "label" | "label+screen" | "state" | "switch" | "dialog" | "question" …

    def describe(self, label: str) -> str:
        if self.where == "state":
            return f"'{label}' shows a protected state ({self.evidence}); tapping it leaves it"
        if self.where == "exposure":
            return f"switching '{label}' on opens something to others ({self.evidence})"
        if self.where == "switch":
            return f"switching '{label}' off lowers protection ({self.kind})"
        if self.where == "undo":
            return f"'{label}' undoes a protection ({self.evidence})"
        if self.where == "choice":
            return f"'{label}' commits a selected option with a price ({self.evidence})"
        if self.where == "price":
            return f"'{label}' names a price ({self.evidence})"
        if self.where == "form":
            return f"'{label}' submits a form with an {self.evidence} ({self.kind})"
        if self.where == "question":
            return f"'{label}' answers yes to the app's own question '{self.evidence}'"
        if self.where == "dialog":
            what = "the app asks to confirm" if self.kind == CONFIRMATION else f"a {self.kind} change"
            return f"'{label}' goes ahead in a dialog that says '{self.evidence}' ({what})"
        return f"'{label}' is a {self.kind} action ({self.evidence})"


@dataclass(frozen=True)
class SensitivePolicy:
    classes: tuple[HarmClass, ...]
    confirmations: tuple[str, ...] = ()
    dismissals: tuple[str, ...] = ()
    source: str = "default"
    go_aheads: tuple[str, ...] = ()

    @cached_property
    def _go_ahead_labels(self) -> frozenset[str]:
        """``go_aheads`` as normalised labels (read on every step the gate decides)."""
        return frozenset(_norm(phrase) for phrase in self.go_aheads)

    def assess(self, target: UINode | None, nodes: list[UINode]) -> Harm | None:
        """The harm a tap on ``target`` commits on this screen, or None."""
        if target is None or "EditText" in target.cls:
            return None  # nothing tapped, or a text field: focusing it changes nothing
        raw_label = _label_of(target, nodes)
        label = _norm(raw_label)
        dialog = _dialog_of(target, nodes)
        context = _norm(" ".join(
            f"{n.text} {n.content_desc}" for n in (dialog or []) if n is not target)
            if dialog is not None else _screen_title(nodes))
        for harm in self.classes:
            found = _find(harm.actions, label)
            if found:
                return Harm(harm.name, found, "label")
        for harm in self.classes:
            verb = _find(harm.verbs, label)
            if verb:
                obj = _find(harm.objects, label) or _find(harm.objects, context)
                if obj:
                    return Harm(harm.name, f"{verb} {obj}", "label+screen")
        price = _PRICE_RE.search(raw_label) if not target.checkable else None
        if price:  # (a radio option or filter with a price only selects)
            return Harm("money", price.group(0), "price")
        for harm in self.classes:
            undone = _undoes(harm.protective_verbs, label)
            if undone:
                return Harm(harm.name, undone, "undo")
        for harm in self.classes:
            state = _find(harm.protected_states, label)
            if state and target.clickable and not target.checkable:
                return Harm(harm.name, state, "state")
        if target.checkable:
            # the switch's own label and its row's title and summary; switching off lowers
            # a protection, switching on may open something to others
            switch_label = _norm(f"{label} {_row_texts(target, nodes)}")
            where = "switch" if target.checked else "exposure"
            for harm in self.classes:
                found = _find(harm.protections if target.checked else harm.exposures,
                              switch_label)
                if found:
                    return Harm(harm.name, found, where)
        if dialog is None and "Button" in target.cls and not target.checkable:
            hints = _norm(" ".join(f"{n.text} {n.content_desc} {n.extra.get('hint', '')}"
                                   for n in nodes if "EditText" in n.cls))
            for harm in self.classes:
                found = _find(harm.amount_fields, hints)
                if found:
                    return Harm(harm.name, found, "form")
        if dialog is None and target.cls.rsplit(".", 1)[-1] == "Button" \
                and not target.checkable and not _is_dismissal(label, self.dismissals):
            # The button that commits a choice with a price on it ("Confirm ride" under a
            # selected "Comfort · $24.50", "Submit" under a "$2" tip): the spend is on
            # the option, not on the button.
            priced = _priced_choice(nodes)
            if priced:
                return Harm("money", priced, "choice")
        if dialog is None and target.clickable and not target.checkable and (
                label.split()[:1] == ["yes"] or label in self._go_ahead_labels):
            # A page that is itself the app's question ("Is this you signing in?" → "Yes,
            # it's me"): the answer is the user's, as in a dialog.
            asked = _questions([n for n in nodes if not n.clickable], target)
            if asked:
                return Harm(CONFIRMATION, asked[0], "question")
        if dialog is not None and not _is_dismissal(label, self.dismissals, dialog, target):
            for harm in self.classes:
                found = _find(harm.actions, context)
                if found:
                    return Harm(harm.name, found, "dialog")
                verb = _find(harm.verbs, context)
                if verb and _find(harm.objects, context):
                    return Harm(harm.name, verb, "dialog")
            # "Update your booking? … charges €25 a night": the spend is in the question.
            price = _PRICE_RE.search(" ".join(
                f"{n.text} {n.content_desc}" for n in dialog if n is not target))
            if price:
                return Harm("money", price.group(0), "dialog")
            found = _find(self.confirmations, context)
            if found:
                return Harm(CONFIRMATION, found, "dialog")
            echoed = _echoes_question(label, dialog, target)
            if echoed:
                return Harm(CONFIRMATION, echoed, "dialog")
            if label in self._go_ahead_labels or (_few_answers(dialog) and not target.checkable):
                # "Turn off lost mode?" → "Confirm", "Switch deliveries to Thursdays?" →
                # "Change day": no word of harm, but the app itself stopped to ask; the
                # button that goes ahead answers its question for the user. (A dialog of
                # many buttons is a picker, and an option inside one only selects.)
                asked = _question_of(dialog, target)
                if asked:
                    return Harm(CONFIRMATION, asked, "dialog")
        return None


# A price on the control itself ("Get 100 GB for $1.99/month", "Pay €5", "Buy 2,000 coins
# for 4.99 USD"): whatever the verb, tapping it spends money.
_PRICE_RE = re.compile(
    r"[$€£¥₹]\s?\d[\d,.]*|\d[\d,.]*\s?(?:usd|eur|gbp|jpy|inr|dollars?|euros?|pounds?)\b"
    r"|\d[\d,.]*\s?/\s?(?:month|mo|year|yr|week)\b", re.IGNORECASE)


def _echoes_question(label: str, dialog: list[UINode], target: UINode) -> str | None:
    """A dialog that asks a question ("Empty bin?", "Allow access?") and whose go-ahead
    button repeats a word of it ("Empty bin") is the app asking to confirm an action:
    going ahead is the user's decision to make. Returns the question."""
    if "permissioncontroller" in dialog[0].package:
        return None  # the system's permission prompt: a privacy choice, not an action
    # "Allow" in an app's own location prompt echoes its question too, but a permission
    # prompt is a privacy choice the backends already send to a person, not an action.
    words = set(label.split()) - {"yes", "ok", "the", "a", "to", "it", "allow", "deny"}
    return next((question for question in _questions(dialog, target)
                 if words & set(_norm(question).split())), None)


def _few_answers(dialog: list[UINode]) -> bool:
    """Two or three buttons: the answers to a question ("Change day" / "Back"), not a
    list of options to pick from."""
    return 2 <= sum(1 for node in dialog if node.clickable and not node.checkable) <= 3


def _questions(nodes: list[UINode], target: UINode | None) -> list[str]:
    """The questions among ``nodes`` — texts ending with "?" — other than ``target``'s."""
    return [node.text.strip() for node in nodes
            if node is not target and node.text.strip().endswith("?")]


# An app asking for a permission of the phone ("Allow Maps to access this device's
# location?"): the same privacy choice as the system's prompt, not someone else let in.
_PERMISSION_RE = re.compile(
    r"\b(?:this device|your device|location|camera|microphone|notifications|contacts"
    r"|photos and media|storage|nearby devices)\b", re.IGNORECASE)


def _question_of(dialog: list[UINode], target: UINode) -> str | None:
    """The question an app's own dialog asks ("Turn off lost mode?"), or None (none, or a
    permission prompt — the system's or the app's own —, a privacy choice the backends
    already send on)."""
    if "permissioncontroller" in dialog[0].package:
        return None
    question = next(iter(_questions(dialog, target)), None)
    if question and question.lower().startswith("allow ") and _PERMISSION_RE.search(question):
        return None
    return question


def _is_dismissal(label: str, dismissals: Iterable[str], dialog: list[UINode] | None = None,
                  target: UINode | None = None) -> bool:
    """"Cancel", "Keep account", "No thanks" — but not "Yes, close it", nor "Cancel ride"
    in a dialog that asks "Cancel ride?": a button that repeats the dialog's question is
    the go-ahead, whatever its first word. So is "Cancel booking" under "Cancel Reformer
    Pilates?" (the question's own verb) or beside a plain "Keep it" (the way out is the
    other button)."""
    for phrase in dismissals:
        norm = _norm(phrase)
        if label == norm:
            return True
        if label.startswith(norm):
            return not (dialog and (_repeats_question(label, dialog, target)
                                    or _asks_its_verb(label, dialog, target)
                                    or _other_way_out(dialog, target, dismissals)))
    return False


def _asks_its_verb(label: str, dialog: list[UINode], target: UINode | None) -> bool:
    """The dialog's question starts with the button's first word: "Cancel booking" under
    "Cancel Reformer Pilates?" does what the question asks."""
    first = label.split()[:1]
    return bool(first) and any(
        _norm(question).split()[:1] == first for question in _questions(dialog, target))


# First words of a button that leaves things as they are ("Keep autopay", "Stay signed in",
# "No, go back"): beside one, a go-ahead that starts like a dismissal ("Cancel autopay",
# "Close line and get PIN") is the action, not the way out.
_STATUS_QUO = tuple(_norm(word) for word in ("keep", "stay", "no", "not now", "never mind",
                                             "go back"))


def _other_way_out(dialog: list[UINode], target: UINode | None,
                   dismissals: Iterable[str]) -> bool:
    """Another button of the dialog is a plain dismissal ("Keep it", "Not now") or keeps
    what the question is about ("Keep autopay" beside "Cancel autopay")."""
    plain = {_norm(phrase) for phrase in dismissals}
    for node in dialog:
        if node is target or not node.clickable:
            continue
        label = _norm(f"{node.text} {node.content_desc}")
        if label in plain or label.startswith(_STATUS_QUO):
            return True
    return False


# Words a question adds around the action it names ("Cancel *this* refill?").
_FILLER = frozenset("this that the a an your my these those it".split())


def _repeats_question(label: str, dialog: list[UINode], target: UINode | None) -> bool:
    """The button's words are the question's: "Cancel ride" under "Cancel ride?", and
    "Cancel refill" under "Cancel this refill?"."""
    words = set(label.split()) - _FILLER
    return bool(words) and any(
        words <= set(_norm(question).split()) for question in _questions(dialog, target))


def _priced_choice(nodes: list[UINode]) -> str | None:
    """The price shown on a selected option of the screen (its text, or a summary line
    inside it), or None."""
    for node in nodes:
        if node.checkable and node.checked:
            texts = [node.text, node.content_desc] + [n.text for n in descendants(node, nodes)]
            price = _PRICE_RE.search(" ".join(t for t in texts if t))
            if price:
                return price.group(0)
    return None


def _label_of(target: UINode, nodes: list[UINode]) -> str:
    """What the tapped control says: its own text and description, else (a list row, a
    card) the first text inside it, its title."""
    own = f"{target.text} {target.content_desc}".strip()
    if own:
        return own
    inner = next((n.text for n in descendants(target, nodes) if n.text), "")
    return inner


def _dialog_of(target: UINode, nodes: list[UINode]) -> list[UINode] | None:
    """The nodes of the dialog holding ``target`` (root first), or None."""
    by_index = {n.index: n for n in nodes}
    node: UINode | None = target
    while node is not None:
        if is_dialog_root(node):
            return [node] + descendants(node, nodes)
        node = by_index.get(node.parent) if node.parent is not None else None
    return None


def _screen_title(nodes: list[UINode]) -> str:
    return " ".join(n.text for n in nodes
                    if n.resource_id.endswith(("/toolbar_title", "/action_bar_title", "/title"))
                    and n.parent is not None)


def _row_texts(target: UINode, nodes: list[UINode]) -> str:
    """The texts beside a switch in its row (Android preference rows: title, summary)."""
    return " ".join(n.text for n in nodes
                    if n.parent == target.parent and n is not target and n.text
                    and target.parent is not None and not _is_screen_root(target.parent, nodes))


def _is_screen_root(index: int, nodes: list[UINode]) -> bool:
    node = next((n for n in nodes if n.index == index), None)
    return node is None or node.parent is None


def _undoes(verbs: Iterable[str], label: str) -> str | None:
    """A word that undoes a protective verb: un-lock, un-freeze, dis-arm, un-block."""
    for word in label.split():
        for prefix in ("un", "dis", "de"):
            if word.startswith(prefix) and word[len(prefix):] in verbs:
                return word
    return None


# --- loading --------------------------------------------------------------------------


def _phrases(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise PolicyError(f"{where}: expected a list of phrases")
    return tuple(v.strip() for v in value)


def _parse(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise PolicyError(f"{where}: expected a mapping with {', '.join(sorted(_TOP_KEYS))}")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise PolicyError(f"{where}: unknown key '{sorted(unknown)[0]}'; expected "
                          f"{', '.join(sorted(_TOP_KEYS))}")
    out: dict[str, Any] = {}
    classes = data.get("classes")
    if classes is not None:
        if not isinstance(classes, dict):
            raise PolicyError(f"{where}: classes: expected a mapping of class names")
        parsed: dict[str, HarmClass | None] = {}
        for name, spec in classes.items():
            if spec is None:
                parsed[str(name)] = None  # removes a default class
                continue
            if not isinstance(spec, dict):
                raise PolicyError(f"{where}: classes.{name}: expected a mapping")
            bad = set(spec) - _CLASS_KEYS
            if bad:
                raise PolicyError(f"{where}: classes.{name}: unknown key '{sorted(bad)[0]}'; "
                                  f"expected {', '.join(sorted(_CLASS_KEYS))}")
            parsed[str(name)] = HarmClass(str(name), **{
                key: _phrases(spec.get(key), f"{where}: classes.{name}.{key}")
                for key in _CLASS_KEYS})
        out["classes"] = parsed
    for key in ("confirmations", "dismissals", "go_aheads"):
        if key in data:
            out[key] = _phrases(data[key], f"{where}: {key}")
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read the sensitive-action policy ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError(f"{path}: not valid YAML or JSON: {exc}") from None
    return _parse(data, str(path))


def load_policy(path: str | Path | None = None) -> SensitivePolicy:
    """The default policy, with the file at ``path`` (if any) laid over it: its classes
    replace the default's of the same name (``null`` removes one), its lists replace
    the default's. Raises :class:`PolicyError`."""
    base = _read(DEFAULT_POLICY_FILE)
    classes: dict[str, HarmClass | None] = dict(base["classes"])
    confirmations, dismissals = base["confirmations"], base["dismissals"]
    go_aheads = base.get("go_aheads", ())
    source = "default"
    if path:
        extra = _read(Path(path))
        classes.update(extra.get("classes", {}))
        confirmations = extra.get("confirmations", confirmations)
        dismissals = extra.get("dismissals", dismissals)
        go_aheads = extra.get("go_aheads", go_aheads)
        source = str(path)
    return SensitivePolicy(tuple(c for c in classes.values() if c is not None),
                           tuple(confirmations), tuple(dismissals), source, tuple(go_aheads))


_CURRENT: SensitivePolicy | None = None
_CURRENT_PATH: str | None = None
_LOCK = threading.Lock()


def current_policy() -> SensitivePolicy:
    """The installation's policy: ``KAIROS_SENSITIVE_POLICY`` over the default, read once
    per process (evaluation's worker processes inherit the variable, so they agree)."""
    global _CURRENT, _CURRENT_PATH
    path = os.environ.get(POLICY_ENV) or None
    with _LOCK:
        if _CURRENT is None or path != _CURRENT_PATH:
            _CURRENT, _CURRENT_PATH = load_policy(path), path
        return _CURRENT


__all__ = [
    "CONFIRMATION", "DEFAULT_POLICY_FILE", "Harm", "HarmClass", "POLICY_ENV", "PolicyError",
    "SensitivePolicy", "current_policy", "load_policy",
]
