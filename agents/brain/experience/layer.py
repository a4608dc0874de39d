"""Every backend uses experience: a layer around any backend (issue 25 item 2).

Pure Python. :class:`ExperienceBackend` wraps the heuristic, the ``openai`` backend or any
other, so the memory works the same for all of them and none of their own code changes:

1. before the backend proposes, the most similar earlier episodes a person verified —
   goal, start screen and the verified actions — are put on the step's context
   (``StepContext.experience``), which a planner shows in its prompt (D-PoT §5.5: the
   reference episodes' goals *and* executed actions);
2. the backend proposes;
3. the memory is looked up (:func:`agents.brain.experience.memory.lookup`). Where a remembered
   decision fits, binds and is what the backend proposed, the backend's proposal stands
   with the memory's evidence added (``memory_agrees``: the calibrator takes the better of
   the two probabilities). Where it differs and is "agreed" (or the backend has no
   action), it is proposed instead, with ``rule = "experience"`` and its
   evidence (screen and instruction similarity, times confirmed, times corrected,
   parameters re-bound, this kind of memory's record) — a "disputed" memory does not
   override a backend's action —, and the calibrator
   (:mod:`agents.brain.calibration.experience`) turns the record into P(right). Where people
   corrected the backend's own proposal on this kind of screen, the proposal says so
   (``memory_contradicts``) and stays low.

The memory never sees task ids, gold paths or an oracle: only the instruction, the screen
and what people decided.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from agents.brain.backends.base import Backend, Proposal, StepContext
from agents.brain.calibration.calibrator import probability_to_score
from agents.brain.calibration.experience import (
    ExperiencePrior, cap_for_contradiction, experience_probability,
)
from agents.brain.experience.memory import Store, lookup, similar_episodes, step_key
from devices.actions import Action, validate_action

EPISODES_IN_PROMPT = 3
logger = logging.getLogger(__name__)


class ExperienceBackend:
    """``inner`` with the installation's experience (see the module docstring)."""

    def __init__(self, inner: Backend, store: Store, *, episodes: int = EPISODES_IN_PROMPT,
                 prior: ExperiencePrior | None = None) -> None:
        self.inner = inner
        self.store = store
        self.episodes = episodes
        # the shipped record of memory proposals (agents.brain.calibration.experience); None:
        # only this installation's own record counts (KAIROS_EXPERIENCE_PRIOR=0)
        self.prior = prior
        self.name = getattr(inner, "name", type(inner).__name__)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def propose(self, ctx: StepContext) -> Proposal:
        app = ctx.observation.app or ""
        if self.episodes and not ctx.experience:
            similar = similar_episodes(self.store, ctx.goal, app if not _is_launcher(app) else None,
                                       self.episodes)
            if similar:
                ctx = replace(ctx, experience=[e.to_json() for e in similar])
        proposal = self.inner.propose(ctx)
        nodes = ctx.observation.nodes
        if not nodes:
            return proposal
        try:
            found = lookup(self.store, app, nodes, ctx.goal, prev=previous_key(ctx),
                           done=performed(ctx))
        except Exception:  # a damaged entry costs the step its memory, never the proposal
            logger.exception("experience lookup failed; the backend's proposal stands")
            return proposal
        best = found.best
        if proposal.clarification is not None and proposal.clarification.about != "route" \
                and (best is None or best.action is None
                     or not (best.template.slots or _named_by(best.action, nodes, ctx.goal))):
            # A question about what the user wants is theirs to answer: what another user
            # chose on this screen (a sweetness) is never their answer (LEARNING.md lesson
            # 2). Only a decision this instruction's own words make — a re-bound parameter,
            # or an option it names — may stand in for it. A question about where to do it
            # ("which app?") is the installation's to know: people showed it before.
            return proposal
        if best is not None and best.score > 0:
            right, wrong = self.store.outcomes(best.kind)
            evidence: dict[str, Any] = {"rule": "experience", **best.evidence(),
                                        "memory_record_right": right,
                                        "memory_record_wrong": wrong}
            if self.prior is not None:
                prior_right, prior_wrong = self.prior.counts(evidence)
                evidence["memory_prior_right"] = prior_right
                evidence["memory_prior_wrong"] = prior_wrong
            # The same decision: the same point, or the same element tapped elsewhere
            # (the row's title rather than its centre) — not a different decision.
            agrees = bool(best.action is not None and proposal.action is not None and (
                proposal.action.same_as(best.action)
                or found.for_action(proposal.action, nodes, ctx.goal) is best))
            if agrees:
                # The backend proposes what people confirmed here: its own proposal stands,
                # and the calibrator takes the better of its evidence and the memory's.
                proposal.evidence = {**proposal.evidence, **{
                    k: v for k, v in evidence.items() if k != "rule"}, "memory_agrees": True}
                if proposal.confidence is not None:
                    proposal.confidence = max(proposal.confidence, round(
                        probability_to_score(experience_probability(evidence)), 4))
                return proposal
            if best.action is not None and best.kind != "agreed" and proposal.action is not None:
                # A memory that barely fits or that people disputed does not override the
                # backend: its proposal stands as on a cold start, with what memory knows.
                proposal.evidence = {**proposal.evidence, "memory_agrees": False,
                                     "memory_disputed_alternative": True}
                return proposal
            if best.action is not None:
                evidence["action"] = best.action.type
                evidence["memory_agrees"] = False
                p = experience_probability(evidence)
                return Proposal(
                    action=best.action, confidence=round(probability_to_score(p), 4),
                    thought=(f"Done before on this screen ({best.confirmed} confirmed, "
                             f"{best.contradicted} corrected): {best.template.describe()}; "
                             f"learned from: {'; '.join(best.examples)}"),
                    plan=proposal.plan, current_step=proposal.current_step,
                    candidates=proposal.candidates, prompt_tokens=proposal.prompt_tokens,
                    completion_tokens=proposal.completion_tokens,
                    extra={"evidence": dict(evidence),
                           "experience": {"template": best.template.to_json(),
                                          "kind": best.kind, "examples": best.examples},
                           "backend_proposal": proposal.action.to_json()
                           if proposal.action is not None else None},
                    evidence=evidence)
        # The backend's own proposal, with what the memory knows about it.
        own = found.for_action(proposal.action, nodes, ctx.goal)
        if own is not None and proposal.action is not None:
            proposal.evidence = {**proposal.evidence, "memory_confirmed": own.confirmed,
                                 "memory_contradicts": own.contradicted}
            if own.contradicted and proposal.confidence is not None:
                from agents.brain.calibration.calibrator import score_to_probability

                capped = cap_for_contradiction(score_to_probability(proposal.confidence),
                                               proposal.evidence)
                proposal.confidence = min(proposal.confidence, probability_to_score(capped))
        return proposal


