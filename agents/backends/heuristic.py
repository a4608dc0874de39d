"""The offline baseline backend: rules over the UI tree, with an evidence-based confidence.

Pure Python (no Django). Used whenever no model endpoint is configured. It sees only the
:class:`StepContext` — instruction, clarification answers, the current screen's UI nodes,
the compact history, the installed apps — never a task id, a gold path or the oracle.

One step (docs/heuristic.md has the user-facing account):

1. plan — split the instruction into sub-goals (D-PoT), parse each into an intent
   (open an app, set a toggle, type text, pick an option, click something);
2. look — blocking overlays (pop-ups, permission prompts, error and loading screens),
   open choices (a RadioGroup none of whose options the goal names → ask the user,
   RecAgent §3.6 / App. D), which sub-goals are already visibly done;
3. act on the first unfinished sub-goal: the right app first, then the element the
   recommendation ranks best (RecAgent §3.3), toggles only when their state differs from
   the goal's (StaR Fig. 12), text typed into a focused field, scrolling when the target
   is off-screen;
4. confidence 1–5 from the evidence: how strongly the element matches and by what margin
   over the runner-up, capped low when something unexpected covers the screen.

The product asks a person below γ (default 4), so 4–5 are reserved for steps the rules
have direct evidence for (OS-Kairos §4.2, Eq. 4).
"""
from __future__ import annotations

import re
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any

from agents.backends.base import (
    Clarification, HistoryEntry, Proposal, StepContext, clamp_confidence,
)
from agents.backends.evidence import app_mention, context_evidence
from agents.backends.steppers import find_steppers, stepper_move, stepper_target
from agents.planning import split_goal, without_politeness
from agents.recommend import (
    NodeScore, is_candidate, is_editable, is_tappable, node_label, normalise_text, owner_of, recommend,
    row_label, score_nodes, tokens,
)
from agents.safety import current_policy
from devices.actions import (
    CLICK, COMPLETE, IMPOSSIBLE, OPENAPP, PRESS_BACK, PRESS_ENTER, PRESS_HOME, SCROLL, TYPE,
    WAIT, Action,
)
from devices.protocol import AppInfo
from devices.uitree import UINode, descendants, is_dialog_root, node_at

__all__ = ["HeuristicBackend", "Intent", "parse_intent", "extract_text", "match_confidence"]

# --- reading the instruction -------------------------------------------------------

_TURN = r"(?:t(?:ur|ru)n|switch|toggle|set|put)"
_TOGGLE_PATTERNS: tuple[tuple[re.Pattern[str], int, int], ...] = (
    # (pattern, group of the on/off word, group of the target)
    (re.compile(rf"\b{_TURN}\s+(on|off|of)\s+(?:the\s+)?(.+)", re.I), 1, 2),  # "turn of": a typo
    (re.compile(rf"\b(?!put\b){_TURN}\s+(?:the\s+)?(.+?)\s+(on|off)\b", re.I), 2, 1),
    # "put the wifi on", but "put 20 bucks on mila's lunch card" puts an amount somewhere
    # and "put him on her pickup list" a person on a list
    (re.compile(r"\bput\s+(?:the\s+)?(?!\$\d|\d[\d.,]*\s*(?:k|bucks|dollars|usd|gb|gigs|mb|"
                r"minutes|mins|hours|hrs|%|percent|points|credits)\b)(.+?)\s+(on|off)\b"
                r"(?!\s+(?:my|his|her|their|our|your|the|a|an|this|that|\w+'s)\b)", re.I), 2, 1),
    (re.compile(r"\b(enable|activate|disable|deactivate|unmute|mute)\s+(?:the\s+)?(.+)", re.I), 1, 2),
    # "check out" is paying, not ticking a box.
    (re.compile(r"\b(check|uncheck|tick|untick)\s+(?!out\b)(?:the\s+)?(.+)", re.I), 1, 2),
)
_ON_WORDS = {"on", "enable", "activate", "check", "tick", "mute"}
# Toggles asked for without an on/off word: (pattern, the state wanted, target group).
_PHONE = r"(?:my\s+|the\s+)?(?:phone|device|mobile|cell)"
_STATE_TOGGLES: tuple[tuple[re.Pattern[str], bool, int], ...] = (
    # "put my phone in aeroplane mode", "set the phone to silent mode"
    (re.compile(rf"\b(?:put|set|switch|turn)\s+{_PHONE}\s+(?:in|into|on|to)\s+(?:the\s+)?(.+)", re.I), True, 1),
    # "take the phone off flight mode", "get out of airplane mode"
    (re.compile(rf"\btake\s+{_PHONE}\s+(?:off|out\s+of)\s+(?:the\s+)?(.+)", re.I), False, 1),
    (re.compile(r"\b(?:get|come)\s+(?:me\s+)?out\s+of\s+(?:the\s+)?(.+)", re.I), False, 1),
    # "take do not disturb off", "kill the wifi"
    (re.compile(r"\btake\s+(?:the\s+)?(.+?)\s+off\b", re.I), False, 1),
    (re.compile(r"\bkill\s+(?:the\s+|my\s+)?(.+)", re.I), False, 1),
    # "I don't need wifi right now": a short thing not wanted is a thing to switch off
    (re.compile(r"\b(?:i|we)\s+(?:do\s*n[o']?t|dont)\s+(?:need|want)\s+(?:the\s+|my\s+|any\s+)?"
                r"((?:[\w-]+\s*){1,3}?)(?:\s+(?:right\s+)?now|\s+any\s*more|\s+on)?\s*$", re.I), False, 1),
)
# Words around a toggle's name that do not name it ("flight mode please").
_TARGET_TAIL_RE = re.compile(
    r"(?:\s*,.*|\s+(?:please|pls|plz|now|right\s+now|for\s+me|thanks|thank\s+you|asap|too|"
    r"as\s+well|while\s+you'?re\s+at\s+it))+\s*$", re.I)
_TEXT_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\b(?:saying|says|that says|with (?:the )?(?:text|message|note|body)|message)\s*[:,]?\s*[\"'“‘](.+?)[\"'”’](?:\s|$|[.,;!?])", re.I),
    re.compile(r"[\"“](.+?)[\"”]"),
    re.compile(r"(?:^|\s)'(.+?)'(?:\s|$|[.,;!?])"),
    re.compile(r"‘(.+?)’"),
    re.compile(r"\b(?:search|look up|look for)\s+(?:(?:in\s+)?the\s+\w+\s+)?(?:for\s+)?(.+?)(?:\s+(?:in|on|using|with)\s+(?:the\s+)?\w+(?:\s+app)?)?(?=\s+and\s|\s*,|\s*$)", re.I),
    re.compile(r"\b(?:saying|says|that says)\s*:?\s*(.+?)\s*$", re.I),
    re.compile(r"^\s*(?:text|message|tell|send|reply to|write to)\s+[^:\"']{1,40}?:\s*(.+?)\s*$", re.I),
    # "Text Sam that I'm running late": the message is what follows "that".
    re.compile(r"^\s*(?:text|message|tell|remind)\s+(?!me\b)(?:(?!\band\b)[^:\"']){1,40}?\s+that\s+(.+?)\s*$", re.I),
    re.compile(r"\b(?:type|enter|write|input)\s+(.+?)(?:\s+(?:in|into)\s+(?:the\s+)?.+)?\s*$", re.I),
    re.compile(r"\b(?:named|called|titled|labell?ed)\s+(.+?)\s*$", re.I),
    re.compile(r"\b(?:directions|route|navigate|way)\s+(?:to|for)\s+(?:the\s+)?(.+?)(?:\s+(?:in|on|using|with|by)\s+.+)?\s*$", re.I),
)
_OPEN_RE = re.compile(r"^\s*(?:please\s+)?(?:open|launch|start|run|go to)\s+(?:the\s+|my\s+)?(.+?)(?:\s+app(?:lication)?)?\s*$", re.I)
_SELECT_RE = re.compile(r"\b(?:select|choose|pick|set)\s+(?:the\s+)?(.+)", re.I)

# Screen words that mean "something is in the way", not part of any task's content.
_DISMISS_WORDS = ("close", "dismiss", "not now", "no thanks", "skip", "later", "cancel", "got it", "x")
_ALLOW_WORDS = ("allow", "while using the app", "only this time", "grant", "ok")
_RETRY_WORDS = ("retry", "try again", "reload", "refresh")
_ERROR_RE = re.compile(
    r"\b(error|failed|failure|no (?:internet|connection|network)|offline|went wrong|"
    r"unable to|couldn'?t|can'?t connect|timed out|session expired|signed out|logged out)\b",
    re.I,
)
_LOADING_RE = re.compile(r"\b(loading|please wait|connecting|processing)\b", re.I)
_SUCCESS_RE = re.compile(
    r"\b(placed|sent|saved|paid|purchased|success(?:ful(?:ly)?)?|confirmed|thank you|"
    r"added to (?:the |your )?cart|(?:now )?in your cart|(?:is )?on (?:its|the) way|booked|"
    r"navigating|done)\b",
    re.I,
)
_PERMISSION_RE = re.compile(r"\b(allow|permission|access to)\b", re.I)


@dataclass
class Intent:
    """What one sub-goal asks for."""

    text: str
    kind: str  # "open_app" | "toggle" | "type" | "select" | "click"
    target: str = ""  # words naming the element (or app)
    desired: bool | None = None  # toggles: the state the goal wants
    typed: str | None = None  # text to type
    app: AppInfo | None = None  # the app the sub-goal happens in, when known
    app_named: bool = False  # the app is named in the words (not guessed from descriptions)
    plan_apps: frozenset[str] = frozenset()  # packages of the other sub-goals' apps


def extract_text(goal: str) -> str | None:
    """The text an instruction wants typed: quoted text, "search for X", "saying X"…"""
    for pattern in _TEXT_PATTERNS:
        match = pattern.search(goal)
        if match:
            text = match.group(1).strip().strip("\"'“”‘’").strip()
            text = re.sub(r"[.!?]+$", "", text) if pattern.pattern.startswith(r"\b") else text
            if text:
                return text
    return None


# Words that point to a kind of app when the goal names none ("Get me an iced americano").
_APP_CATEGORIES: dict[str, frozenset[str]] = {
    "coffee": frozenset("latte americano cappuccino mocha espresso macchiato flat".split()),
    "alarm": frozenset("wake alarm".split()),
    "message": frozenset("text chat say tell reply".split()),
    "map": frozenset("direction route way place nearby restaurant".split()),
    "shop": frozenset("buy cart product purchase".split()),
}


def _app_match(words: str, apps: tuple[AppInfo, ...]) -> tuple[AppInfo | None, bool, float]:
    """The app ``words`` name (strongly, by name) or describe (weakly), its score.

    Returns (app, named, score). Named: the app's name occurs as a whole word.
    """
    lowered = f" {normalise_words(words)} "
    # (Whether the name is said as a name or as an everyday word is evidence for the
    # calibrator, ``app_mention``; reading "a setting" as no app here was tried and made
    # the agent worse on apps it had never seen — docs/evaluation.md.)
    named = [
        app for app in apps
        if app.name and f" {normalise_words(app.name)} " in lowered
    ]
    if named:
        # Two apps named: "keyring settings" are Keyring's own settings — a name right
        # after another app's name is a page of that app —, then the one said as a name
        # ("in Settings") before one said as an everyday word, then the longer name.
        def owned(app: AppInfo) -> bool:
            return any(f" {normalise_words(other.name)} {normalise_words(app.name)} " in lowered
                       for other in others if other is not app)
        others = tuple(named)
        best = min(named, key=lambda a: (owned(a), app_mention(words, a.name) != "name",
                                         -len(a.name)))
        return best, True, 1.0
    goal_toks = set(tokens(words))
    goal_toks |= {category for category, members in _APP_CATEGORIES.items() if goal_toks & members}
    best: tuple[float, AppInfo | None] = (0.0, None)
    second = 0.0
    app_tokens = {app.package: set(tokens(f"{app.name} {app.description}")) for app in apps}
    # A word several apps describe themselves with ("search": Maps and Shop) tells them
    # apart less than one only an app uses ("email"): each shared word counts 1/apps.
    spread: dict[str, int] = {}
    for toks in app_tokens.values():
        for tok in toks:
            spread[tok] = spread.get(tok, 0) + 1
    for app in apps:
        app_toks = app_tokens[app.package]
        if not app_toks:
            continue
        overlap = sum(1 / spread[t] for t in goal_toks & app_toks) / max(1, min(len(goal_toks), 4))
        if overlap > best[0]:
            second = best[0]
            best = (overlap, app)
        elif overlap > second:
            second = overlap
    if best[1] is None or best[0] <= 0:
        return None, False, 0.0
    # Strength is the margin over the next app: a unique fit counts even if loose.
    return best[1], False, 1.0 if second == 0 else best[0] - second


