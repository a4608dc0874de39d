"""Reading the screen: what is on it, what covers it, which choices it holds.

:func:`read_screen` turns one observation into a :class:`ScreenView` — the elements worth
acting on, the text fields, the lists that scroll, the radio groups with their titles,
and whatever covers the screen (a dialog, a permission prompt, an error or a loading
screen). The small predicates after it say what a single element is to the rules (a way
out of the screen, an empty field, the words a person calls it by).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from agents.brain.backends.base import StepContext
from agents.brain.elements import is_candidate, is_editable, row_label
from agents.brain.recommend import NodeScore
from devices.uitree import UINode, descendants, is_dialog_root


# Screen words that mean "something is in the way", not part of any task's content.
DISMISS_WORDS = ("close", "dismiss", "not now", "no thanks", "skip", "later", "cancel", "got it", "x")


RETRY_WORDS = ("retry", "try again", "reload", "refresh")
_ERROR_RE = re.compile(
    r"\b(error|failed|failure|no (?:internet|connection|network)|offline|went wrong|"
    r"unable to|couldn'?t|can'?t connect|timed out|session expired|signed out|logged out)\b",
    re.I,
)
_LOADING_RE = re.compile(r"\b(loading|please wait|connecting|processing)\b", re.I)
SUCCESS_RE = re.compile(
    r"\b(placed|sent|saved|paid|purchased|success(?:ful(?:ly)?)?|confirmed|thank you|"
    r"added to (?:the |your )?cart|(?:now )?in your cart|(?:is )?on (?:its|the) way|booked|"
    r"navigating|done)\b",
    re.I,
)
_PERMISSION_RE = re.compile(r"\b(allow|permission|access to)\b", re.I)


_NAV_DESCS = frozenset({"navigate up", "back", "home", "more options"})


@dataclass
class ChoiceGroup:
    title: str
    options: list[UINode]
    container: UINode | None = None

    @property
    def checked(self) -> UINode | None:
        return next((o for o in self.options if o.checked), None)

    def labels(self, nodes: list[UINode]) -> list[str]:
        return [option.label or row_label(option, nodes) for option in self.options]


@dataclass
class ScreenView:
    nodes: list[UINode]
    package: str
    width: int
    height: int
    candidates: list[UINode] = field(default_factory=list)
    overlay: list[UINode] = field(default_factory=list)  # nodes inside a dialog/pop-up
    overlay_kind: str = ""  # "dialog" | "permission" | "error" | "loading" | ""
    groups: list[ChoiceGroup] = field(default_factory=list)
    editables: list[UINode] = field(default_factory=list)
    scrollables: list[UINode] = field(default_factory=list)
    launcher: bool = False
    # The − / + buttons of steppers that already show the number the goal wants: not
    # to be tapped again on the way to the form's button (``forms.stepper``).
    settled: set[str] = field(default_factory=set)
    # The one button that puts a stepper we just set through ("Pay" after "20 bucks").
    stepper_done: UINode | None = None

    @property
    def text(self) -> str:
        return " ".join(n.text for n in self.nodes if n.text)

    @property
    def focused_editable(self) -> UINode | None:
        return next((n for n in self.editables if n.focused), None)


def read_screen(ctx: StepContext) -> ScreenView:
    obs = ctx.observation
    nodes = list(obs.nodes)
    view = ScreenView(nodes=nodes, package=obs.app or "", width=obs.width, height=obs.height)
    view.candidates = [n for n in nodes if is_candidate(n)]
    view.editables = [n for n in nodes if is_editable(n) and n.enabled]
    view.scrollables = [n for n in nodes if n.scrollable]
    view.launcher = "launcher" in view.package.lower() or view.package.lower().endswith(".home")

    roots = [n for n in nodes if is_dialog_root(n)]
    if roots:
        root = roots[0]
        view.overlay = [root] + descendants(root, nodes)
        words = " ".join(n.text + " " + n.content_desc for n in view.overlay) + " " + root.resource_id
        if _PERMISSION_RE.search(words) or "permission" in words.lower():
            view.overlay_kind = "permission"
        elif _ERROR_RE.search(words):
            view.overlay_kind = "error"
        else:
            view.overlay_kind = "dialog"
    else:
        visible = view.text
        if any("ProgressBar" in n.cls for n in nodes) or (
            _LOADING_RE.search(visible) and len(view.candidates) <= 4
        ):
            view.overlay_kind = "loading"
        elif _ERROR_RE.search(visible) and any(
            any(w in n.label.lower() for w in RETRY_WORDS) for n in nodes
        ):
            view.overlay_kind = "error"

    view.groups = _choice_groups(nodes)
    return view


def _choice_groups(nodes: list[UINode]) -> list[ChoiceGroup]:
    """RadioGroups (and sets of sibling RadioButtons) with their title."""
    by_index = {n.index: n for n in nodes}
    groups: list[ChoiceGroup] = []
    seen: set[int] = set()
    for node in nodes:
        if node.short_class == "RadioGroup" or node.extra.get("role") == "radiogroup":
            options = [
                n for n in descendants(node, nodes)
                if n.checkable and ("Radio" in n.cls or n.extra.get("role") == "radio")
            ]
            if options:
                seen.update(o.index for o in options)
                groups.append(ChoiceGroup(_group_title(node, nodes), options, node))
    loose: dict[int | None, list[UINode]] = {}
    for node in nodes:
        if node.index in seen or not node.checkable or "RadioButton" not in node.cls:
            continue
        loose.setdefault(node.parent, []).append(node)
    for parent, options in loose.items():
        if len(options) >= 2:
            container = by_index.get(parent) if parent is not None else None
            groups.append(ChoiceGroup(
                _group_title(container, nodes) if container else "", options, container
            ))
    return groups


def _group_title(group: UINode, nodes: list[UINode]) -> str:
    for text in (group.content_desc, group.text):
        if text:
            return text
    # The nearest text above the group, as a form shows a field's caption.
    top = group.bounds[1]
    above = [
        n for n in nodes
        if n.text and not n.checkable and n.bounds[3] <= top + 4 and top - n.bounds[3] < 200
        and n.index not in {d.index for d in descendants(group, nodes)}
    ]
    if above:
        above.sort(key=lambda n: top - n.bounds[3])
        return above[0].text
    if group.resource_id:
        return group.resource_id.rsplit("/", 1)[-1].replace("_", " ")
    return ""


def is_system_nav(node: UINode) -> bool:
    """Back, Home and the toolbar's up arrow: ways out of a screen, never a task's target."""
    return "systemui" in node.package or (node.content_desc or "").strip().lower() in _NAV_DESCS


def field_is_empty(node: UINode) -> bool:
    # uiautomator shows an empty EditText's hint as its text.
    hint = node.extra.get("hint")
    return not node.text.strip() or (isinstance(hint, str) and node.text == hint)


def node_label_text(node: UINode) -> str:
    hint = node.extra.get("hint")
    return " ".join(p for p in (node.text, node.content_desc, node.resource_id.rsplit("/", 1)[-1],
                                hint if isinstance(hint, str) else "") if p)


def display_label(node: UINode, nodes: list[UINode]) -> str:
    """What a person calls the node: its text, else its row's caption, else its id."""
    return node.text or node.content_desc or row_label(node, nodes) or node.label


