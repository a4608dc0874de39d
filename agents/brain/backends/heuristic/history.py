"""What the episode has done so far, read from its compact history.

Which labels were tapped, what was typed, which apps were opened, and whether a tap
committed a request ("Confirm ride") or went ahead with the confirmation it asked for.
"""
from __future__ import annotations

import re

from agents.brain.backends.base import HistoryEntry, StepContext
from agents.brain.backends.heuristic.intents import Intent, verb_forms
from devices.actions import CLICK, OPENAPP, SCROLL, TYPE, WAIT


def history_labels(history: list[HistoryEntry]) -> list[str]:
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


def typed_texts(history: list[HistoryEntry]) -> list[str]:
    return [
        str(entry.action.get("text", "")).strip().lower()
        for entry in history if entry.action.get("type") == TYPE
    ]


def opened_apps(history: list[HistoryEntry]) -> list[str]:
    return [str(e.action.get("app", "")).lower() for e in history if e.action.get("type") == OPENAPP]


# Buttons whose tap commits what a form or a screen describes: the request is then sent.
COMMIT_VERBS = frozenset(
    "confirm book schedule place pay submit buy order checkout purchase reserve save".split())


def committed(entry: HistoryEntry, intent: Intent) -> bool:
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
    if words[0] in COMMIT_VERBS or (len(words) > 1 and words[0] == verb):
        return True
    # a control that states its state and was flipped to the sub-goal's: "Not starred"
    # tapped for "star the email" (it reads "Starred" now)
    return len(words) == 2 and words[0] == "not" and words[1] in verb_forms(verb)


# First words that repeat without confirming anything: "Continue" twice is two pages of
# a wizard, "Increase" twice a stepper on its way.
_NOT_A_GO_AHEAD = frozenset(
    "ok okay continue next done close back yes no not got increase decrease".split())


def confirmed(history: list[HistoryEntry], end: int | None = None) -> bool:
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
    labels = [history_labels([e]) for e in pair]
    if not all(labels):
        return False
    first, second = (label[0].split() for label in labels)
    if not first or not second or first[-1].lower() == "row" or second[-1].lower() == "row":
        return False  # a row's id tail ("mila kid row"), not a button's words
    verb = first[0].lower()
    return verb == second[0].lower() and verb.isalpha() and verb not in _NOT_A_GO_AHEAD


def scrolled_in_vain(ctx: StepContext) -> bool:
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


def back_is_the_way(ctx: StepContext) -> bool:
    """The agent's own last tap led here and changed the screen: a screen it chose that
    holds nothing of the goal is a wrong turn, and back is the way."""
    last = ctx.history[-1] if ctx.history else None
    return last is not None and last.by == "agent" and last.screen_changed and \
        last.action.get("type") == CLICK
