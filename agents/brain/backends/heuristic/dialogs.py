"""Dialogs: what to do about something that covers the screen.

A pop-up, a permission prompt, an error or a loading screen the goal does not mention
is dealt with first (OS-Kairos §3, environmental hijack): dismissed, allowed, retried or
waited out — alone only where the way out is unambiguous. A dialog that asks to confirm
the tap that opened it is part of the task, and is confirmed alone only when the goal
asked for that tap.
"""
from __future__ import annotations

import re

from agents.brain.backends.base import StepContext
from agents.brain.backends.heuristic.choice import Choice
from agents.brain.backends.heuristic.history import COMMIT_VERBS
from agents.brain.backends.heuristic.options import choice_left_in
from agents.brain.backends.heuristic.screen import (
    DISMISS_WORDS, RETRY_WORDS, ScreenView, is_system_nav,
)
from agents.brain.text import tokens
from agents.brain.safety import current_policy
from devices.actions import CLICK, PRESS_BACK, WAIT, Action
from devices.uitree import UINode


_ALLOW_WORDS = ("allow", "while using the app", "only this time", "grant", "ok")


_FUNCTION_WORDS = frozenset(
    "a an the to of for in on at and or is are be it its you your my me this that with from "
    "will can".split())
_TAPPED_LABEL = re.compile(r"^(?:CLICK|LONG_CLICK) '(?P<label>.+)'")


# Buttons that only say "go ahead": their dialog's question carries the meaning.
_GO_AHEAD_WORDS = frozenset("ok okay yes confirm continue proceed done next apply".split())


def overlay(view: ScreenView, goal: str, ctx: StepContext) -> Choice | None:
    if not view.overlay_kind:
        return None
    goal_toks = set(tokens(goal))
    overlay_nodes = view.overlay or view.nodes
    words = set(tokens(" ".join(n.text + " " + n.content_desc for n in overlay_nodes)))
    if view.overlay_kind == "dialog":
        confirm = _confirmation_of_last_tap(view, ctx)
        if confirm is not None and choice_left_in(view, goal):
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
                return Choice(Action(CLICK, x=x, y=y, element=confirm.label), 4.0,
                              f"The app asks to confirm the last step; going ahead with "
                              f"'{confirm.label}'.")
            return Choice(Action(CLICK, x=x, y=y, element=confirm.label), 2.0,
                          f"The app asks to confirm '{confirm.label}', which the goal "
                          f"does not ask for; a person decides.")
    if view.overlay_kind == "dialog" and words and len(words & goal_toks) >= max(1, len(words) // 3):
        return None  # the goal talks about this dialog: it is part of the task
    buttons = [n for n in overlay_nodes if n.clickable and n.enabled and n.label]
    if view.overlay_kind == "loading":
        # Nothing to tap and a spinner: waiting is the only sensible step.
        confidence = 4.0 if not any(n.clickable for n in view.nodes
                                    if not is_system_nav(n)) else 2.0
        return Choice(Action(WAIT), confidence, "The screen is still loading; waiting for it.")
    preferred: tuple[str, ...]
    if view.overlay_kind == "permission":
        preferred = _ALLOW_WORDS
        why = "A permission prompt covers the screen; the task seems to need it, so allow."
    elif view.overlay_kind == "error":
        preferred = RETRY_WORDS + ("ok",) + DISMISS_WORDS
        why = "An error is shown; retrying."
    else:
        preferred = DISMISS_WORDS + ("ok",)
        why = "An unexpected pop-up covers the screen; dismissing it."
    for word in preferred:
        for button in buttons:
            if button.label.strip().lower() == word or word in button.label.lower().split():
                x, y = button.center
                return Choice(Action(CLICK, x=x, y=y, element=button.label),
                              _overlay_confidence(view.overlay_kind, button, buttons),
                              why + f" Clicking '{button.label}'.")
    if view.overlay_kind == "error":
        return Choice(Action(PRESS_BACK), 1.0, "An error screen with no way to retry.")
    return Choice(Action(PRESS_BACK), 1.0, why + " No button found; going back.")


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
        DISMISS_WORDS)
    others = [n for n in view.overlay if n.text and n not in buttons]
    said = set(tokens(" ".join(n.text for n in others), keep_stopwords=True)) - _FUNCTION_WORDS
    asks_to_confirm = any(
        phrase in " ".join(n.text.lower().replace("\u2019", "'") for n in others)
        for phrase in current_policy().confirmations)
    if not asks_to_confirm and not (tapped & said and any("?" in n.text for n in others)):
        return None  # a notice ("Added to cart") is news, not a question to answer
    ahead = [b for b in buttons
             if not any(b.label.strip().lower() == w or w in b.label.lower().split()
                        for w in DISMISS_WORDS + ("keep", "no", "back"))]
    return ahead[0] if len(ahead) == 1 else None


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


def _goal_asks_for(button_label: str, ctx: StepContext) -> bool:
    """The goal asks for what the confirmation commits: the verb of the go-ahead button,
    or of the tapped label when the button only says "OK"/"Confirm", is one the goal uses
    ("Cancel ride" for "cancel my ride") or a verb that completes a request
    (``COMMIT_VERBS``: "Place order", "Book"; money is the policy's to ask about)."""
    tapped = ""
    if ctx.history:
        match = _TAPPED_LABEL.match(ctx.history[-1].summary or "")
        tapped = match.group("label") if match else ""
    goal = set(tokens(ctx.goal, keep_stopwords=True))
    for label in (button_label, tapped):
        words = [w for w in tokens(label, keep_stopwords=True) if w not in _FUNCTION_WORDS]
        if not words or (label is button_label and words[0] in _GO_AHEAD_WORDS):
            continue  # "Confirm": the tap before it says what is confirmed
        return words[0] in goal or words[0] in COMMIT_VERBS
    return True


def _overlay_confidence(kind: str, button: UINode, buttons: list[UINode]) -> float:
    """How sure the way out of an overlay is (OS-Kairos §3: environmental hijack).

    An ad or pop-up the goal never mentions, with exactly one dismiss control, and an error
    screen with a Retry: the way out is unambiguous and undoes nothing, so the agent acts.
    A permission prompt is the user's privacy decision and an overlay with several ways
    out is a guess: both go to a person.
    """
    label = button.label.strip().lower()
    if kind == "error" and any(word in label.split() or label == word for word in RETRY_WORDS):
        return 4.0
    if kind == "dialog":
        dismissers = [b for b in buttons
                      if any(b.label.strip().lower() == w or w in b.label.lower().split()
                             for w in DISMISS_WORDS)]
        if len(dismissers) == 1:
            return 4.0
    return 2.0