def related(a: UINode, b: UINode, nodes: list[UINode]) -> bool:
    """Same on-screen target: one contains the other's centre (a row and its label)."""
    return a.contains(*b.center) or b.contains(*a.center)


def distinct(ranked: list[NodeScore], nodes: list[UINode]) -> list[NodeScore]:
    """Drop scores of nodes that are the same target as a better one (row vs its text)."""
    out: list[NodeScore] = []
    for score in ranked:
        if any(related(score.node, kept.node, nodes) for kept in out):
            continue
        out.append(score)
    return out


def list_of_kind(view: ScreenView, *, checkable: bool) -> bool:
    """A scrollable list with several entries of the kind sought (switches for a toggle,
    clickable rows otherwise): the target is plausibly further down it."""
    for lst in view.scrollables:
        inside = [n for n in view.nodes if n.parent == lst.index]
        kind = [n for n in inside if (n.checkable or any(
            c.checkable for c in view.nodes if c.parent == n.index)) == checkable and (
            n.clickable or n.checkable)]
        if len(kind) >= 3:
            return True
    return False


def success_text(view: ScreenView) -> str:
    """A confirmation the screen states in plain text ("Order placed", "Thank you!").

    Buttons are not read: a "Done" button says nothing about what happened.
    """
    lists = [n for n in view.nodes if n.scrollable or "RecyclerView" in n.cls or "ListView" in n.cls]
    for node in view.nodes:
        if node.clickable or is_editable(node) or not node.text:
            continue
        if any(lst.contains(*node.center) for lst in lists):
            continue  # a message or item in a list, not the screen's own statement
        match = SUCCESS_RE.search(node.text)
        if match:
            return match.group(0)
    return ""


def plain(label: str) -> str:
    """A label's words, lower-cased, without the synonyms of ``tokens`` ("Pay" is not
    "Checkout" here: they are two steps of the funnel)."""
    return " ".join(re.findall(r"[a-z0-9]+", label.lower()))
