"""Progress: which sub-goals are done, which is next, and when the task is.

A sub-goal is 'done' when its effect shows on the screen, 'seen' or 'likely' when only
the history (or a loose confirmation) says so, 'typed'/'more' when it is half-way, and
'todo' otherwise; the next sub-goal is the first unfinished one after the latest with
evidence of progress (D-PoT re-plans from the history).
"""
from __future__ import annotations

import re

from agents.brain.backends.base import StepContext
from agents.brain.backends.heuristic.choice import Choice
from agents.brain.backends.heuristic.errands import Visits, app_ok, finished_in_its_app
from agents.brain.backends.heuristic.history import (
    committed, confirmed, history_labels, opened_apps,
)
from agents.brain.backends.heuristic.intents import Intent
from agents.brain.backends.heuristic.options import other_named_option
from agents.brain.backends.heuristic.screen import ScreenView, field_is_empty, success_text
from agents.brain.backends.heuristic.toggles import find_switch, setting_shows, state_shows
from agents.brain.elements import is_editable
from agents.brain.text import normalise_text, tokens
from devices.actions import CLICK, COMPLETE, PRESS_ENTER, TYPE, Action


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


def sub_goal_status(intent: Intent, view: ScreenView, ctx: StepContext,
                    visits: Visits | None = None) -> str:
    """'done' (visible on screen), 'seen' (history shows it was done), or 'todo'.
    ``visits``: the history's apps, read once per step by the caller."""
    history = ctx.history
    if intent.kind == "open_app":
        if intent.app and view.package == intent.app.package:
            return "done"
        if intent.app and intent.app.name.lower() in opened_apps(history):
            return "seen"
        return "todo"
    if intent.kind == "toggle":
        switch, score, _ = find_switch(intent, view)
        if switch is not None and score >= 0.5 and app_ok(intent, view):
            if switch.checked != intent.desired or other_named_option(view, intent):
                return "todo"
            return "done"
        labels = history_labels(history)
        target = set(tokens(intent.target))
        if target and any(target <= set(tokens(label)) for label in labels):
            return "seen"
        return "seen" if finished_in_its_app(intent, view, ctx, visits) else "todo"
    if intent.kind == "type" and intent.typed:
        typed = intent.typed.strip().lower()
        field_texts = [n.text.strip().lower() for n in view.editables if not field_is_empty(n)]
        last_type = max(
            (i for i, e in enumerate(history)
             if e.action.get("type") == TYPE and str(e.action.get("text", "")).strip().lower() == typed),
            default=None,
        )
        submitted = last_type is not None and any(
            e.action.get("type") in (CLICK, PRESS_ENTER) for e in history[last_type + 1:]
        )
        if submitted and not app_ok(intent, view):
            return "likely"  # sent from its own app; this screen cannot show it
        if submitted:
            assert last_type is not None
            shown = any(typed in n.text.lower() for n in view.nodes if n.text and not is_editable(n))
            success = success_text(view)
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
    if setting_shows(intent, view):
        return "done"
    if history and history[-1].action.get("type") == CLICK and app_ok(intent, view):
        if state_shows(intent, view):
            return "done"
        success = success_text(view)
        if success and _success_fits(success, intent):
            return "done"
        if success and _requests(intent):
            return "likely"  # a loose confirmation ("Added to cart" for "buy")
        if committed(history[-1], intent) and view.overlay_kind != "dialog":
            return "likely"  # the form was just sent off ("Confirm ride" → a trip screen)
        if confirmed(history) and view.overlay_kind != "dialog":
            return "likely"  # "Stop parking", then "Stop" in the dialog it opened
    return "seen" if finished_in_its_app(intent, view, ctx, visits) else "todo"


def complete(intents: list[Intent], status: list[str], view: ScreenView,
             ctx: StepContext | None = None) -> Choice:
    visible = all(s == "done" for s in status[-1:])
    confidence = 5.0 if visible else 3.0  # history or a loose confirmation only
    thought = "Every sub-goal's effect is visible on the screen; the task is done." \
        if visible else "The history suggests every sub-goal is done."
    # A switch the goal names that was never tapped was already as wanted: say so, the
    # user reads this line as the task's result.
    tapped = [_squash(label) for label in history_labels(ctx.history)] if ctx else []
    untouched = [i for i, s in zip(intents, status) if i.kind == "toggle" and s == "done"
                 and i.desired is not None and _squash(i.target) and not any(
                     _squash(i.target) in t or (t and t in _squash(i.target)) for t in tapped)]
    if untouched:
        thought = " ".join(f"'{i.target}' was already {'on' if i.desired else 'off'}."
                           for i in untouched) + " " + thought
    choice = Choice(Action(COMPLETE), confidence, thought)
    # Evidence before COMPLETE: the last sub-goal shows on screen, and how many of
    # all of them do (the earlier ones may only be known from the history).
    choice.evidence.update(last_goal_visible=visible,
                           goals_visible=sum(1 for s in status if s == "done") / max(1, len(status)))
    return choice


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())  # "Wi-Fi" ~ "wifi"


def current_sub_goal(intents: list[Intent], status: list[str],
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


def remaining_words(intent: Intent) -> list[str]:
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
    return [t for t in remaining_words(intent) if t not in shown and t not in app_words]


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
