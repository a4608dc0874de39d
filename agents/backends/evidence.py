"""Evidence every backend can state about a proposal, read from the step's context.

Pure Python. A backend's 1–5 confidence is a claim; the calibrator (``agents.calibration``)
learns P(right) from *why* the backend is sure. These are the context features any
backend shares — does the instruction name the target element and the app, is the agent
repeating itself, has a person already had to step in — so that the heuristic and the
model backends state them the same way (docs/models.md, "Evidence").
"""
from __future__ import annotations

from typing import Any

from agents.backends.base import StepContext
from agents.recommend import node_label, tokens
from devices.actions import POINT_TYPES, Action, validate_action
from devices.uitree import node_at


def context_evidence(action: Action | None, ctx: StepContext) -> dict[str, Any]:
    """Features of ``action`` in ``ctx`` that do not depend on how it was chosen.

    * ``action`` — the action type;
    * ``names_target`` — share of the target element's label words (of the app's name,
      for OPENAPP) the goal contains (1.0: the goal names it; absent without a target);
    * ``names_app`` — the goal names an installed app; ``in_named_app`` — the foreground
      app is one of those it names;
    * ``repeats`` — how often this same action was already performed in the episode;
      ``after_no_change`` — the previous action left the screen unchanged;
    * ``operator_steps`` — steps a person already decided in this episode;
      ``history`` — steps so far (capped at 20: long episodes are alike).
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
    return evidence