def normalise_words(text: str) -> str:
    return " ".join(tokens(text, keep_stopwords=True))


def parse_intent(sub_goal: str, apps: tuple[AppInfo, ...] = ()) -> Intent:
    """Classify one sub-goal: open an app, set a toggle, type, pick an option, or click."""
    app, named, _ = _app_match(sub_goal, apps)
    open_match = _OPEN_RE.match(sub_goal)
    if open_match:
        target = open_match.group(1)
        opened, opened_named, _ = _app_match(target, apps)
        if opened is not None and opened_named:
            return Intent(sub_goal, "open_app", target=opened.name, app=opened, app_named=True)
    for pattern, desired, target_group in _STATE_TOGGLES:
        match = pattern.search(sub_goal)
        if match:
            target = _TARGET_TAIL_RE.sub("", match.group(target_group))
            target = _strip_app_words(target, app if named else None)
            if target:
                return Intent(sub_goal, "toggle", target=target, desired=desired,
                              app=app, app_named=named)
    for pattern, state_group, target_group in _TOGGLE_PATTERNS:
        match = pattern.search(sub_goal)
        if match:
            word = match.group(state_group).lower()
            # what follows a colon is a value or a message, not the switch's name
            target = re.split(r"(?<!\d):(?!\d)", match.group(target_group))[0]
            target = re.sub(r"\s+with\s*$", "", target, flags=re.I)
            target = _strip_app_words(target, app if named else None)
            if target:
                return Intent(
                    sub_goal, "toggle", target=target, desired=word in _ON_WORDS,
                    app=app, app_named=named,
                )
    typed = extract_text(sub_goal)
    if typed:
        target = sub_goal.replace(typed, " ")
        return Intent(sub_goal, "type", target=_strip_app_words(target, app if named else None),
                      typed=typed, app=app, app_named=named)
    select = _SELECT_RE.search(sub_goal)
    if select:
        return Intent(sub_goal, "select", target=_strip_app_words(select.group(1), app if named else None),
                      app=app, app_named=named)
    return Intent(sub_goal, "click", target=_strip_app_words(sub_goal, app if named else None),
                  app=app, app_named=named)


def _strip_app_words(text: str, app: AppInfo | None) -> str:
    text = text.strip().rstrip(".!?")
    if app is not None:
        text = re.sub(
            rf"\s*\b(?:in|on|from|using|with|via)?\s*(?:the\s+)?{re.escape(app.name)}(?:'s)?(?:\s+app)?(?:'s)?\b",
            " ", text, flags=re.I,
        )
    text = re.sub(r"\b(?:in|on)\s+(?:the\s+)?settings?\b$", " ", text, flags=re.I)
    return " ".join(text.split())


# --- confidence --------------------------------------------------------------------


def match_confidence(best: float, runner_up: float) -> float:
    """Confidence 1–5 from the best element's match score and its margin.

    5 — a strong, unique match; 4 — a clear match with a clear margin; 3 — a plausible
    match; 2 — a weak one or two candidates alike; 1 — nothing matches.
    """
    margin = best - runner_up
    if best >= 0.8 and margin >= 0.3:
        return 5.0
    if best >= 0.6 and margin >= 0.2:
        return 4.0
    if best >= 0.45 and margin >= 0.1:
        return 3.0
    if best > 0.2:
        return 2.0
    return 1.0


# --- reading the screen ------------------------------------------------------------


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
    # to be tapped again on the way to the form's button (``HeuristicBackend._stepper``).
    settled: set[str] = field(default_factory=set)
    # The one button that puts a stepper we just set through ("Pay" after "20 bucks").
    stepper_done: UINode | None = None

    @property
    def text(self) -> str:
        return " ".join(n.text for n in self.nodes if n.text)

    @property
    def focused_editable(self) -> UINode | None:
        return next((n for n in self.editables if n.focused), None)


# Shared with the sensitive-action policy (agents/safety): one idea of what a dialog is.
_is_dialog_root = is_dialog_root
_descendants = descendants


def read_screen(ctx: StepContext) -> ScreenView:
    obs = ctx.observation
    nodes = list(obs.nodes)
    view = ScreenView(nodes=nodes, package=obs.app or "", width=obs.width, height=obs.height)
    view.candidates = [n for n in nodes if is_candidate(n)]
    view.editables = [n for n in nodes if is_editable(n) and n.enabled]
    view.scrollables = [n for n in nodes if n.scrollable]
    view.launcher = "launcher" in view.package.lower() or view.package.lower().endswith(".home")

    roots = [n for n in nodes if _is_dialog_root(n)]
    if roots:
        root = roots[0]
        view.overlay = [root] + _descendants(root, nodes)
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
            any(w in n.label.lower() for w in _RETRY_WORDS) for n in nodes
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
                n for n in _descendants(node, nodes)
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
        and n.index not in {d.index for d in _descendants(group, nodes)}
    ]
    if above:
        above.sort(key=lambda n: top - n.bounds[3])
        return above[0].text
    if group.resource_id:
        return group.resource_id.rsplit("/", 1)[-1].replace("_", " ")
    return ""


# --- history -----------------------------------------------------------------------


def _history_labels(history: list[HistoryEntry]) -> list[str]:
    """Normalised labels of the elements clicked so far."""
    out: list[str] = []
    for entry in history:
        if entry.action.get("type") not in (CLICK, "LONG_CLICK"):
            continue
        label = entry.action.get("element") or ""
        match = re.match(r"^\w+ '(.*)'", entry.summary or "")
        if match:
            label = match.group(1)
        if label:
            out.append(label)
    return out


def _typed_texts(history: list[HistoryEntry]) -> list[str]:
    return [
        str(entry.action.get("text", "")).strip().lower()
        for entry in history if entry.action.get("type") == TYPE
    ]


def _foreground_app(ctx: StepContext, view: "ScreenView") -> AppInfo | None:
    """The installed app on screen, when the backend knows it."""
    return next((a for a in ctx.apps if a.package == view.package), None)


def _app_a_person_chose(ctx: StepContext, view: "ScreenView") -> AppInfo | None:
    """The foreground app, when the last switch of app in the episode was a person's
    (an operator's OPENAPP, or a tap on the app's icon) and brought the phone here."""
    here = _foreground_app(ctx, view)
    if here is None or view.launcher:
        return None
    name = normalise_words(here.name)
    for entry in reversed(ctx.history):
        action = entry.action or {}
        if action.get("type") == OPENAPP:
            opened = normalise_words(str(action.get("app") or ""))
            return here if entry.by != "agent" and opened == name else None
        if action.get("type") == CLICK and _is_label(action.get("element"), here.name):
            # a tap on this app's icon (a row inside an app may share another app's
            # name — "Settings" in a ride app — so only this app's name counts)
            return here if entry.by != "agent" else None
    return None


def _is_label(element: Any, name: str) -> bool:
    """A tap's element is the app's icon: its label is the app's name, word for word
    ("Text message" is a field in Messages, not the Messages icon)."""
    return str(element or "").strip().casefold() == name.strip().casefold()


@dataclass
class _Visits:
    """Which apps the episode has acted in, read from its history."""

    worked: set[str] | None  # packages acted in; None: unknown (acted before any switch)
    acting_here: bool  # an action since the last change of app
    where: list[str | None]  # per history entry, the app it acted in (None: unknown)
    # Apps a person switched away from after work was done in them: they judged that
    # part finished (or not the agent's to finish).
    left_by_person: set[str] = field(default_factory=set)


def _app_visits(history: list[HistoryEntry], apps: tuple[AppInfo, ...]) -> _Visits:
    """An action after opening an app (or tapping its icon on the home screen) was done
    in that app; actions before the episode's first change of app were done in an app
    the history does not name."""
    by_name = {normalise_words(a.name): a.package for a in apps if a.name}
    by_label = {a.name.strip().casefold(): a.package for a in apps if a.name}
    worked: set[str] | None = set()
    current: str | None = None
    acting_here = False
    where: list[str | None] = []
    left_by_person: set[str] = set()
    for n, entry in enumerate(history):
        where.append(current)
        action = entry.action or {}
        kind = action.get("type")
        label = str(action.get("element") or "").strip().casefold()
        if kind in (OPENAPP, PRESS_HOME) or (kind == CLICK and label in by_label):
            if (entry.by != "agent" and current is not None and acting_here
                    and worked is not None and current in worked):
                left_by_person.add(current)
        if kind == OPENAPP:
            current = by_name.get(normalise_words(str(action.get("app") or "")))
        elif kind == CLICK and label in by_label:
            current = by_label[label]
        elif kind == PRESS_HOME:
            current = None
        else:
            if n == 0:
                worked = None
            elif current is not None and worked is not None:
                worked.add(current)
            acting_here = True
            continue
        acting_here = False
    return _Visits(worked, acting_here, where, left_by_person)


def _unvisited(intents: list[Intent], visits: _Visits) -> frozenset[int]:
    """Sub-goals whose app the episode has not acted in."""
    if visits.worked is None:
        return frozenset()
    return frozenset(i for i, intent in enumerate(intents)
                     if intent.app is not None and intent.kind != "open_app"
                     and intent.app.package not in visits.worked)


def _opened_apps(history: list[HistoryEntry]) -> list[str]:
    return [str(e.action.get("app", "")).lower() for e in history if e.action.get("type") == OPENAPP]


# --- the backend -------------------------------------------------------------------


@dataclass
class _Choice:
    action: Action
    confidence: float
    thought: str
    candidates: list[str] = field(default_factory=list)
    # Evidence for the calibrator: the decision rule that fired is the backend method
    # that built this choice (``_toggle``, ``_click_best`` …), recorded here so that
    # every one of the rules states it without each call site naming itself.
    rule: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.rule:
            self.rule = sys._getframe(2).f_code.co_name.lstrip("_")  # 1 is __init__

    def matched(self, best: float, runner_up: float, candidates: int = 0) -> "_Choice":
        """Record the element match behind this choice: strength, margin over the
        runner-up and how many elements fitted at all."""
        self.evidence.update(strength=round(best, 4), margin=round(best - runner_up, 4))
        if candidates:
            self.evidence["fitting"] = candidates
        return self


