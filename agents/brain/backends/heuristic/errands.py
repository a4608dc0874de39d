"""Errands: which app each part of the goal happens in, and when to switch.

An errand may span apps ("book a ride and text Alex"). These rules read which apps the
episode has acted in, open the app a sub-goal needs, respect an app a person chose
instead, ask the user which app to use when no installed app fits (IMPOSSIBLE when the
answer names none either), and finish the part in the app on
screen before another is opened.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from agents.brain.backends.base import Clarification, HistoryEntry, Proposal, StepContext
from agents.brain.backends.evidence import app_mention
from agents.brain.backends.heuristic.choice import Choice
from agents.brain.backends.heuristic.history import committed, confirmed
from agents.brain.backends.heuristic.intents import Intent, app_match, normalise_words
from agents.brain.backends.heuristic.options import WHICH_APP
from agents.brain.backends.heuristic.screen import ScreenView
from agents.brain.text import tokens
from devices.actions import CLICK, IMPOSSIBLE, OPENAPP, PRESS_HOME, Action
from devices.protocol import AppInfo


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
class Visits:
    """Which apps the episode has acted in, read from its history."""

    worked: set[str] | None  # packages acted in; None: unknown (acted before any switch)
    acting_here: bool  # an action since the last change of app
    where: list[str | None]  # per history entry, the app it acted in (None: unknown)
    # Apps a person switched away from after work was done in them: they judged that
    # part finished (or not the agent's to finish).
    left_by_person: set[str] = field(default_factory=set)


def app_visits(history: list[HistoryEntry], apps: tuple[AppInfo, ...]) -> Visits:
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
    return Visits(worked, acting_here, where, left_by_person)


def unvisited(intents: list[Intent], visits: Visits) -> frozenset[int]:
    """Sub-goals whose app the episode has not acted in."""
    if visits.worked is None:
        return frozenset()
    return frozenset(i for i, intent in enumerate(intents)
                     if intent.app is not None and intent.kind != "open_app"
                     and intent.app.package not in visits.worked)


def app_serves_goal(intents: list[Intent], view: ScreenView, ctx: StepContext) -> bool:
    """The foreground app is where the goal (one of its sub-goals) happens — or an app we
    know nothing about, which may be. A form another errand left open in a known app that
    the goal does not need is no reason to ask the user anything."""
    here = _foreground_app(ctx, view)
    if here is None or view.launcher:
        return True
    wanted = [intent.app for intent in intents if intent.app is not None]
    if wanted:
        return any(app.package == here.package for app in wanted)
    best = app_match(ctx.goal, tuple(ctx.apps))[0]
    return best is not None and best.package == here.package


def app_ok(intent: Intent, view: ScreenView) -> bool:
    return intent.app is None or view.package == intent.app.package


def app_step(intent: Intent, view: ScreenView, ctx: StepContext) -> Choice | Proposal | None:
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
        return Choice(Action(OPENAPP, app=app.name), 2.0,
                      f"The goal names '{app.name}', but a person just opened "
                      f"'{chosen.name}'; asking before leaving it.")
    if app is None:
        answered = _answered_app(intent, ctx)
        if answered is not None:
            # The user named the app to use when asked (RecAgent Eq. 6, the refined goal).
            if view.package == answered.package:
                return None
            return Choice(Action(OPENAPP, app=answered.name), 5.0,
                          f"The user chose '{answered.name}' for this; opening it.")
        if view.launcher:
            app, named, strength = app_match(ctx.goal, tuple(ctx.apps))
            if app is None:
                return which_app(intent, ctx, None)
            confidence = 3.0 if strength >= 0.5 else 2.0
            return Choice(Action(OPENAPP, app=app.name), confidence,
                          f"On the home screen; '{app.name}' is the closest app to the goal.")
        here = _foreground_app(ctx, view)
        if here is not None and app_match(ctx.goal, tuple(ctx.apps))[0] is None:
            # Inside a known app that does not fit either, the launcher would say the
            # same after a chain of PRESS_BACKs a person must approve one by one: ask
            # now, once. (An app we know nothing about may still be the right one.)
            return which_app(intent, ctx, here)
        return None
    if view.package == app.package:
        return None
    if intent.app_named or intent.kind == "open_app":
        confidence = 5.0
    else:
        # Guessed from descriptions: sure only when one app clearly fits better.
        _, _, strength = app_match(intent.text, tuple(ctx.apps))
        confidence = 4.0 if strength >= 0.3 else 2.0
    return Choice(Action(OPENAPP, app=app.name), confidence,
                  f"The goal happens in '{app.name}', which is not in the foreground; opening it.")


# Quick replies offered when asking which app to use (a screenful of chips).
MAX_APP_OPTIONS = 8


def which_app_question(intent: Intent) -> str:
    return f"{WHICH_APP} “{intent.text.strip().rstrip('.!?')}”?"


def which_app(intent: Intent, ctx: StepContext, here: AppInfo | None) -> Proposal | Choice:
    """No installed app fits the goal by name or by what it is for — a real phone's app
    nobody describes, an app the goal calls otherwise: the user is asked which app to
    use, with the launcher's labels as quick replies, the most plausible first
    (RecAgent §3.6: what only the user knows is asked, not guessed). The answer is read
    by :func:`_answered_app`. Asked once: when the answer names no installed app either,
    or the phone has no apps to offer, the goal cannot be done here (IMPOSSIBLE)."""
    where = f" ('{here.name}' is open)" if here is not None else ""
    question = which_app_question(intent)
    options = plausible_apps(ctx.goal, tuple(ctx.apps))
    if not options:
        return Choice(Action(IMPOSSIBLE), 1.0,
                      f"No installed app fits the goal{where}, and the phone lists no apps.",
                      rule="app_step")
    if question in ctx.asked:
        return Choice(Action(IMPOSSIBLE), 1.0,
                      f"No installed app fits the goal{where}, and the user's answer names "
                      "none of the installed apps.", rule="app_step")
    return Proposal(
        action=None, confidence=2.0,
        clarification=Clarification(question, options, about="route"),
        thought=f"No installed app fits '{intent.text}' by its name or what it is for; "
                "only the user knows which app they mean.",
        current_step="ask which app to use",
    )


def plausible_apps(goal: str, apps: tuple[AppInfo, ...],
                   limit: int = MAX_APP_OPTIONS) -> list[str]:
    """The apps' launcher labels, those sharing a word's stem with the goal first
    ("booking" and "Bookings"), then in the phone's own order; at most ``limit``."""
    goal_toks = set(tokens(goal))

    def near(a: str, b: str) -> bool:
        return a == b or (len(a) >= 4 and len(b) >= 4 and a[:4] == b[:4])

    def score(app: AppInfo) -> int:
        words = set(tokens(f"{app.name} {app.description}"))
        return sum(1 for g in goal_toks if any(near(g, w) for w in words))

    named = [(n, app) for n, app in enumerate(apps) if app.name.strip()]
    ranked = sorted(named, key=lambda pair: (-score(pair[1]), pair[0]))
    return list(dict.fromkeys(app.name.strip() for _, app in ranked))[:limit]


