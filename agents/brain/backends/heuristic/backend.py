"""The heuristic backend: the rules of this package, in priority order, for one step.

One step (docs/heuristic.md has the user-facing account):

1. plan — split the instruction into sub-goals (D-PoT), parse each into an intent
   (:mod:`.intents`);
2. look — what covers the screen (:mod:`.dialogs`), an open choice the user must make
   (:mod:`.options`, RecAgent §3.6 / App. D), a sign-in, stepper, purchase or form the
   screen holds (:mod:`.forms`, :mod:`.shopping`), which sub-goals are already visibly
   done (:mod:`.progress`);
3. act on the first unfinished sub-goal: the right app first (:mod:`.errands`), then a
   toggle only when its state differs from the goal's (:mod:`.toggles`, StaR Fig. 12),
   text typed into the field that fits, or the element the recommendation ranks best
   (:mod:`.targets`, RecAgent §3.3), scrolling when the target is off-screen;
4. confidence 1–5 from the evidence (:mod:`.choice`), capped low when something
   unexpected covers the screen.
"""
from __future__ import annotations

import traceback

from agents.brain.backends.base import Proposal, StepContext, clamp_confidence
from agents.brain.backends.heuristic.choice import Choice, step_evidence
from agents.brain.backends.heuristic.dialogs import overlay
from agents.brain.backends.heuristic.errands import (
    app_serves_goal, app_step, app_visits, finish_here_first, unvisited,
    without_empty_app_answer,
)
from agents.brain.backends.heuristic.forms import fill_form, sign_in, stepper, type_text
from agents.brain.backends.heuristic.intents import Intent, inherit_apps, parse_intent
from agents.brain.backends.heuristic.options import (
    equally_valid, open_choice, pick_named_option, submit_form, under_specified,
)
from agents.brain.backends.heuristic.progress import complete, current_sub_goal, sub_goal_status
from agents.brain.backends.heuristic.screen import ScreenView, read_screen
from agents.brain.backends.heuristic.shopping import purchase_step
from agents.brain.backends.heuristic.targets import click_best
from agents.brain.backends.heuristic.toggles import toggle
from agents.brain.planning import split_goal
from agents.brain.recommend import recommend
from devices.actions import COMPLETE


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
        inherit_apps(intents, ctx)
        ctx = without_empty_app_answer(ctx, intents)
        view = read_screen(ctx)
        goal = ctx.goal

        def done(choice: Choice, current: str) -> Proposal:
            rec = recommend(view.nodes, current or goal, k=self.top_k,
                            excluded=ctx.excluded_elements)
            return Proposal(
                action=choice.action, confidence=clamp_confidence(choice.confidence),
                thought=choice.thought, plan=plan, current_step=current,
                candidates=choice.candidates or rec.keys,
                evidence=step_evidence(choice, ctx, view, plan, intents),
            )

        blocked = overlay(view, goal, ctx)
        if blocked is not None:
            return done(blocked, "deal with what covers the screen")

        question = open_choice(view, ctx) if app_serves_goal(intents, view, ctx) else None
        if isinstance(question, Proposal):
            question.plan = plan
            return question

        visits = app_visits(ctx.history, tuple(ctx.apps))  # read once per step
        if view.package and not view.launcher:
            signing_in = sign_in(view, ctx)
            if signing_in is not None:
                return done(signing_in, "sign in")
            stepping = stepper(view, ctx)
            if stepping is not None:
                return done(stepping, "set the number the goal says")
            shopping = purchase_step(intents, view, ctx)
            if shopping is not None:
                return done(shopping, "go on with the purchase")
            form = None if any(i.kind == "toggle" for i in intents) else fill_form(view, ctx)
            if form is not None and form.action.type == COMPLETE and unvisited(intents, visits):
                # "star the email …, and set an alarm for 5:45": the alarm's form is saved,
                # but a part of the errand in an app never acted in is still to do.
                form = None
            if form is not None:
                return done(form, "fill in the form the goal describes")

        status = [sub_goal_status(intent, view, ctx, visits) for intent in intents]
        current_index = current_sub_goal(intents, status, unvisited(intents, visits))
        current_index = finish_here_first(intents, status, current_index, view, visits)
        if current_index is None:
            # A form still open on screen (the Coffee order after tapping 'Latte') is
            # unfinished work whatever the history says: fill what the goal names, submit.
            form = pick_named_option(view, ctx) or submit_form(view, ctx)
            if form is not None:
                return done(form, "fill in and submit the form")
            return done(complete(intents, status, view, ctx), "check that the goal is reached")

        intent = intents[current_index]
        choice = act_on(intent, view, ctx, goal)
        if isinstance(choice, Proposal):
            choice.plan = plan
            choice.current_step = intent.text
            return choice
        return done(choice, intent.text)


def act_on(intent: Intent, view: ScreenView, ctx: StepContext, goal: str) -> Choice | Proposal:
    """The step for the current sub-goal ``intent``, once nothing on screen came first."""
    switching = app_step(intent, view, ctx)
    if switching is not None:
        return switching
    if intent.kind == "toggle":
        return toggle(intent, view, ctx)
    question = equally_valid(intent, view, ctx)
    if question is not None:
        return question
    question = under_specified(intent, view, ctx)
    if question is not None:
        return question
    pick = pick_named_option(view, ctx)
    if pick is not None:
        return pick
    if intent.kind != "type":
        form = submit_form(view, ctx)
        if form is not None:
            return form
    if intent.kind == "type" and intent.typed:
        return type_text(intent, view, ctx)
    return click_best(intent, view, ctx)