class HeuristicBackend:
    """Rule-based, offline backend. ``propose`` never raises."""

    name = "heuristic"
    needs_ui_tree = True  # it reads UI nodes, never pixels

    def __init__(self, *, top_k: int = 10) -> None:
        self.top_k = top_k

    def propose(self, ctx: StepContext) -> Proposal:
        try:
            return self._propose(ctx)
        except Exception as exc:  # the contract: errors become a parse_error ticket
            return Proposal(
                action=None, confidence=1.0, error=f"heuristic backend failed: {exc!r}",
                raw=traceback.format_exc(limit=3),
            )

    # The rules, in priority order; each returns a Proposal or None to pass.
    def _propose(self, ctx: StepContext) -> Proposal:
        plan = split_goal(ctx.instruction) or [ctx.instruction]
        intents = [parse_intent(step, tuple(ctx.apps)) for step in plan]
        _inherit_apps(intents, ctx)
        view = read_screen(ctx)
        goal = ctx.goal

        def done(choice: _Choice, current: str) -> Proposal:
            rec = recommend(view.nodes, current or goal, k=self.top_k,
                            excluded=ctx.excluded_elements)
            return Proposal(
                action=choice.action, confidence=clamp_confidence(choice.confidence),
                thought=choice.thought, plan=plan, current_step=current,
                candidates=choice.candidates or rec.keys,
                evidence=step_evidence(choice, ctx, view, plan, intents),
            )

        blocked = self._overlay(view, goal, ctx)
        if blocked is not None:
            return done(blocked, "deal with what covers the screen")

        question = self._open_choice(view, ctx) if _app_serves_goal(intents, view, ctx) else None
        if isinstance(question, Proposal):
            question.plan = plan
            return question

        visits = _app_visits(ctx.history, tuple(ctx.apps))  # read once per step
        if view.package and not view.launcher:
            signing_in = self._sign_in(view, ctx)
            if signing_in is not None:
                return done(signing_in, "sign in")
            stepping = self._stepper(view, ctx)
            if stepping is not None:
                return done(stepping, "set the number the goal says")
            shopping = self._purchase_step(intents, view, ctx)
            if shopping is not None:
                return done(shopping, "go on with the purchase")
            form = None if any(i.kind == "toggle" for i in intents) else self._fill_form(view, ctx)
            if form is not None and form.action.type == COMPLETE and _unvisited(intents, visits):
                # "star the email …, and set an alarm for 5:45": the alarm's form is saved,
                # but a part of the errand in an app never acted in is still to do.
                form = None
            if form is not None:
                return done(form, "fill in the form the goal describes")

        status = [self._status(intent, view, ctx, visits) for intent in intents]
        current_index = _current_sub_goal(intents, status, _unvisited(intents, visits))
        current_index = _finish_here_first(intents, status, current_index, view, visits)
        if current_index is None:
            # A form still open on screen (the Coffee order after tapping 'Latte') is
            # unfinished work whatever the history says: fill what the goal names, submit.
            form = self._pick_named_option(view, ctx) or self._submit_form(view, ctx)
            if form is not None:
                return done(form, "fill in and submit the form")
            return done(self._complete(intents, status, view, ctx), "check that the goal is reached")

        intent = intents[current_index]
        choice = self._act(intent, view, ctx, goal)
        if isinstance(choice, Proposal):
            choice.plan = plan
            choice.current_step = intent.text
            return choice
        return done(choice, intent.text)

    # -- blocking screens --

    def _overlay(self, view: ScreenView, goal: str, ctx: StepContext) -> _Choice | None:
        if not view.overlay_kind:
            return None
        goal_toks = set(tokens(goal))
        overlay_nodes = view.overlay or view.nodes
        words = set(tokens(" ".join(n.text + " " + n.content_desc for n in overlay_nodes)))
        if view.overlay_kind == "dialog":
            confirm = _confirmation_of_last_tap(view, ctx)
            if confirm is not None and _choice_left_in(view, goal):
                # "Borrow …?" with a lending period to pick: the choice comes before the
                # go-ahead; the rules that pick a named option, or ask, take it from here.
                return None
            if confirm is not None:
                # The app asks to confirm what was just tapped ("Remove from home" →
                # "Remove Sam Rivera?"): the dialog is part of the task, not a pop-up to
                # dismiss. Going ahead is a sensitive step, so the gate's policy asks a
                # person when the confirmation commits a harm. Only a tap the goal asked
                # for is confirmed alone: "Delete recording" under "start recording" was
                # a slip, and its dialog is the last chance to take it back.
                x, y = confirm.center
                if _goal_asks_for(confirm.label, ctx):
                    return _Choice(Action(CLICK, x=x, y=y, element=confirm.label), 4.0,
                                   f"The app asks to confirm the last step; going ahead with "
                                   f"'{confirm.label}'.")
                return _Choice(Action(CLICK, x=x, y=y, element=confirm.label), 2.0,
                               f"The app asks to confirm '{confirm.label}', which the goal "
                               f"does not ask for; a person decides.")
        if view.overlay_kind == "dialog" and words and len(words & goal_toks) >= max(1, len(words) // 3):
            return None  # the goal talks about this dialog: it is part of the task
        buttons = [n for n in overlay_nodes if n.clickable and n.enabled and n.label]
        if view.overlay_kind == "loading":
            # Nothing to tap and a spinner: waiting is the only sensible step.
            confidence = 4.0 if not any(n.clickable for n in view.nodes
                                        if not _is_system_nav(n)) else 2.0
            return _Choice(Action(WAIT), confidence, "The screen is still loading; waiting for it.")
        preferred: tuple[str, ...]
        if view.overlay_kind == "permission":
            preferred = _ALLOW_WORDS
            why = "A permission prompt covers the screen; the task seems to need it, so allow."
        elif view.overlay_kind == "error":
            preferred = _RETRY_WORDS + ("ok",) + _DISMISS_WORDS
            why = "An error is shown; retrying."
        else:
            preferred = _DISMISS_WORDS + ("ok",)
            why = "An unexpected pop-up covers the screen; dismissing it."
        for word in preferred:
            for button in buttons:
                if button.label.strip().lower() == word or word in button.label.lower().split():
                    x, y = button.center
                    return _Choice(Action(CLICK, x=x, y=y, element=button.label),
                                   _overlay_confidence(view.overlay_kind, button, buttons),
                                   why + f" Clicking '{button.label}'.")
        if view.overlay_kind == "error":
            return _Choice(Action(PRESS_BACK), 1.0, "An error screen with no way to retry.")
        return _Choice(Action(PRESS_BACK), 1.0, why + " No button found; going back.")

    # -- clarification (RecAgent §3.6, App. D) --

    def _open_choice(self, view: ScreenView, ctx: StepContext) -> Proposal | None:
        """Ask when a required choice group has no option chosen and the goal names none."""
        goal = ctx.goal
        for group in view.groups:
            if group.checked is not None:
                continue
            labels = group.labels(view.nodes)
            if _named_option(group, view.nodes, goal) is not None:
                continue  # _act picks it
            options = [label for label in labels if label]
            if not options:
                continue
            title = (group.title or "option").strip().rstrip(":").lower()
            question = f"Which {title} would you like: {_or_list([o.lower() for o in options])}?"
            if question in ctx.asked:
                continue  # never ask twice; _act picks with a low confidence
            return Proposal(
                action=None, confidence=2.0, clarification=Clarification(question, options),
                thought=f"The screen needs a {title} choice and the instruction does not say which.",
                current_step=f"choose the {title}",
            )
        return None

    def _equally_valid(self, intent: Intent, view: ScreenView,
                       ctx: StepContext) -> Proposal | _Choice | None:
        """Ask which one when several items on screen fit the goal equally and only words
        the instruction does not say tell them apart ("Text Sam…" with Sam Patel and Sam
        Rivera listed) — RecAgent §3.6: several choices equally valid. An item the
        instruction names completely ("Latte" beside "Iced latte") is no ambiguity. Once
        asked, the item the answer names is clicked (RecAgent Eq. 6, the refined goal)."""
        if intent.kind not in ("click", "type") or (intent.kind == "type" and view.editables):
            return None
        query = intent.target.replace(intent.typed, " ") if intent.typed else intent.target
        # Only a name can be under-specified this way: a word the instruction capitalises
        # mid-sentence ("Sam"), not a description ("wireless ones under $100").
        wanted = set(tokens(query)) & _names(ctx.instruction)
        if not wanted:
            return None
        said = set(tokens(ctx.instruction))
        clicked = {normalise_words(label) for label in _history_labels(ctx.history)}
        fits: dict[frozenset[str], list[tuple[UINode, str, set[str]]]] = {}
        for node in view.candidates:
            label = (node.text or "").strip()
            if (not label or is_editable(node) or _is_system_nav(node) or node.checkable
                    or not is_tappable(node, view.nodes) or normalise_words(label) in clicked):
                continue
            words = set(tokens(label))
            hit = frozenset(words & wanted)
            if hit and len(words) <= 4:
                fits.setdefault(hit, []).append((node, label, words - said))
        if not fits:
            return None
        widest = max(len(hit) for hit in fits)
        best = [group for hit, group in fits.items() if len(hit) == widest]
        if len(best) != 1:
            return None
        items: list[tuple[UINode, str, set[str]]] = []
        for item in best[0]:
            if not any(_related(item[0], kept[0], view.nodes) for kept in items):
                items.append(item)
        labels = list(dict.fromkeys(label for _, label, _ in items))
        if len(labels) < 2 or any(not extra for _, _, extra in items):
            return None
        question = f"Which one do you mean: {_or_list(labels)}?"
        if question in ctx.asked:
            answered = set(tokens(" ".join(ctx.answers)))
            named = [(node, label) for node, label, extra in items if extra <= answered]
            if len(named) != 1:
                return None  # the answer names none of them: _click_best guesses, low
            node, label = named[0]
            x, y = node.center
            return _Choice(Action(CLICK, x=x, y=y, element=label), 5.0,
                           f"The user chose '{label}'.", [node.key])
        return Proposal(
            action=None, confidence=2.0, clarification=Clarification(question, labels),
            thought=f"{_or_list(labels)} all fit '{intent.text}'; only the user knows which.",
            current_step=f"choose between {_or_list(labels)}",
        )

    def _under_specified(self, intent: Intent, view: ScreenView,
                         ctx: StepContext) -> Proposal | _Choice | None:
        """Ask which one when the goal's app is open, lists items to choose from, and no
        word of the step is on the screen ("Order a coffee" in Coffee, which lists Latte,
        Cappuccino, Americano…): the instruction leaves the choice to the user (RecAgent
        §3.6, an under-specified instruction), so the user is asked rather than an operator
        handed a guess. The answer is read against the items listed (RecAgent Eq. 6)."""
        if intent.kind != "click" or intent.app is None or view.package != intent.app.package \
                or view.overlay:
            return None
        wanted = set(tokens(intent.target)) - set(tokens(intent.app.name))
        items: list[tuple[UINode, str]] = []
        for node in view.candidates:
            if wanted & set(tokens(node_label(node, view.nodes))):
                return None  # the step names something here: the other rules act on it
            # Items of a list: clickable rows made of text lines, not buttons (Filters, Sort).
            if (not node.clickable or node.text or is_editable(node) or _is_system_nav(node)
                    or node.checkable or not any(n.parent == node.index and n.text.strip()
                                                 for n in view.nodes)):
                continue
            # A row is called by its title, its first line ("Latte", not its description).
            label = row_label(node, view.nodes).strip()
            if label and len(tokens(label)) <= 4 and not any(
                    _related(node, kept, view.nodes) for kept, _ in items):
                items.append((node, label))
        labels = list(dict.fromkeys(label for _, label in items))
        if not 3 <= len(labels) <= 8:
            return None
        # Whatever the user said, to this question or in the chat, is read against the items.
        answered = set(tokens(" ".join(ctx.answers)))
        named = [(node, label) for node, label in items if set(tokens(label)) <= answered]
        if len(named) == 1:
            node, label = named[0]
            x, y = node.center
            # The evidence of _pick_named_option: the option the (refined) goal names.
            return _Choice(Action(CLICK, x=x, y=y, element=label), 5.0,
                           f"The user chose '{label}'.", [node.key], rule="pick_named_option")
        question = f"Which one would you like: {_or_list(labels)}?"
        if question in ctx.asked:
            return None  # the answer names none of them: the rules below guess, low
        return Proposal(
            action=None, confidence=2.0, clarification=Clarification(question, labels),
            thought=f"'{intent.text}' does not say which of {_or_list(labels)}; only the "
                    "user knows.",
            current_step="ask which one",
        )

    # -- shopping --

    def _purchase_step(self, intents: list[Intent], view: ScreenView,
                       ctx: StepContext) -> _Choice | None:
        """Walk a shop's purchase funnel for "buy X" / "add X to my cart".

        A person who wants to buy something searches for it by name, then goes Add to cart →
        View cart → Checkout → Pay; asked to add it to the cart, they stop after Add to
        cart. On each screen the furthest step the goal allows is taken, once every choice
        on screen is made (the options the goal names are picked by the rules before).
        Sure (4) only when the screen names the item the goal names; Pay is a sensitive
        action, so the guard still asks a person before it.
        """
        final = _funnel_goal(ctx.instruction)
        if final is None or view.overlay_kind in ("permission", "error", "loading"):
            return None
        if any(g.checked is None for g in view.groups):
            return None
        item = _item_words(ctx.instruction, ctx.apps)
        screen_words = set(tokens(" ".join(
            n.text for n in view.nodes if n.text and not n.clickable and not is_editable(n))))
        named_here = bool(item) and item <= screen_words
        clicked = {_plain(label) for label in _history_labels(ctx.history)}
        best: tuple[int, UINode] | None = None
        for node in view.candidates:
            if not (node.clickable and node.enabled) or is_editable(node) or _is_system_nav(node):
                continue
            label = _plain(node.label or "")
            stage = next((i for i, phrases in enumerate(_FUNNEL) if label in phrases), None)
            if stage is None or stage > final or label in clicked:
                continue
            if best is None or stage > best[0]:
                best = (stage, node)
        if best is not None:
            stage, node = best
            x, y = node.center
            # Sure when the screen names the item, the previous funnel step was taken, or
            # the instruction names this step itself ("check out" → Checkout).
            sure = named_here or any(
                phrase in clicked for phrases in _FUNNEL[:stage] for phrase in phrases) or \
                f" {normalise_words(node.label or '')} " in f" {normalise_words(ctx.instruction)} "
            return _Choice(Action(CLICK, x=x, y=y, element=node.label), 4.0 if sure else 3.0,
                           f"Buying: '{node.label}' is the next step of the purchase"
                           + ("" if sure else ", though this screen does not name the item") + ".",
                           [node.key])
        if item:
            # A list row naming the item opens its page ("Nimbus Noise Cancelling").
            overlay = {n.key for n in view.overlay}
            rows = [n for n in view.candidates if n.text and is_tappable(n, view.nodes)
                    and not is_editable(n) and n.key not in overlay
                    and item <= set(tokens(n.text)) and len(set(tokens(n.text)) - item) <= 2]
            # One row, and not one already tapped: with "Visa ending 9021" tapped, its
            # lookalike "Visa ending 4417" is not "the" item just because it is left.
            if len({_plain(n.text) for n in rows}) == 1 and _plain(rows[0].text) not in clicked:
                x, y = rows[0].center
                return _Choice(Action(CLICK, x=x, y=y, element=rows[0].text), 4.0,
                               f"'{rows[0].text}' is the item the goal names; opening it.",
                               [rows[0].key])
        if any(i.kind == "type" for i in intents):
            return None  # the instruction says what to search for itself
        return self._search_item(ctx, view)

    def _search_item(self, ctx: StepContext, view: ScreenView) -> _Choice | None:
        """The item is not on screen but a search field is: search for it by name."""
        query = _item_query(ctx.instruction, ctx.apps)
        fields = [n for n in view.editables if "search" in node_label_text(n).lower()]
        if not query or len(fields) != 1:
            return None
        field_node = fields[0]
        last = ctx.history[-1].action if ctx.history else {}
        if not _field_is_empty(field_node):
            if last.get("type") == TYPE and normalise_words(str(last.get("text", ""))) == normalise_words(query):
                return _Choice(Action(PRESS_ENTER), 4.0, f"'{query}' is typed; searching.")
            return None
        words = set(tokens(query))
        shown = any(words <= set(tokens(n.text)) for n in view.nodes if n.text and not is_editable(n))
        searched = any(e.action.get("type") == TYPE and normalise_words(str(e.action.get("text", "")))
                       == normalise_words(query) for e in ctx.history)
        if shown or searched:
            return None
        return _Choice(Action(TYPE, text=query, element=field_node.label or None), 4.0,
                       f"'{query}' is not on this screen; searching the shop for it.",
                       [field_node.key])

    # -- signing in --

    def _sign_in(self, view: ScreenView, ctx: StepContext) -> _Choice | None:
        """A sign-in screen: the password is the account owner's, so a person types it.

        The agent taps the empty password field (harmless), then asks a person to type —
        never the user through the chat, where a password would end up in the transcript
        and the training data. Once the field is filled, it taps Sign in.
        """
        fields = [n for n in view.editables if n.password]
        if len(fields) != 1:
            return None
        field_node = fields[0]
        if _field_is_empty(field_node):
            if not field_node.focused:
                x, y = field_node.center
                return _Choice(Action(CLICK, x=x, y=y, element=field_node.label or None), 4.0,
                               "The app asks to sign in; tapping the password field.",
                               [field_node.key])
            return _Choice(Action(WAIT), 1.0,
                           "The app asks for the account's password. Only its owner or an "
                           "operator may type it: please enter it (take over, or edit this "
                           "step into TYPE).")
        buttons = [n for n in view.candidates if n.clickable and n.enabled
                   and _plain(n.label or "") in _SIGN_IN_LABELS]
        last = ctx.history[-1].action.get("type") if ctx.history else None
        if len(buttons) == 1 and last == TYPE:
            x, y = buttons[0].center
            return _Choice(Action(CLICK, x=x, y=y, element=buttons[0].label), 4.0,
                           f"The password is entered; tapping '{buttons[0].label}'.",
                           [buttons[0].key])
        return None

    # -- forms --

    def _stepper(self, view: ScreenView, ctx: StepContext) -> _Choice | None:
        """Tap − or + on a stepper until it shows the number the goal gives for it
        ("set it to 8 servings", "cap her at 3 GB", "an extra hour"); a stepper already
        there joins ``view.settled`` so no later rule taps it again.

        Claimed at 3: the number was said beside the stepper's words or unit
        (agents/backends/steppers.py)."""
        if view.overlay:
            return None
        steppers = find_steppers(view.nodes)
        if not steppers:
            return None
        text = ctx.goal
        typed = extract_text(ctx.instruction)
        if typed:
            text = text.replace(typed, " ")  # a number inside a message is not a setting
        pressed = _history_labels(ctx.history)
        for stepper in steppers:
            names = {stepper.decrease.label, stepper.increase.label}
            presses = [i for i, label in enumerate(pressed) if label in names]
            if presses and any(label not in names for label in pressed[presses[-1] + 1:]):
                # Set earlier, then left for the form's button: back at its start after
                # "Pay" ("Amount to add" reads 0 again), it is not asked for twice.
                view.settled |= stepper.keys
                continue
            wanted = stepper_target(text, stepper.label)
            if wanted is None:
                continue
            button = stepper_move(stepper, wanted, pressed)
            if button is None:
                view.settled |= stepper.keys
                if not (pressed and pressed[-1] in names):
                    continue
                if not _other_buttons(view):
                    # "keep 40% in the battery": the stepper was the whole request, and
                    # no button on screen could save it — it is set. (A button of any
                    # words may be the one: "List for sale" after a price stepper.)
                    return _Choice(Action(COMPLETE), 3.0,
                                   f"'{stepper.label}' shows {wanted:g}, as the goal asks, "
                                   "and nothing on screen saves it: done.")
                commits = _commit_buttons(view)
                if len(commits) == 1:
                    # "20 bucks" set: "Pay" is how it goes on, whatever its words — once
                    # nothing else on screen is named by the goal (``_click_best``)
                    view.stepper_done = commits[0]
                continue
            x, y = button.center
            return _Choice(Action(CLICK, x=x, y=y, element=button.label or None), 3.0,
                           f"'{stepper.label}' shows {stepper.value:g}; the goal wants "
                           f"{wanted:g}.", [button.key])
        return None

    def _fill_form(self, view: ScreenView, ctx: StepContext) -> _Choice | None:
        """Enter the values the instruction gives into the fields made for them.

        "Add a 7:15 AM alarm labelled Gym": a time goes into a field labelled like a time,
        a "labelled/named/called X" into a label or name field. Each empty field that fits
        is tapped, then typed into; with all of them filled by us, the form's Save/OK/Done
        button is tapped; once saved, the values showing on screen finish the task.
        """
        values = _form_values(ctx.instruction)
        if not values:
            return None
        typed = _typed_texts(ctx.history)
        fitting = [(node, value) for node in view.editables
                   for kind, value in values if _field_kind(node) == kind]
        for node, value in fitting:
            if not _field_is_empty(node):
                continue
            if node.focused:
                return _Choice(Action(TYPE, text=value, element=node.label or None), 5.0,
                               f"Typing '{value}' into '{node.label}'.", [node.key])
            x, y = node.center
            return _Choice(Action(CLICK, x=x, y=y, element=node.label or None), 4.0,
                           f"'{node.label}' is where '{value}' goes; tapping it.", [node.key])
        ours = [value for _, value in values if value.lower() in typed]
        if not fitting and not ours and _CREATE_RE.search(ctx.instruction):
            # No form yet: the "Add alarm" / "New alarm" control of the thing the goal makes.
            goal_words = set(tokens(ctx.instruction))
            makers = []
            for n in view.candidates:
                verb, _, thing = _plain(n.label or "").partition(" ")
                if n.clickable and n.enabled and verb in ("add", "new", "create") \
                        and set(tokens(thing)) & goal_words:
                    makers.append(n)
            if len(makers) == 1:
                x, y = makers[0].center
                return _Choice(Action(CLICK, x=x, y=y, element=makers[0].label), 4.0,
                               f"'{makers[0].label}' opens the form for what the goal adds.",
                               [makers[0].key])
        if fitting and len(ours) == len(values) and ctx.history and \
                ctx.history[-1].action.get("type") == TYPE:
            buttons = [n for n in view.candidates if n.clickable and n.enabled
                       and _plain(n.label or "") in _SAVE_LABELS]
            if len(buttons) == 1:
                x, y = buttons[0].center
                return _Choice(Action(CLICK, x=x, y=y, element=buttons[0].label), 4.0,
                               f"Every value is entered; '{buttons[0].label}' saves the form.",
                               [buttons[0].key])
        if not fitting and len(ours) == len(values) and any(
                _plain(label) in _SAVE_LABELS for label in _history_labels(ctx.history)):
            shown = " ".join(n.text.lower() for n in view.nodes if n.text and not is_editable(n))
            if all(value.lower() in shown for _, value in values):
                return _Choice(Action(COMPLETE), 5.0,
                               "The form is saved and its values show on this screen.")
            return _Choice(Action(COMPLETE), 4.0,
                           "The form closed on Save without an error; the goal is done.")
        return None

    # -- progress --

    def _status(self, intent: Intent, view: ScreenView, ctx: StepContext,
                visits: _Visits | None = None) -> str:
        """'done' (visible on screen), 'seen' (history shows it was done), or 'todo'.
        ``visits``: the history's apps, read once per step by the caller."""
        history = ctx.history
        if intent.kind == "open_app":
            if intent.app and view.package == intent.app.package:
                return "done"
            if intent.app and intent.app.name.lower() in _opened_apps(history):
                return "seen"
            return "todo"
        if intent.kind == "toggle":
            switch, score, _ = self._find_switch(intent, view)
            if switch is not None and score >= 0.5 and _app_ok(intent, view):
                if switch.checked != intent.desired or _other_named_option(view, intent):
                    return "todo"
                return "done"
            labels = _history_labels(history)
            target = set(tokens(intent.target))
            if target and any(target <= set(tokens(label)) for label in labels):
                return "seen"
            return "seen" if self._finished_in_its_app(intent, view, ctx, visits) else "todo"
        if intent.kind == "type" and intent.typed:
            typed = intent.typed.strip().lower()
            field_texts = [n.text.strip().lower() for n in view.editables if not _field_is_empty(n)]
            last_type = max(
                (i for i, e in enumerate(history)
                 if e.action.get("type") == TYPE and str(e.action.get("text", "")).strip().lower() == typed),
                default=None,
            )
            submitted = last_type is not None and any(
                e.action.get("type") in (CLICK, PRESS_ENTER) for e in history[last_type + 1:]
            )
            if submitted and not _app_ok(intent, view):
                return "likely"  # sent from its own app; this screen cannot show it
            if submitted:
                assert last_type is not None
                shown = any(typed in n.text.lower() for n in view.nodes if n.text and not is_editable(n))
                success = _success_text(view)
                if success and _success_fits(success, intent):
                    return "done"
                if _unseen_words(intent, view):
                    return "more"  # "directions to X": X is found, the rest is still to do
                last_submit = history[-1].action.get("type") in (CLICK, PRESS_ENTER)
                words = set(tokens(intent.text, keep_stopwords=True))
                if words & {"send", "text", "message", "tell", "reply", "say", "saying"}:
                    # A sent message shows up in the conversation.
                    return "done" if shown and last_submit else "likely"
                return "likely"
            if last_type is not None or typed in field_texts:
                return "typed"
            return "todo"
        if _setting_shows(intent, view):
            return "done"
        if history and history[-1].action.get("type") == CLICK and _app_ok(intent, view):
            if _state_shows(intent, view):
                return "done"
            success = _success_text(view)
            if success and _success_fits(success, intent):
                return "done"
            if success and _requests(intent):
                return "likely"  # a loose confirmation ("Added to cart" for "buy")
            if _committed(history[-1], intent) and view.overlay_kind != "dialog":
                return "likely"  # the form was just sent off ("Confirm ride" → a trip screen)
            if _confirmed(history) and view.overlay_kind != "dialog":
                return "likely"  # "Stop parking", then "Stop" in the dialog it opened
        return "seen" if self._finished_in_its_app(intent, view, ctx, visits) else "todo"

    @staticmethod
    def _finished_in_its_app(intent: Intent, view: ScreenView, ctx: StepContext,
                             visits: _Visits | None) -> bool:
        """The only part of the errand in its app was committed there earlier ("Confirm
        ride", "Save", a request and its confirmation), or a person left that app for
        another after work in it."""
        if intent.app is None or intent.app.package in intent.plan_apps:
            return False
        history = ctx.history
        visits = visits or _app_visits(history, tuple(ctx.apps))
        # (a tap the dialog on screen now asks to confirm is not committed yet)
        settled = history[:-1] if view.overlay_kind == "dialog" else history
        if any(app == intent.app.package and (_committed(entry, intent)
                                              or _confirmed(settled, i + 1))
               for i, (app, entry) in enumerate(zip(visits.where, settled))):
            return True
        return intent.app.package in visits.left_by_person and view.package != intent.app.package

    def _complete(self, intents: list[Intent], status: list[str], view: ScreenView,
                  ctx: StepContext | None = None) -> _Choice:
        visible = all(s == "done" for s in status[-1:])
        confidence = 5.0 if visible else 3.0  # history or a loose confirmation only
        thought = "Every sub-goal's effect is visible on the screen; the task is done." \
            if visible else "The history suggests every sub-goal is done."
        # A switch the goal names that was never tapped was already as wanted: say so, the
        # user reads this line as the task's result.
        squash = lambda text: re.sub(r"[^a-z0-9]", "", text.lower())  # "Wi-Fi" ~ "wifi"
        tapped = [squash(label) for label in _history_labels(ctx.history)] if ctx else []
        untouched = [i for i, s in zip(intents, status) if i.kind == "toggle" and s == "done"
                     and i.desired is not None and squash(i.target) and not any(
                         squash(i.target) in t or (t and t in squash(i.target)) for t in tapped)]
        if untouched:
            thought = " ".join(f"'{i.target}' was already {'on' if i.desired else 'off'}."
                               for i in untouched) + " " + thought
        choice = _Choice(Action(COMPLETE), confidence, thought)
        # Evidence before COMPLETE: the last sub-goal shows on screen, and how many of
        # all of them do (the earlier ones may only be known from the history).
        choice.evidence.update(last_goal_visible=visible,
                               goals_visible=sum(1 for s in status if s == "done") / max(1, len(status)))
        return choice

    # -- acting on one sub-goal --

    def _act(self, intent: Intent, view: ScreenView, ctx: StepContext, goal: str) -> _Choice | Proposal:
        app_step = self._app_step(intent, view, ctx)
        if app_step is not None:
            return app_step
        if intent.kind == "toggle":
            return self._toggle(intent, view, ctx)
        question = self._equally_valid(intent, view, ctx)
        if question is not None:
            return question
        question = self._under_specified(intent, view, ctx)
        if question is not None:
            return question
        pick = self._pick_named_option(view, ctx)
        if pick is not None:
            return pick
        if intent.kind != "type":
            form = self._submit_form(view, ctx)
            if form is not None:
                return form
        if intent.kind == "type" and intent.typed:
            return self._type(intent, view, ctx)
        return self._click_best(intent, view, ctx)

    def _app_step(self, intent: Intent, view: ScreenView, ctx: StepContext) -> _Choice | None:
        app = intent.app
        chosen = _app_a_person_chose(ctx, view)
        if chosen is not None and chosen.package in intent.plan_apps - {app.package if app else ""}:
            chosen = None  # opened for another part of the errand, not instead of this one
        if chosen is not None and (app is None or app.package != chosen.package):
            # A person put the phone in this app instead of the one the agent meant: their
            # choice stands over a guess; leaving it for a named app is asked first.
            if app is None or not intent.app_named or app_mention(intent.text, app.name) == "word":
                # (a name said only as an everyday word — "we don't need coffee anymore",
                # "is there a setting for that" — does not pull the phone out of it)
                return None
            return _Choice(Action(OPENAPP, app=app.name), 2.0,
                           f"The goal names '{app.name}', but a person just opened "
                           f"'{chosen.name}'; asking before leaving it.")
        if app is None:
            if view.launcher:
                app, named, strength = _app_match(ctx.goal, tuple(ctx.apps))
                if app is None:
                    return _Choice(Action(IMPOSSIBLE), 1.0, "No installed app fits the goal.")
                confidence = 3.0 if strength >= 0.5 else 2.0
                return _Choice(Action(OPENAPP, app=app.name), confidence,
                               f"On the home screen; '{app.name}' is the closest app to the goal.")
            here = _foreground_app(ctx, view)
            if here is not None and _app_match(ctx.goal, tuple(ctx.apps))[0] is None:
                # Inside a known app that does not fit either, the launcher would say the
                # same after a chain of PRESS_BACKs a person must approve one by one: say
                # it now, once. (An app we know nothing about may still be the right one.)
                return _Choice(Action(IMPOSSIBLE), 1.0,
                               f"No installed app fits the goal ('{here.name}' is open).")
            return None
        if view.package == app.package:
            return None
        if intent.app_named or intent.kind == "open_app":
            confidence = 5.0
        else:
            # Guessed from descriptions: sure only when one app clearly fits better.
            _, _, strength = _app_match(intent.text, tuple(ctx.apps))
            confidence = 4.0 if strength >= 0.3 else 2.0
        return _Choice(Action(OPENAPP, app=app.name), confidence,
                       f"The goal happens in '{app.name}', which is not in the foreground; opening it.")

    def _find_switch(self, intent: Intent, view: ScreenView) -> tuple[UINode | None, float, float]:
        """The checkable node the toggle names, its match score, and the runner-up's."""
        scores = [
            s for s in score_nodes(view.nodes, intent.target)
            if s.node.checkable and "Radio" not in s.node.cls
        ]
        ranked = _distinct(sorted(scores, key=lambda s: -s.total), view.nodes)
        if not ranked or ranked[0].total <= 0:
            return None, 0.0, 0.0
        second = ranked[1].total if len(ranked) > 1 else 0.0
        return ranked[0].node, ranked[0].total, second

    def _toggle(self, intent: Intent, view: ScreenView, ctx: StepContext) -> _Choice:
        switch, score, second = self._find_switch(intent, view)
        state_word = "on" if intent.desired else "off"
        if switch is not None and score >= 0.5:
            label = _display_label(switch, view.nodes)
            current = "on" if switch.checked else "off"
            if switch.checked == intent.desired:  # StaR Fig. 12: no toggle needed
                option = _other_named_option(view, intent)
                if option is not None:  # "lights on at high brightness": High is left
                    x, y = option.center
                    name = option.label or row_label(option, view.nodes)
                    return _Choice(Action(CLICK, x=x, y=y, element=name), 4.0,
                                   f"'{label}' is {current} as the goal wants; it also names "
                                   f"'{name}', not chosen yet.", [option.key])
                return _Choice(Action(COMPLETE), 4.0,
                               f"'{label}' is currently {current}, as the goal wants.")
            x, y = switch.center
            confidence = match_confidence(score, second)
            if switch.key in ctx.excluded_elements:
                confidence = min(confidence, 2.0)
            return _Choice(
                Action(CLICK, x=x, y=y, element=label or None), confidence,
                f"The switch '{label}' is currently {current}, while the goal wants it "
                f"{state_word}; clicking it.",
                [switch.key],
            ).matched(score, second)
        # Not on this screen: navigate towards it (a row named like the target), else scroll.
        return self._click_best(intent, view, ctx, navigating=True)

    def _pick_named_option(self, view: ScreenView, ctx: StepContext) -> _Choice | None:
        for group in view.groups:
            if group.checked is not None:
                continue
            named = _named_option(group, view.nodes, ctx.goal)
            labels = group.labels(view.nodes)
            title = group.title or "option"
            if named is None:
                question_asked = any(title.lower() in q.lower() for q in ctx.asked)
                if question_asked and group.options:
                    option = group.options[0]
                    x, y = option.center
                    return _Choice(Action(CLICK, x=x, y=y, element=option.label), 2.0,
                                   f"No {title} was named even after asking; guessing.")
                continue
            option, strength = named
            x, y = option.center
            label = option.label or row_label(option, view.nodes)
            confidence = 5.0 if strength >= 0.99 else 4.0 if strength >= 0.9 else 3.0
            why = f"The goal names '{label}' for {title}; choosing it (options: {', '.join(labels)})."
            if _names_elsewhere(view, ctx, label):
                # "the Aurora Wireless Headphones in black" on the Pulse Sport Earbuds'
                # page: Black is named, but these options belong to another item.
                confidence = min(confidence, 3.0)
                why += " The item the goal names is not on this screen, though."
            choice = _Choice(Action(CLICK, x=x, y=y, element=label), confidence, why,
                             [option.key])
            choice.evidence.update(strength=round(strength, 4), fitting=len(labels))
            return choice
        return None

    def _submit_form(self, view: ScreenView, ctx: StepContext) -> _Choice | None:
        """Every choice on screen made, at least one by us: tap the button the goal names."""
        if not view.groups or any(g.checked is None for g in view.groups) or view.overlay_kind:
            return None
        clicked = {label.lower() for label in _history_labels(ctx.history)}
        chosen_here = {(o.label or row_label(o, view.nodes)).lower()
                       for g in view.groups for o in g.options}
        if not clicked & chosen_here:
            return None
        goal_toks = set(tokens(ctx.goal))
        for node in view.candidates:
            label = node.label or ""
            # A plain Button: not a RadioButton, nor a toolbar ImageButton ("Cart").
            if (node.short_class != "Button" or not label or label.lower() in clicked
                    or _is_system_nav(node)):
                continue
            if set(tokens(label)) & goal_toks:
                x, y = node.center
                return _Choice(Action(CLICK, x=x, y=y, element=label), 4.0,
                               f"Every choice is made; '{label}' submits what the goal asks.",
                               [node.key])
        return None

    def _type(self, intent: Intent, view: ScreenView, ctx: StepContext) -> _Choice:
        typed = intent.typed or ""
        status = self._status(intent, view, ctx)
        if status == "typed":
            return self._submit(intent, view, ctx)
        if status == "more":
            rest = Intent(intent.text, "click", target=" ".join(_remaining_words(intent)),
                          app=intent.app, app_named=intent.app_named)
            choice = self._click_best(rest, view, ctx)
            choice.confidence = min(choice.confidence, 4.0)
            return choice
        empty = [n for n in view.editables if _field_is_empty(n)]
        field_node = view.focused_editable
        if field_node is not None and (_field_is_empty(field_node) or len(view.editables) == 1):
            others = [n for n in empty if n.index != field_node.index]
            sure = not others or (_field_fits(field_node, intent) and not any(
                _field_fits(n, intent) for n in others))
            return _Choice(Action(TYPE, text=typed, element=field_node.label or None),
                           5.0 if sure else 3.0,
                           f"The text field '{field_node.label}' is focused; typing '{typed}'.",
                           [field_node.key])
        if len(view.editables) == 1:
            # One field on screen: TYPE goes into it without a tap first (as adb input does).
            only = view.editables[0]
            return _Choice(Action(TYPE, text=typed, element=only.label or None), 5.0,
                           f"'{only.label}' is the only text field; typing '{typed}'.", [only.key])
        if empty:
            fitting = [n for n in empty if _field_fits(n, intent)]
            choice = fitting[0] if len(fitting) == 1 else empty[0]
            confidence = 5.0 if len(empty) == 1 or len(fitting) == 1 else 2.0
            if choice.key in ctx.excluded_elements:
                confidence = 2.0
            x, y = choice.center
            return _Choice(Action(CLICK, x=x, y=y, element=choice.label or None), confidence,
                           f"Clicking the empty text field '{choice.label}' to type '{typed}'.",
                           [choice.key])
        # No field yet: open what the goal names first ("to Alice" → Alice's conversation).
        entity = self._best_unused(intent, view, ctx, exclude_text=typed, editable_ok=False)
        if entity is not None:
            node, score, second = entity
            x, y = node.center
            label = _display_label(node, view.nodes)
            return _Choice(Action(CLICK, x=x, y=y, element=label or None),
                           match_confidence(score, second),
                           f"'{label}' is named by the goal; opening it before typing.",
                           [node.key]).matched(score, second)
        return self._click_best(intent, view, ctx, navigating=True)

    def _submit(self, intent: Intent, view: ScreenView, ctx: StepContext) -> _Choice:
        """Send what was typed: the one commit button on screen, else Enter."""
        buttons = [
            n for n in view.candidates
            if n.clickable and n.enabled and not is_editable(n) and not _is_system_nav(n)
            and set(tokens(n.label, keep_stopwords=True)) & _SUBMIT_WORDS
        ]
        if len(buttons) == 1:
            best = buttons[0]
            x, y = best.center
            # A form with a field still empty (an alarm's time) is not ready to submit.
            ready = not any(_field_is_empty(n) for n in view.editables)
            return _Choice(Action(CLICK, x=x, y=y, element=best.label), 4.0 if ready else 3.0,
                           f"The text is typed; clicking '{best.label}' to submit it.", [best.key])
        if "search" in set(tokens(intent.text, keep_stopwords=True)) or any(
            "search" in node_label_text(n).lower() for n in view.editables
        ):
            return _Choice(Action(PRESS_ENTER), 4.0 if not buttons else 2.0,
                           "The search text is typed; pressing Enter.")
        return _Choice(Action(PRESS_ENTER), 2.0, "The text is typed; pressing Enter to submit.")

    def _scroll(self, view: ScreenView, ctx: StepContext, why: str, sure: bool = False) -> _Choice:
        """Scroll for more: finger up (content further down) until that stops changing
        the screen, then back down (AITZ/OS-Atlas direction convention)."""
        last = ctx.history[-1] if ctx.history else None
        direction = "UP"
        if last is not None and last.action.get("type") == SCROLL and not last.screen_changed:
            direction = "DOWN" if last.action.get("direction") == "UP" else "UP"
        # Reversing direction is a guess about where the list ends: never sure. (A first
        # scroll at 4 was right only 25 times in 54 on the development apps, but claiming
        # 3 made the calibrated gate ask more on the bundled apps, where such scrolls are
        # right, and the heuristic alone no better on new ones: measured 2026-11-25,
        # docs/evaluation.md.)
        confidence = 4.0 if sure and direction == "UP" and not _scrolled_in_vain(ctx) else 3.0
        return _Choice(Action(SCROLL, direction=direction), confidence, why + f" Scrolling {direction}.")

    def _best_unused(
        self, intent: Intent, view: ScreenView, ctx: StepContext, *, exclude_text: str = "",
        editable_ok: bool = True, navigating: bool = False, floor: float = 0.3,
    ) -> tuple[UINode, float, float] | None:
        query = intent.target
        if exclude_text:
            query = query.replace(exclude_text, " ")
        clicked = {normalise_words(label) for label in _history_labels(ctx.history)}
        clicked.discard("")

        def used(node: UINode) -> bool:
            # The history names a click by the clickable node it hit (a row's id tail when
            # the row has no text), so the owner's names count too.
            owner = owner_of(node, view.nodes)
            names = {normalise_words(node.label), normalise_words(_display_label(node, view.nodes))}
            if owner is not None:
                names |= {normalise_words(owner.label), normalise_words(_display_label(owner, view.nodes))}
            return bool(names & clicked)
        candidates = [
            s for s in score_nodes(view.nodes, query)
            if s.node.key not in ctx.excluded_elements and s.node.key not in view.settled
            and (editable_ok or not is_editable(s.node))
            and not (is_editable(s.node) and not _field_is_empty(s.node))  # typed already
            and not (s.node.checkable and s.node.checked and "Radio" in s.node.cls)
            and not s.node.selected  # the tab already shown
            and not _is_system_nav(s.node)
            and is_tappable(s.node, view.nodes)
        ]
        # The element the step names best, already tapped, stays the runner-up: "Red
        # Lentil Soup" left over after "Red Lentil Dal" is its look-alike, not the target.
        scores: list[NodeScore] = []
        tapped_best = 0.0
        for s in candidates:
            if used(s.node):
                tapped_best = max(tapped_best, s.total)
            else:
                scores.append(s)
        if navigating:
            # The target is on another screen: a row that mentions every word of it
            # ("Wi-Fi" in "Network & internet · Wi-Fi On") is the way there.
            target = set(tokens(query))
            for s in scores:
                words = set(tokens(s.node.text + " " + s.node.content_desc))
                if target and target <= words:
                    s.keyword = max(s.keyword, 0.75)
        ranked = _distinct(sorted(scores, key=lambda s: -s.total), view.nodes)
        if not ranked or ranked[0].total < floor:
            return None
        second = ranked[1].total if len(ranked) > 1 else 0.0
        return ranked[0].node, ranked[0].total, max(second, tapped_best)

    def _click_best(self, intent: Intent, view: ScreenView, ctx: StepContext,
                    navigating: bool = False) -> _Choice:
        # One scoring pass: a match of 0.3 or more is the element the step names; a
        # weaker one is only the closest guess, kept for when nothing else fits.
        closest = self._best_unused(intent, view, ctx, exclude_text=intent.typed or "",
                                    navigating=navigating, floor=0.1)
        best = closest if closest is not None and closest[1] >= 0.3 else None
        if navigating and intent.kind == "toggle" and view.scrollables and (
            best is None or best[1] < 0.6
        ):
            return self._scroll(view, ctx, f"'{intent.target}' is not on screen; the list scrolls.",
                                sure=best is None and _list_of_kind(view, checkable=True))
        if best is not None:
            node, score, second = best
            confidence = match_confidence(score, second)
            if navigating:
                confidence = min(confidence, 4.0)
            label = _display_label(node, view.nodes)
            # One generic word of a long request ("cart" in "add the Aurora headphones in
            # white to the cart") is weak evidence however unique it is on screen.
            target_text = intent.target.replace(intent.typed, " ") if intent.typed else intent.target
            goal_words = set(tokens(target_text))
            label_words = set(tokens(node_label(node, view.nodes)))
            coverage = len(goal_words & label_words) / len(goal_words) if goal_words else 1.0
            icon = not node.text and bool(node.content_desc)
            if coverage == 0 or coverage < 0.15 or (icon and coverage < 0.25):
                confidence = min(confidence, 3.0)
            if intent.kind != "toggle" and (node.checkable or any(
                    c.checkable for c in view.nodes if c.parent == node.index)):
                # A tap flips a switch; a goal that says no state to flip it to is a guess.
                confidence = min(confidence, 3.0)
            x, y = node.center
            choice = _Choice(Action(CLICK, x=x, y=y, element=label or None), confidence,
                             f"'{label}' matches the step '{intent.text}' best "
                             f"(score {score:.2f}, runner-up {second:.2f}).", [node.key])
            choice.evidence["coverage"] = round(coverage, 4)
            choice.evidence["navigating"] = navigating
            return choice.matched(score, second)
        if view.stepper_done is not None:
            button = view.stepper_done
            x, y = button.center
            return _Choice(Action(CLICK, x=x, y=y, element=button.label or None), 3.0,
                           f"The number is set; '{button.label}' puts it through.",
                           [button.key], rule="stepper")
        if view.scrollables:
            return self._scroll(view, ctx, f"Nothing on screen matches '{intent.target}'.",
                                sure=_list_of_kind(view, checkable=False))
        success = _SUCCESS_RE.search(view.text) if _app_ok(intent, view) else None
        if success:
            return _Choice(Action(COMPLETE), 3.0,
                           f"The screen says '{success.group(0)}'; the goal looks reached.")
        if closest is not None and not _back_is_the_way(ctx) and not _named_elsewhere(
                _display_label(closest[0], view.nodes), intent, ctx):
            node, score, second = closest
            label = _display_label(node, view.nodes)
            x, y = node.center
            # Claimed at 2: on the development suites such guesses were right 30 % of
            # the time (80 / 265), which the shipped calibrator reads at P 0.28 from a 2
            # and at 0.18 from a 1.
            choice = _Choice(Action(CLICK, x=x, y=y, element=label or None), 2.0,
                             f"Nothing on this screen matches '{intent.target}' well; "
                             f"'{label}' is the closest (score {score:.2f}).", [node.key])
            choice.evidence["weak"] = True
            return choice.matched(score, second)
        return _Choice(Action(PRESS_BACK), 1.0,
                       f"Nothing on this screen matches '{intent.target}'.")


def _named_elsewhere(label: str, intent: Intent, ctx: StepContext) -> bool:
    """Another sub-goal of the goal names ``label`` better than this one does ("Sort:
    lowest price" while the step is "add the cheapest pair to the cart"): it belongs to
    that step — done, or still to come — not to this one."""
    words = set(tokens(label))
    if not words:
        return False
    here = len(words & set(tokens(intent.text)))
    return any(len(words & set(tokens(part))) > here
               for part in split_goal(ctx.goal) if part != intent.text)


def _back_is_the_way(ctx: StepContext) -> bool:
    """The agent's own last tap led here and changed the screen: a screen it chose that
    holds nothing of the goal is a wrong turn, and back is the way."""
    last = ctx.history[-1] if ctx.history else None
    return last is not None and last.by == "agent" and last.screen_changed and \
        last.action.get("type") == CLICK


# --- evidence ----------------------------------------------------------------------


def step_evidence(choice: _Choice, ctx: StepContext, view: ScreenView, plan: list[str],
                  intents: list[Intent]) -> dict[str, Any]:
    """Why the heuristic is sure of ``choice`` (issue 12), for the calibrator: the rule
    that fired with its raw 1–5 score, the element match behind it, what is on screen,
    and the context every backend states (:func:`context_evidence`)."""
    evidence = context_evidence(choice.action, ctx)
    evidence.update(rule=choice.rule, raw=float(choice.confidence))
    evidence.update(choice.evidence)
    evidence["sub_goals"] = min(len(plan), 4)
    evidence["overlay"] = view.overlay_kind or "none"
    evidence["launcher"] = view.launcher
    evidence["open_choices"] = sum(1 for g in view.groups if g.checked is None)
    evidence["targets"] = min(len(view.candidates), 30)
    return evidence


# --- helpers -----------------------------------------------------------------------


def _inherit_apps(intents: list[Intent], ctx: StepContext) -> None:
    """A sub-goal that names no app happens in the app the previous sub-goal named
    ("Open Settings, then turn on Wi-Fi"); failing that, the app its words describe."""
    previous: Intent | None = None
    for intent in intents:
        if not intent.app_named and previous is not None and previous.app_named:
            intent.app, intent.app_named = previous.app, True
        previous = intent
    for intent in intents:
        intent.plan_apps = frozenset(other.app.package for other in intents
                                     if other is not intent and other.app is not None)


def _current_sub_goal(intents: list[Intent], status: list[str],
                      unvisited: frozenset[int] = frozenset()) -> int | None:
    """The first unfinished sub-goal at or after the latest one with evidence of progress.

    A toggle set (or found already set) on an earlier screen is no longer visible once the
    agent moved on, so sub-goals before the latest one the history shows done — or an
    app the screen shows open — count as done (D-PoT re-plans from the history). Except
    the sub-goals in ``unvisited``: the episode never acted in their app, so they
    cannot have been done, whatever a later sub-goal shows (a person may do an errand's
    halves in another order: "book a ride and text Alex" after they opened Messages) —
    once every other sub-goal is done, the first of them is next, not COMPLETE.
    """
    progress = max(
        (i for i, s in enumerate(status)
         if s in ("seen", "typed", "more", "likely")
         or (s == "done" and intents[i].kind == "open_app")),
        default=-1,
    )
    for i, s in enumerate(status):
        if i < progress:
            continue
        if s in ("todo", "typed", "more"):
            return i
    # Before the task is declared done: a sub-goal in an app never opened is still to do.
    return next((i for i in sorted(unvisited) if status[i] == "todo"), None)


def _finish_here_first(intents: list[Intent], status: list[str], current: int | None,
                       view: "ScreenView", visits: _Visits) -> int | None:
    """An errand's part in the app on screen goes on before another app is opened, once
    work in it has begun (a person opened Messages and the conversation: the text comes
    first, then the ride) — one change of app instead of three."""
    if current is None or not visits.acting_here:
        return current
    app = intents[current].app
    if app is None or app.package == view.package:
        return current
    return next((i for i, intent in enumerate(intents)
                 if intent.app is not None and intent.app.package == view.package
                 and status[i] in ("todo", "typed", "more")), current)


_MESSAGE_VERBS = frozenset(
    "send text message say saying tell reply search find type enter write named call labell "
    "label get show".split()
)
# Which confirmation finishes which request ("added to cart" does not finish "buy").
_SUCCESS_FOR: dict[str, tuple[str, ...]] = {
    "order": ("placed", "thank you", "confirmed", "on its way"),
    "get": ("placed", "thank you", "confirmed", "on its way"),
    "buy": ("paid", "purchased", "placed", "thank you", "confirmed"),
    "checkout": ("paid", "purchased", "placed", "thank you", "confirmed", "on its way"),
    "send": ("sent",),
    "add": ("added", "in your cart", "saved"),
    "save": ("saved",),
    "book": ("booked", "confirmed"),
    "direction": ("navigating", "route started", "arriving"),
}


def _remaining_words(intent: Intent) -> list[str]:
    typed = set(tokens(intent.typed or ""))
    return [t for t in dict.fromkeys(tokens(intent.text))
            if t not in typed and t not in _MESSAGE_VERBS]


def _unseen_words(intent: Intent, view: ScreenView) -> list[str]:
    # Only statements count: a "Directions" button invites the step, it does not show it done.
    shown = set(tokens(" ".join(
        n.text + " " + n.content_desc for n in view.nodes
        if not (n.clickable or is_editable(n)) or n.checked
    )))
    app_words = set(tokens(intent.app.name)) if intent.app else set()
    return [t for t in _remaining_words(intent) if t not in shown and t not in app_words]


_NEGATED_STATE = re.compile(r"^\s*(?:not|un|no)\b|^\s*un", re.I)


def _state_shows(intent: Intent, view: ScreenView) -> bool:
    """The control the last tap flipped now states the sub-goal's verb as done: "star the
    email" and the button reads "Starred" (it read "Not starred"); "pin it" → "Pinned",
    "mute" → "Muted", "follow" → "Following". A label that depends on state is the
    screen's own answer."""
    words = re.findall(r"[a-z]+", without_politeness(intent.text).lower())
    forms = _verb_forms(words[0] if words else "")
    if not forms:
        return False
    # "sign my Pixel 7 out": the particle is part of the verb — "Signed in" is the
    # opposite state, not the one asked for
    particle = next((w for w in words[1:5] if w in _PARTICLES), None)
    for node in view.nodes:
        label = (node.text or node.content_desc or "").strip()
        said = re.findall(r"[a-z]+", label.lower())
        if not said or said[0] not in forms or _NEGATED_STATE.match(label):
            continue
        shown = said[1] if len(said) > 1 and said[1] in _PARTICLES else None
        if shown == particle:
            return True
    return False


_PARTICLES = frozenset("in out on off up down".split())


def _verb_forms(verb: str) -> set[str]:
    """How a label states that ``verb`` was done: star → starred, pin → pinned, save →
    saved, follow → following / follows (empty for words too short to tell)."""
    if len(verb) < 3:
        return set()
    return {verb + "ed", verb + "d", verb + verb[-1] + "ed", verb + "ing", verb + "s"}


def _request_verbs(intent: Intent) -> set[str]:
    """The verbs of ``_SUCCESS_FOR`` the sub-goal says as a request says them: "book a
    stay", not a noun made of one ("star the barcelona *booking* email")."""
    text = normalise_text(intent.text)
    said = set(re.findall(r"[a-z]+", text)) | set(tokens(intent.text, keep_stopwords=True)
                                                  if "direction" in text else ())
    return said & _SUCCESS_FOR.keys()


def _requests(intent: Intent) -> bool:
    """The sub-goal asks for something a confirmation can answer (order, buy, book …)."""
    return bool(_request_verbs(intent))


def _success_fits(success: str, intent: Intent) -> bool:
    """The confirmation answers the sub-goal's request: "Booked" for "book a stay" (the
    email's own "Your booking is confirmed" is not the agent's doing)."""
    lowered = success.lower()
    return any(any(p in lowered for p in _SUCCESS_FOR[verb]) for verb in _request_verbs(intent))


def _scrolled_in_vain(ctx: StepContext) -> bool:
    """A scroll already happened on this screen and the agent is still looking: the list
    did not hold the target where a first scroll would show it, so another is a guess
    (on the development suites a second scroll at 4 was right 1 time in 6)."""
    for entry in reversed(ctx.history):
        kind = entry.action.get("type")
        if kind == SCROLL:
            return True
        if kind != WAIT:
            return False
    return False


def _list_of_kind(view: ScreenView, *, checkable: bool) -> bool:
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


def _success_text(view: ScreenView) -> str:
    """A confirmation the screen states in plain text ("Order placed", "Thank you!").

    Buttons are not read: a "Done" button says nothing about what happened.
    """
    lists = [n for n in view.nodes if n.scrollable or "RecyclerView" in n.cls or "ListView" in n.cls]
    for node in view.nodes:
        if node.clickable or is_editable(node) or not node.text:
            continue
        if any(lst.contains(*node.center) for lst in lists):
            continue  # a message or item in a list, not the screen's own statement
        match = _SUCCESS_RE.search(node.text)
        if match:
            return match.group(0)
    return ""


# Buttons whose tap commits what a form or a screen describes: the request is then sent.
_COMMIT_VERBS = frozenset(
    "confirm book schedule place pay submit buy order checkout purchase reserve save".split())


def _committed(entry: HistoryEntry, intent: Intent) -> bool:
    """The step tapped a button that commits a request — "Confirm ride", "Place order",
    or the sub-goal's own verb ("Cancel ride" for "cancel friday's ride") — and the
    screen changed."""
    action = entry.action or {}
    if action.get("type") != CLICK or not entry.screen_changed:
        return False
    words = str(action.get("element") or "").lower().split()
    if not words:
        return False
    verb = (intent.text.lower().split() or [""])[0]
    if words[0] in _COMMIT_VERBS or (len(words) > 1 and words[0] == verb):
        return True
    # a control that states its state and was flipped to the sub-goal's: "Not starred"
    # tapped for "star the email" (it reads "Starred" now)
    return len(words) == 2 and words[0] == "not" and words[1] in _verb_forms(verb)


# First words that repeat without confirming anything: "Continue" twice is two pages of
# a wizard, "Increase" twice a stepper on its way.
_NOT_A_GO_AHEAD = frozenset(
    "ok okay continue next done close back yes no not got increase decrease".split())


def _commit_buttons(view: ScreenView) -> list[UINode]:
    """The buttons on screen that save or send what the screen holds ("Add to trip",
    "Extend", "Pay"), stepper buttons aside."""
    found = []
    for node in view.candidates:
        if not node.clickable or not node.enabled or node.key in view.settled:
            continue
        words = _plain(node.label or "").split()
        if words and words[0] in _SUBMIT_VERBS:
            found.append(node)
    return found


def _other_buttons(view: ScreenView) -> bool:
    """A button on screen besides the steppers' and the ways out (up, back, home)."""
    return any(node.clickable and node.enabled and "Button" in node.cls
               and node.key not in view.settled and not _is_system_nav(node)
               for node in view.candidates)


def _confirmed(history: list[HistoryEntry], end: int | None = None) -> bool:
    """The last tap (of ``history[:end]``) said again the verb of the tap before it —
    "Stop parking" then "Stop", "Place order" twice, "Remove vehicle" then "Remove" — and
    both changed the screen: the go-ahead of the confirmation the first one asked for, so
    the request is sent off.

    On the development suites' teacher paths, 44 steps after such a pair wanted COMPLETE
    and the heuristic pressed back at all of them (docs/heuristic.md)."""
    end = len(history) if end is None else end
    if end < 2:
        return False
    pair = history[end - 2:end]
    if any(e.action.get("type") != CLICK or not e.screen_changed for e in pair):
        return False
    labels = [_history_labels([e]) for e in pair]
    if not all(labels):
        return False
    first, second = (label[0].split() for label in labels)
    if not first or not second or first[-1].lower() == "row" or second[-1].lower() == "row":
        return False  # a row's id tail ("mila kid row"), not a button's words
    verb = first[0].lower()
    return verb == second[0].lower() and verb.isalpha() and verb not in _NOT_A_GO_AHEAD


_SUBMIT_WORDS = frozenset({"send", "search", "save", "ok", "post", "submit", "go", "apply", "confirm"})
_NAV_DESCS = frozenset({"navigate up", "back", "home", "more options"})


def _is_system_nav(node: UINode) -> bool:
    """Back, Home and the toolbar's up arrow: ways out of a screen, never a task's target."""
    return "systemui" in node.package or (node.content_desc or "").strip().lower() in _NAV_DESCS


def _field_is_empty(node: UINode) -> bool:
    # uiautomator shows an empty EditText's hint as its text.
    hint = node.extra.get("hint")
    return not node.text.strip() or (isinstance(hint, str) and node.text == hint)


def _field_fits(node: UINode, intent: Intent) -> bool:
    """The field's label fits what is typed: a search box for a search, a message body
    for a message."""
    words = set(tokens(node_label_text(node), keep_stopwords=True))
    goal = set(tokens(intent.text, keep_stopwords=True))
    if "search" in goal:
        return "search" in words
    if goal & {"message", "text", "say", "saying", "send", "tell", "reply"}:
        return bool(words & {"message", "text", "body", "reply"})
    if goal & {"label", "labell", "labelled", "labeled", "named", "titled"}:
        return bool(words & {"label", "name", "title"})
    return False


def node_label_text(node: UINode) -> str:
    hint = node.extra.get("hint")
    return " ".join(p for p in (node.text, node.content_desc, node.resource_id.rsplit("/", 1)[-1],
                                hint if isinstance(hint, str) else "") if p)


def _display_label(node: UINode, nodes: list[UINode]) -> str:
    """What a person calls the node: its text, else its row's caption, else its id."""
    return node.text or node.content_desc or row_label(node, nodes) or node.label


def _app_serves_goal(intents: list[Intent], view: ScreenView, ctx: StepContext) -> bool:
    """The foreground app is where the goal (one of its sub-goals) happens — or an app we
    know nothing about, which may be. A form another errand left open in a known app that
    the goal does not need is no reason to ask the user anything."""
    here = _foreground_app(ctx, view)
    if here is None or view.launcher:
        return True
    wanted = [intent.app for intent in intents if intent.app is not None]
    if wanted:
        return any(app.package == here.package for app in wanted)
    best = _app_match(ctx.goal, tuple(ctx.apps))[0]
    return best is not None and best.package == here.package


def _app_ok(intent: Intent, view: ScreenView) -> bool:
    return intent.app is None or view.package == intent.app.package


def _related(a: UINode, b: UINode, nodes: list[UINode]) -> bool:
    """Same on-screen target: one contains the other's centre (a row and its label)."""
    return a.contains(*b.center) or b.contains(*a.center)


def _distinct(ranked: list[NodeScore], nodes: list[UINode]) -> list[NodeScore]:
    """Drop scores of nodes that are the same target as a better one (row vs its text)."""
    out: list[NodeScore] = []
    for score in ranked:
        if any(_related(score.node, kept.node, nodes) for kept in out):
            continue
        out.append(score)
    return out


def _rank_fields(fields: list[UINode], hint: str, nodes: list[UINode]) -> tuple[UINode, float, float]:
    scored = sorted(
        ((s.total, s.node) for s in score_nodes(nodes, hint) if s.node in fields),
        key=lambda pair: -pair[0],
    )
    if not scored:
        return fields[0], 0.0, 0.0
    second = scored[1][0] if len(scored) > 1 else 0.0
    return scored[0][1], scored[0][0], second


def _named_option(group: ChoiceGroup, nodes: list[UINode], goal: str) -> tuple[UINode, float] | None:
    """The option of ``group`` the goal names (exactly, or through a synonym), if one."""
    goal_toks = set(tokens(goal, keep_stopwords=True))
    hits: list[tuple[float, UINode]] = []
    for option in group.options:
        label = option.label or row_label(option, nodes)
        # Option labels carry details in brackets ("Standard (free, 3–5 days)").
        words = set(tokens(re.sub(r"\(.*?\)", " ", label), keep_stopwords=True))
        if words and all(_word_named(w, goal_toks) for w in words):
            hits.append((1.0, option))
    if len(hits) == 1:
        return hits[0][1], hits[0][0]
    if len(hits) > 1:
        # "5 stars and a $2 tip" names both "2 stars" and "5 stars" word by word; the
        # label the goal says as a phrase is the one meant.
        said = f" {normalise_words(goal)} "
        phrased = [h for h in hits
                   if f" {normalise_words(h[1].label or row_label(h[1], nodes))} " in said]
        if len(phrased) == 1:
            return phrased[0][1], 1.0
        # "large" and "extra large" both named: the longer label is the precise one.
        hits.sort(key=lambda h: -len((h[1].label or "")))
        longest = len(hits[0][1].label or "")
        tied = sum(1 for h in hits if len(h[1].label or "") == longest)
        return hits[0][1], 0.9 if tied == 1 else 0.6
    return None


def _other_named_option(view: ScreenView, intent: Intent) -> UINode | None:
    """An option on screen that the toggle's own words name ("at high brightness") and
    that is not chosen, while another of its group is: the rest of the sub-goal."""
    for group in view.groups:
        chosen = group.checked
        if chosen is None:
            continue  # an open choice is _open_choice's / _pick_named_option's
        named = _named_option(group, view.nodes, intent.target)
        if named is not None and named[0] is not chosen and named[1] >= 0.99:
            return named[0]
    return None


def _word_named(word: str, goal_tokens: set[str]) -> bool:
    """``word`` occurs in the goal, allowing inflection ("cycle" names "Cycling")."""
    if word in goal_tokens:
        return True
    return len(word) >= 4 and any(
        len(g) >= 4 and g[:4] == word[:4] and abs(len(g) - len(word)) <= 3 for g in goal_tokens
    )


# A shop's purchase funnel, in order; buttons are matched by their whole label.
_FUNNEL: tuple[frozenset[str], ...] = (
    frozenset({"add to cart", "add to bag", "add to basket"}),
    frozenset({"view cart", "go to cart", "view bag", "view basket"}),
    frozenset({"checkout", "check out", "proceed to checkout"}),
    frozenset({"pay", "pay now", "place order", "buy now", "confirm order", "complete purchase"}),
)
_BUY_RE = re.compile(r"\b(buy|purchase|check\s*out|pay for)\b", re.I)
_ADD_TO_CART_RE = re.compile(r"\badd\b.*\b(?:to\s+(?:my|the)\s+)?(?:cart|bag|basket)\b", re.I)


_TIME_RE = re.compile(r"\b(\d{1,2}:\d{2})(?:\s*([AaPp])\.?\s?[Mm]\b\.?)?")
_HOUR_RE = re.compile(r"\b(\d{1,2})\s*([AaPp])\.?\s?[Mm]\b")  # "6am", "7 p.m."
_MORNING_RE = re.compile(r"\b(?:morning|dawn|sunrise|breakfast)\b", re.I)
_EVENING_RE = re.compile(r"\b(?:afternoon|evening|tonight|night|dinner|bedtime)\b", re.I)
# The label runs to the end, or to where the body begins ("a note called Gate code that
# says 4821#": the title is "Gate code").
_LABEL_RE = re.compile(r"\b(?:(?:labell?ed|named|called|titled)|(?:call|name|label|title)\s+it)\s+"
                       r"[\"'“‘]?(.+?)[\"'”’]?\s*(?:[.!?]?\s*$|,?\s+(?:that|which)\s+says?\b"
                       r"|,?\s+saying\b|,?\s+with\s+(?:the\s+)?(?:text|body|note|message)\b)", re.I)
_SAVE_LABELS = frozenset({"save", "ok", "done", "set", "add"})
# The first words of buttons that save or send what a screen holds (``_commit_buttons``).
_SUBMIT_VERBS = _COMMIT_VERBS | _SAVE_LABELS | frozenset(
    "apply update extend start send continue next register request".split())
_SIGN_IN_LABELS = frozenset({"sign in", "log in", "login", "signin", "continue", "next"})
_CREATE_RE = re.compile(r"^\s*(?:please\s+)?(?:set|add|create|make|schedule)\b|\bnew\b", re.I)


def _form_values(instruction: str) -> list[tuple[str, str]]:
    """The (kind, value) pairs an instruction gives for a form: a time, a label."""
    values: list[tuple[str, str]] = []
    time = _TIME_RE.search(instruction)
    hour = _HOUR_RE.search(instruction)
    if time:
        meridiem = f" {time.group(2).upper()}M" if time.group(2) else ""
        if not meridiem and int(time.group(1).split(":")[0]) <= 12:
            # "up at 6:45 tomorrow morning": the day part says which half of the clock
            meridiem = (" AM" if _MORNING_RE.search(instruction)
                        else " PM" if _EVENING_RE.search(instruction) else "")
        values.append(("time", time.group(1) + meridiem))
    elif hour and 1 <= int(hour.group(1)) <= 12:
        values.append(("time", f"{int(hour.group(1))}:00 {hour.group(2).upper()}M"))
    label = _LABEL_RE.search(instruction)
    if label:
        values.append(("label", label.group(1).strip()))
        body = _BODY_RE.search(instruction, label.end(1))
        if body and body.group(1).strip(" \"'“”‘’"):
            values.append(("body", body.group(1).strip().strip("\"'“”‘’").rstrip(".!?").strip()))
    return values


# What a titled thing says ("… called Gate code that says 4821#").
_BODY_RE = re.compile(r"\b(?:(?:that|which)\s+says?|saying|with\s+(?:the\s+)?(?:text|body|note|message))"
                      r"\s*:?\s*(.+?)\s*$", re.I)


def _field_kind(node: UINode) -> str:
    words = set(re.findall(r"[a-z]+", node_label_text(node).lower()))
    if "time" in words:
        return "time"
    if words & {"label", "name", "title"}:
        return "label"
    if words & {"body", "note", "content", "description"}:
        return "body"
    return ""


_SETTING_RE = re.compile(r"^\s*([^:]{1,30}):\s*(.+?)\s*$")


def _setting_shows(intent: Intent, view: ScreenView) -> bool:
    """A control that displays its current value ("Sort: lowest price") already shows what
    the sub-goal asks ("sort them by lowest price"): the StaR rule beyond switches —
    perceive the state, act only if it differs."""
    if intent.kind not in ("click", "select"):
        return False
    target = set(tokens(intent.target))
    if not target:
        return False
    for node in view.nodes:
        match = _SETTING_RE.match(node.text or "")
        if not match:
            continue
        name, value = set(tokens(match.group(1))), set(tokens(match.group(2)))
        if name and value and name <= target and value <= target:
            return True
    return False


def _plain(label: str) -> str:
    """A label's words, lower-cased, without the synonyms of ``tokens`` ("Pay" is not
    "Checkout" here: they are two steps of the funnel)."""
    return " ".join(re.findall(r"[a-z0-9]+", label.lower()))


def _funnel_goal(instruction: str) -> int | None:
    """How far along the funnel the instruction goes: to Pay, to Add to cart, or not at all."""
    if _BUY_RE.search(instruction):
        return len(_FUNNEL) - 1
    if _ADD_TO_CART_RE.search(instruction):
        return 0
    return None


def _item_query(instruction: str, apps: Any) -> str:
    """The item's name as the instruction gives it: the longest run of capitalised words
    ("Pulse Sport Earbuds"), with the noun right after it ("Stride Runner shoes")."""
    app_names = {normalise_words(a.name) for a in apps or ()}
    words = re.findall(r"[\w'’$-]+", instruction)
    best: list[str] = []
    run: list[str] = []
    for i, word in enumerate(words + [""]):
        if i > 0 and word[:1].isupper() and normalise_words(word) not in app_names:
            run.append(word)
            continue
        if len(run) > len(best):
            best = run + ([word] if word and tokens(word) and word[:1].islower() else [])
        run = []
    return " ".join(best)


def _item_words(instruction: str, apps: Any) -> set[str]:
    return set(tokens(" ".join(w for w in _item_query(instruction, apps).split()
                               if w[:1].isupper())))


def _names(text: str) -> set[str]:
    """Words ``text`` capitalises where a sentence does not start: names ("Sam", "Maps")."""
    out: set[str] = set()
    for sentence in re.split(r"[.!?:;]\s+", text):
        words = re.findall(r"[\w'’-]+", sentence)
        out.update(tokens(" ".join(w for w in words[1:] if w[:1].isupper())))
    return {word for word in out if len(word) > 1}  # not the "m" of "I'm"


def _names_elsewhere(view: ScreenView, ctx: StepContext, option_label: str) -> bool:
    """The instruction names an item (capitalised words, less the option's own and the
    apps' names) and none of those words is on this screen: what is on it is something
    else."""
    names = _names(ctx.instruction) - set(tokens(option_label))
    for app in ctx.apps:
        names -= set(tokens(app.name))
    if not names:
        return False
    return not names & set(tokens(view.text))


def _or_list(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " or " + items[-1]


_FUNCTION_WORDS = frozenset(
    "a an the to of for in on at and or is are be it its you your my me this that with from "
    "will can".split())
_TAPPED_LABEL = re.compile(r"^(?:CLICK|LONG_CLICK) '(?P<label>.+)'")


def _confirmation_of_last_tap(view: ScreenView, ctx: StepContext) -> UINode | None:
    """The button that goes ahead in a dialog the last tap opened, or None.

    The dialog counts as the tap's own confirmation when the last step was a tap that
    changed the screen and the dialog either asks a question that shares a word with the
    tapped label (an ad that pops up on entering a screen does not repeat the label that
    led there; a notice such as "Added to cart" asks nothing) or is an "are you sure?"
    (the sensitive-action policy's ``confirmations``), and exactly one of its buttons is
    not a way to dismiss it.
    """
    match = _dialog_opener(view, ctx)
    if match is None:
        return None
    buttons = [n for n in view.overlay if n.clickable and n.enabled and n.label]
    again = [b for b in buttons
             if b.label.strip().casefold() == match.group("label").strip().casefold()]
    if len(again) == 1 and len(buttons) > 1:
        # "Subscribe" → "Confirm subscription … [Cancel] [Subscribe]": the app asks again
        # in the tap's own words, question mark or not.
        return again[0]
    # Verbs matter here ("Open" → "Open the garage door?"), so keep the words the
    # recommender drops, less the ones every sentence has.
    tapped = set(tokens(match.group("label"), keep_stopwords=True)) - _FUNCTION_WORDS - set(
        _DISMISS_WORDS)
    others = [n for n in view.overlay if n.text and n not in buttons]
    said = set(tokens(" ".join(n.text for n in others), keep_stopwords=True)) - _FUNCTION_WORDS
    asks_to_confirm = any(
        phrase in " ".join(n.text.lower().replace("\u2019", "'") for n in others)
        for phrase in current_policy().confirmations)
    if not asks_to_confirm and not (tapped & said and any("?" in n.text for n in others)):
        return None  # a notice ("Added to cart") is news, not a question to answer
    ahead = [b for b in buttons
             if not any(b.label.strip().lower() == w or w in b.label.lower().split()
                        for w in _DISMISS_WORDS + ("keep", "no", "back"))]
    return ahead[0] if len(ahead) == 1 else None


def _choice_left_in(view: ScreenView, goal: str) -> bool:
    """A choice group inside the dialog has nothing chosen, or the goal names one of its
    options that is not the chosen one."""
    inside = {id(n) for n in view.overlay}
    for group in view.groups:
        if not group.options or not all(id(o) in inside for o in group.options):
            continue
        named = _named_option(group, view.nodes, goal)
        if group.checked is None or (named is not None and not named[0].checked):
            return True
    return False


def _dialog_opener(view: ScreenView, ctx: StepContext) -> re.Match[str] | None:
    """The tap that opened the dialog on screen (its summary's match), or None: the last
    tap, or — when the last taps chose options inside this dialog ("21 days" in "Borrow
    …?") — the tap before them. Only a tap that changed the screen opens anything."""
    options = {n.label.strip().casefold() for n in view.overlay
               if n.label and (n.checkable or n.label.lower().startswith(("increase ", "decrease ")))}
    for entry in reversed(ctx.history):
        match = _TAPPED_LABEL.match(entry.summary or "")
        if match is None or not entry.screen_changed:
            return None
        if match.group("label").strip().casefold() not in options:
            return match
    return None


# Buttons that only say "go ahead": their dialog's question carries the meaning.
_GO_AHEAD_WORDS = frozenset("ok okay yes confirm continue proceed done next apply".split())


def _goal_asks_for(button_label: str, ctx: StepContext) -> bool:
    """The goal asks for what the confirmation commits: the verb of the go-ahead button,
    or of the tapped label when the button only says "OK"/"Confirm", is one the goal uses
    ("Cancel ride" for "cancel my ride") or a verb that completes a request
    (``_COMMIT_VERBS``: "Place order", "Book"; money is the policy's to ask about)."""
    tapped = ""
    if ctx.history:
        match = _TAPPED_LABEL.match(ctx.history[-1].summary or "")
        tapped = match.group("label") if match else ""
    goal = set(tokens(ctx.goal, keep_stopwords=True))
    for label in (button_label, tapped):
        words = [w for w in tokens(label, keep_stopwords=True) if w not in _FUNCTION_WORDS]
        if not words or (label is button_label and words[0] in _GO_AHEAD_WORDS):
            continue  # "Confirm": the tap before it says what is confirmed
        return words[0] in goal or words[0] in _COMMIT_VERBS
    return True


def _overlay_confidence(kind: str, button: UINode, buttons: list[UINode]) -> float:
    """How sure the way out of an overlay is (OS-Kairos §3: environmental hijack).

    An ad or pop-up the goal never mentions, with exactly one dismiss control, and an error
    screen with a Retry: the way out is unambiguous and undoes nothing, so the agent acts.
    A permission prompt is the user's privacy decision and an overlay with several ways
    out is a guess: both go to a person.
    """
    label = button.label.strip().lower()
    if kind == "error" and any(word in label.split() or label == word for word in _RETRY_WORDS):
        return 4.0
    if kind == "dialog":
        dismissers = [b for b in buttons
                      if any(b.label.strip().lower() == w or w in b.label.lower().split()
                             for w in _DISMISS_WORDS)]
        if len(dismissers) == 1:
            return 4.0
    return 2.0