def _answered_app(intent: Intent, ctx: StepContext) -> AppInfo | None:
    """The installed app the user named in answer to :func:`which_app`'s question."""
    if which_app_question(intent) not in ctx.asked or not ctx.answers:
        return None
    app, named, _ = app_match(" ".join(ctx.answers), tuple(ctx.apps))
    return app if named else None


def without_empty_app_answer(ctx: StepContext, intents: list[Intent]) -> StepContext:
    """The context less the user's answer to :func:`which_app`'s question when it names
    no installed app ("No preference", "I don't have one"): it says which app, not what
    the goal is, so it does not refine the goal the rules read (RecAgent Eq. 6) — its
    words would otherwise match labels ("No reminder") once a person opens an app
    anyway. Answers pair with questions only when each question got one."""
    if len(ctx.asked) != len(ctx.answers):
        return ctx
    questions = {which_app_question(intent) for intent in intents}
    drop = {n for n, question in enumerate(ctx.asked)
            if question in questions and not app_match(ctx.answers[n], tuple(ctx.apps))[1]}
    if not drop:
        return ctx
    return replace(ctx, answers=[a for n, a in enumerate(ctx.answers) if n not in drop])


def finished_in_its_app(intent: Intent, view: ScreenView, ctx: StepContext,
                        visits: Visits | None) -> bool:
    """The only part of the errand in its app was committed there earlier ("Confirm
    ride", "Save", a request and its confirmation), or a person left that app for
    another after work in it."""
    if intent.app is None or intent.app.package in intent.plan_apps:
        return False
    history = ctx.history
    visits = visits or app_visits(history, tuple(ctx.apps))
    # (a tap the dialog on screen now asks to confirm is not committed yet)
    settled = history[:-1] if view.overlay_kind == "dialog" else history
    if any(app == intent.app.package and (committed(entry, intent)
                                          or confirmed(settled, i + 1))
           for i, (app, entry) in enumerate(zip(visits.where, settled))):
        return True
    return intent.app.package in visits.left_by_person and view.package != intent.app.package


def finish_here_first(intents: list[Intent], status: list[str], current: int | None,
                      view: "ScreenView", visits: Visits) -> int | None:
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
