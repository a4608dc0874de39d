"""Toggles and controls that show their state: act only where the state differs.

StaR (Fig. 12): perceive the switch's state first, and tap it only when it differs from
the one the goal wants. The same rule reads labels that state their own state
("Starred", "Sort: lowest price") as a sub-goal already done.
"""
from __future__ import annotations

import re

from agents.brain.backends.base import StepContext
from agents.brain.backends.heuristic.choice import Choice, match_confidence
from agents.brain.backends.heuristic.intents import Intent, verb_forms
from agents.brain.backends.heuristic.options import other_named_option
from agents.brain.backends.heuristic.screen import ScreenView, display_label, distinct
from agents.brain.backends.heuristic.targets import click_best
from agents.brain.planning import without_politeness
from agents.brain.elements import row_label
from agents.brain.recommend import score_nodes
from agents.brain.text import tokens
from devices.actions import CLICK, COMPLETE, Action
from devices.uitree import UINode


_NEGATED_STATE = re.compile(r"^\s*(?:not|un|no)\b|^\s*un", re.I)


_PARTICLES = frozenset("in out on off up down".split())


_SETTING_RE = re.compile(r"^\s*([^:]{1,30}):\s*(.+?)\s*$")


def find_switch(intent: Intent, view: ScreenView) -> tuple[UINode | None, float, float]:
    """The checkable node the toggle names, its match score, and the runner-up's."""
    scores = [
        s for s in score_nodes(view.nodes, intent.target)
        if s.node.checkable and "Radio" not in s.node.cls
    ]
    ranked = distinct(sorted(scores, key=lambda s: -s.total), view.nodes)
    if not ranked or ranked[0].total <= 0:
        return None, 0.0, 0.0
    second = ranked[1].total if len(ranked) > 1 else 0.0
    return ranked[0].node, ranked[0].total, second


def toggle(intent: Intent, view: ScreenView, ctx: StepContext) -> Choice:
    switch, score, second = find_switch(intent, view)
    state_word = "on" if intent.desired else "off"
    if switch is not None and score >= 0.5:
        label = display_label(switch, view.nodes)
        current = "on" if switch.checked else "off"
        if switch.checked == intent.desired:  # StaR Fig. 12: no toggle needed
            option = other_named_option(view, intent)
            if option is not None:  # "lights on at high brightness": High is left
                x, y = option.center
                name = option.label or row_label(option, view.nodes)
                return Choice(Action(CLICK, x=x, y=y, element=name), 4.0,
                              f"'{label}' is {current} as the goal wants; it also names "
                              f"'{name}', not chosen yet.", [option.key])
            return Choice(Action(COMPLETE), 4.0,
                          f"'{label}' is currently {current}, as the goal wants.")
        x, y = switch.center
        confidence = match_confidence(score, second)
        if switch.key in ctx.excluded_elements:
            confidence = min(confidence, 2.0)
        return Choice(
            Action(CLICK, x=x, y=y, element=label or None), confidence,
            f"The switch '{label}' is currently {current}, while the goal wants it "
            f"{state_word}; clicking it.",
            [switch.key],
        ).matched(score, second)
    # Not on this screen: navigate towards it (a row named like the target), else scroll.
    return click_best(intent, view, ctx, navigating=True)


def state_shows(intent: Intent, view: ScreenView) -> bool:
    """The control the last tap flipped now states the sub-goal's verb as done: "star the
    email" and the button reads "Starred" (it read "Not starred"); "pin it" → "Pinned",
    "mute" → "Muted", "follow" → "Following". A label that depends on state is the
    screen's own answer."""
    words = re.findall(r"[a-z]+", without_politeness(intent.text).lower())
    forms = verb_forms(words[0] if words else "")
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


def setting_shows(intent: Intent, view: ScreenView) -> bool:
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
