"""Evidence every backend can state about a proposal, read from the step's context.

Pure Python. A backend's 1–5 confidence is a claim; the calibrator (``agents.brain.calibration``)
learns P(right) from *why* the backend is sure. These are the context features any
backend shares — does the instruction name the target element and the app, is the agent
repeating itself, has a person already had to step in — so that the heuristic and the
model backends state them the same way (docs/models.md, "Evidence").
"""
from __future__ import annotations

import re
from typing import Any

from agents.brain.backends.base import StepContext
from agents.brain.elements import node_label
from agents.brain.text import tokens
from devices.actions import POINT_TYPES, Action, validate_action
from devices.uitree import node_at


def context_evidence(action: Action | None, ctx: StepContext) -> dict[str, Any]:
    """Features of ``action`` in ``ctx`` that do not depend on how it was chosen.

    * ``action`` — the action type;
    * ``names_target`` — share of the target element's label words (of the app's name,
      for OPENAPP) the goal contains (1.0: the goal names it; absent without a target);
    * ``names_app`` — the goal names an installed app; ``in_named_app`` — the foreground
      app is one of those it names;
    * ``app_mention`` (OPENAPP of an app whose name the goal contains) — ``"name"`` when
      the words point at the app ("in Coffee", "open coffee", "the coffee app", a coined
      name such as "RideNow"), ``"word"`` when the name is only an everyday word in the
      sentence ("we don't need coffee anymore"): that one names a thing, not an app;
    * ``repeats`` — how often this same action was already performed in the episode;
      ``after_no_change`` — the previous action left the screen unchanged;
    * ``operator_steps`` — steps a person already decided in this episode;
      ``history`` — steps so far (capped at 20: long episodes are alike);
    * ``detected`` (only when true) — the screen was read from its screenshot (OCR text,
      switches found by shape, a dataset's detected elements: nodes marked
      ``extra["detected"]``), not from a UI tree: a misread is possible (issue 27).
    """
    goal_words = set(tokens(ctx.goal))
    evidence: dict[str, Any] = {"action": action.type if action is not None else "none"}
    nodes = ctx.observation.nodes
    if action is not None and action.type in POINT_TYPES and action.x is not None:
        node = node_at(nodes, action.x, action.y, clickable_only=True) or node_at(
            nodes, action.x, action.y)
        words = set(tokens(node_label(node, nodes))) if node is not None else set()
        evidence["names_target"] = round(len(words & goal_words) / len(words), 4) if words else 0.0
    elif action is not None and action.type == "OPENAPP" and action.app:
        words = set(tokens(action.app))
        evidence["names_target"] = round(len(words & goal_words) / len(words), 4) if words else 0.0
        mention = app_mention(ctx.goal, action.app)
        if mention is not None:
            evidence["app_mention"] = mention
    named = [app for app in ctx.apps if app.name and set(tokens(app.name)) <= goal_words]
    evidence["names_app"] = bool(named)
    foreground = ctx.observation.app or ""
    evidence["in_named_app"] = any(foreground == app.package for app in named)
    repeats = 0
    for entry in ctx.history:
        previous = validate_action(entry.action)
        if action is not None and isinstance(previous, Action) and previous.same_as(action):
            repeats += 1
    evidence["repeats"] = repeats
    evidence["after_no_change"] = bool(ctx.history) and not ctx.history[-1].screen_changed
    evidence["operator_steps"] = sum(1 for entry in ctx.history if entry.by != "agent")
    evidence["history"] = min(len(ctx.history), 20)
    if any(node.extra.get("detected") for node in nodes):
        evidence["detected"] = True
    return evidence


# Words before an app's name that make it the app ("in Coffee", "open coffee", "with
# RideNow"), and after it ("the coffee app").
_APP_CUES_BEFORE = frozenset(
    "in on open launch start use using via with from into inside through to".split())
_APP_CUES_AFTER = frozenset({"app", "apps", "application"})
# Words that may follow an app's name in the same clause without making the name a
# describing word ("with the Clock for 7", "in the Coffee and then…"): general English.
_FOLLOWS_A_NAME = frozenset(
    "and or to for then please too so now at on in by from with without until when as "
    "if but instead again later today tonight tomorrow".split())


def _same_clause(rest: str) -> bool:
    """The words right after a match continue its clause (no punctuation between)."""
    return re.match(r"\s*[A-Za-z']", rest) is not None


_NAME_PART_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def app_mention(goal: str, app_name: str) -> str | None:
    """How ``goal`` mentions the app called ``app_name``: ``"name"``, ``"word"`` or None
    (not at all).

    Many apps are called by everyday words (Coffee, Clock, Pantry): "we don't need coffee
    anymore, remove it" names a thing on a shopping list, not the Coffee app. A mention
    is a name when the app's name is coined (inner capitals or digits: "RideNow"),
    capitalised inside a sentence, preceded by a word that points at an app ("in",
    "open", "with"… optionally with "the"/"my") or followed by "app"; otherwise a word.
    """
    parts = _NAME_PART_RE.findall(app_name or "")
    if not parts:
        return None
    # "setting" mentions Settings, "map" Maps: the last part with or without its plural s
    last = parts[-1][:-1] if len(parts[-1]) > 3 and parts[-1].lower().endswith("s") else parts[-1]
    words = [re.escape(p) for p in parts[:-1]] + [re.escape(last) + "s?"]
    pattern = re.compile(r"\b" + r"[\s_-]*".join(words) + r"\b", re.I)
    matches = list(pattern.finditer(goal or ""))
    if not matches:
        return None
    if len(parts) > 1 or any(p.isdigit() for p in parts) or not app_name.isalpha():
        return "name"  # "RideNow", "Dinner Dash", "K9": nobody says these in passing
    for match in matches:
        before = re.findall(r"[A-Za-z']+", goal[:match.start()])
        after = re.findall(r"[A-Za-z']+", goal[match.end():])
        sentence_start = not goal[:match.start()].strip() or re.search(
            r"[.!?:;]\s*[\"'“‘(]?\s*$", goal[:match.start()]) is not None
        if match.group(0)[0].isupper() and not sentence_start:
            return "name"
        lowered = [w.lower() for w in before[-2:]]
        if lowered and lowered[-1] in _APP_CUES_BEFORE:
            return "name"
        if (len(lowered) == 2 and lowered[-1] in {"the", "my"} and lowered[0] in _APP_CUES_BEFORE
                and not (after and after[0].lower() not in _APP_CUES_AFTER
                         and after[0].lower() not in _FOLLOWS_A_NAME
                         and _same_clause(goal[match.end():]))):
            # "with the Coffee", "on my clock" — unless a word follows that the name only
            # describes: "with the coffee stain", "in the clock radio"
            return "name"
        if after and after[0].lower() in _APP_CUES_AFTER:
            return "name"
    return "word"