def _named_by(action: Action, nodes: list, goal: str) -> bool:
    """The element ``action`` taps is named, every word of its label, by ``goal``."""
    from agents.brain import loop
    from agents.brain.text import tokens

    target = loop.target_node(action, nodes)
    words = set(tokens(target.label)) if target is not None else set()
    return bool(words) and words <= set(tokens(goal))


def previous_key(ctx: StepContext) -> str:
    """:func:`agents.brain.experience.memory.step_key` of the episode's last step ("" first)."""
    if not ctx.history:
        return ""
    last = ctx.history[-1]
    return step_key(last.action, last.summary, ctx.goal, last.pick)


def performed(ctx: StepContext) -> list[Action]:
    out = []
    for entry in ctx.history:
        action = validate_action(entry.action)
        if isinstance(action, Action):
            out.append(action)
    return out


def _is_launcher(app: str) -> bool:
    return app in ("", "com.android.launcher3")


def with_experience(backend: Backend, store: Store | None, *,
                    episodes: int = EPISODES_IN_PROMPT,
                    prior: ExperiencePrior | None = None) -> Backend:
    """``backend`` with experience, or unchanged when there is no store. ``episodes``:
    how many earlier episodes go on the context (0 for a backend without a prompt);
    ``prior``: the shipped record of memory proposals, or None."""
    if store is None:
        return backend
    return ExperienceBackend(backend, store, episodes=episodes,  # type: ignore[return-value]
                             prior=prior)
