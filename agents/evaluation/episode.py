"""A whole episode in memory, with a simulated operator: the evaluation runner.

Pure Python: a device object, a backend and (optionally) the simulator's oracle. The
product's own loop (Celery, tickets in the database) makes the same decisions through
:mod:`agents.brain.loop`; this runner exists so ``evaluate`` can run hundreds of episodes in
parallel without a database, and labels every proposal right or wrong with the oracle.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from agents.brain import loop
from agents.brain.backends.base import Backend, HistoryEntry, Proposal, StepContext
from devices.actions import COMPLETE, IMPOSSIBLE, Action

OPERATOR_ORACLE = "oracle"
OPERATOR_NONE = "none"


@dataclass
class StepRecord:
    index: int
    proposed: dict[str, Any] | None
    confidence: float | None
    asked: bool
    kind: str | None  # "intervention" | "clarification" | None
    reason: str | None
    needed: bool | None  # the proposed action is wrong (oracle label); None: unknown
    executed: dict[str, Any] | None
    by: str  # "agent" | "operator"
    type_match: bool | None = None
    action_match: bool | None = None
    p_right: float | None = None  # the calibrator's P(right), when one scored the step
    # The proposal taps an element the suite marks sensitive (SimTask.sensitive).
    sensitive: bool = False


@dataclass
class EpisodeResult:
    task: str
    status: str  # succeeded | failed | aborted | waiting_operator | waiting_user
    success: bool | None
    steps: list[StepRecord] = field(default_factory=list)
    interventions: int = 0
    clarifications: int = 0
    optimal_steps: int | None = None
    # The episode reached a state from which the oracle finds no path to success (within
    # its budget) although its start had one: something deleted, a permission denied, an
    # irreversible setting changed. Scored as failed; every later step is labelled wrong.
    dead_end: bool = False
    dead_end_reason: str | None = None

    @property
    def actions_taken(self) -> int:
        return sum(1 for step in self.steps if step.executed is not None)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["actions_taken"] = self.actions_taken
        return data


@dataclass
class EpisodeMemory:
    """Everything the agent remembers between steps (RecAgent's memory of every step)."""

    instruction: str
    history: list[HistoryEntry] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    excluded: set[str] = field(default_factory=set)
    # Signatures of the screens the agent acted on since a person last decided (the
    # no-progress guard).
    screens: list[Any] = field(default_factory=list)

    def context(self, observation: Any, apps: tuple = (), references: list[str] | None = None
                ) -> StepContext:
        from devices.uitree import screen_signature

        return StepContext(
            screen_visits=loop.count_visits(self.screens, screen_signature(observation.nodes)),
            instruction=self.instruction, observation=observation, history=list(self.history),
            answers=list(self.answers), excluded_elements=set(self.excluded), apps=apps,
            references=list(references or []), asked=list(self.asked),
            step_index=len(self.history),
        )


def _p_right(proposal: Proposal) -> float | None:
    value = proposal.extra.get("p_right") if isinstance(proposal.extra, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def _safe_propose(backend: Backend, ctx: StepContext) -> Proposal:
    try:
        return backend.propose(ctx)
    except Exception as exc:  # a backend bug must become a ticket, not end the episode
        return Proposal(action=None, error=f"backend failed: {exc!r}")


def _taps_marked(action: Action | None, nodes: list, marked: tuple[str, ...]) -> bool:
    """Does ``action`` land on one of the elements the suite marks sensitive (by id)?"""
    if not marked:
        return False
    target = loop.target_node(action, nodes)
    return target is not None and target.resource_id.rsplit("/", 1)[-1] in marked


def _optimal_actions(oracle: Any, state: Any) -> list[Action]:
    """The oracle's optimal next actions; none where it finds no path (a task impossible
    from its start, or one whose path lies beyond the oracle's budget)."""
    from devices.sim import NoPathError

    try:
        return oracle.next_actions(state)
    except NoPathError:
        return []


def run_episode(
    device: Any,
    backend: Backend,
    task: Any,
    *,
    threshold: float,
    operator: str = OPERATOR_ORACLE,
    max_steps: int = 30,
    oracle: Any = None,
    on_step: Any = None,
) -> EpisodeResult:
    """Run one suite task from a fresh device state until COMPLETE/IMPOSSIBLE/max steps.

    ``operator="oracle"`` resolves tickets as a person would with perfect knowledge
    (approve a right proposal, edit a wrong one with the oracle's action) and answers
    clarifications with the task's hidden preference; ``"none"`` stops at the first ticket.
    ``on_step(observation, proposal, record, action)`` is called for every executed step
    (``evaluate --learn`` records what production would: who decided, on which screen).
    """
    from devices.sim import NoPathError, Oracle  # the simulator alone has an oracle

    device.reset(task)
    oracle = oracle or Oracle(device, task)
    result = EpisodeResult(task=task.id, status="failed", success=None)
    try:
        result.optimal_steps = oracle.distance(device.snapshot())
    except NoPathError:
        result.optimal_steps = None  # impossible from the start: IMPOSSIBLE is the answer
    memory = EpisodeMemory(instruction=task.instruction)
    apps = device.info.apps
    record_index = 0
    # Clarifications do not consume steps, but a backend that keeps asking is bounded.
    budget = max_steps * 2
    while result.actions_taken < max_steps and budget > 0:
        budget -= 1
        observation = device.observe()
        ctx = memory.context(observation, apps)
        proposal = _safe_propose(backend, ctx)
        decision = loop.decide(proposal, ctx, threshold)
        state = device.snapshot()
        if result.optimal_steps is not None and not result.dead_end:
            try:
                oracle.distance(state)
            except NoPathError as exc:
                result.dead_end, result.dead_end_reason = True, str(exc)

        if decision.outcome == loop.CLARIFY:
            result.clarifications += 1
            result.steps.append(StepRecord(
                index=record_index, proposed=None, confidence=proposal.confidence, asked=True,
                kind="clarification", reason=decision.reason, needed=None, executed=None,
                by="operator",
            ))
            record_index += 1
            if operator != OPERATOR_ORACLE:
                result.status = "waiting_user"
                return result
            memory.asked.append(decision.question)
            memory.answers.append(oracle.answer(decision.question))
            continue

        proposed = decision.action or proposal.action
        sensitive = _taps_marked(proposed, observation.nodes, getattr(task, "sensitive", ()))
        if result.dead_end:
            needed = True  # nothing the agent does from a dead end leads to success
        else:
            needed = True if proposed is None else not oracle.judge(state, proposed)
        asked = decision.outcome == loop.TICKET
        by = "agent"
        action = decision.action
        if asked and result.dead_end and operator == OPERATOR_ORACLE:
            # The simulated operator sees that the task can no longer succeed and aborts,
            # as a person would; the sweep goes on with the next episode.
            result.interventions += 1
            result.steps.append(StepRecord(
                index=record_index, proposed=proposed.to_json() if proposed else None,
                confidence=proposal.confidence, asked=True, kind="intervention",
                reason=decision.reason, needed=True, executed=None, by="operator",
                type_match=False, action_match=False, sensitive=sensitive,
            ))
            result.success = bool(device.check(task)) if getattr(task, "has_predicate", False) else None
            result.status = "aborted"
            return result
        if asked:
            result.interventions += 1
            if operator != OPERATOR_ORACLE:
                result.steps.append(StepRecord(
                    index=record_index, proposed=proposed.to_json() if proposed else None,
                    confidence=proposal.confidence, asked=True, kind="intervention",
                    reason=decision.reason, needed=needed, executed=None, by="agent",
                    sensitive=sensitive,
                ))
                result.status = "waiting_operator"
                return result
            if proposed is not None and not needed:
                action = proposed  # approve
            else:
                choices = _optimal_actions(oracle, state)
                action = choices[0] if choices else Action(IMPOSSIBLE)
                by = "operator"  # edit
        assert action is not None
        # Type (OS-Kairos App. C.3): a wrong proposal may still have the right action type;
        # an asked step carries the person's action (C.4), so it matches like SR does.
        type_match = (not needed) or asked or (
            not result.dead_end and proposed is not None
            and proposed.type in {a.type for a in _optimal_actions(oracle, state)})
        result.steps.append(StepRecord(
            index=record_index, proposed=proposed.to_json() if proposed else None,
            confidence=proposal.confidence, asked=asked,
            kind="intervention" if asked else None, reason=decision.reason if asked else None,
            needed=needed, executed=action.to_json(), by=by, type_match=type_match,
            p_right=_p_right(proposal),
            sensitive=sensitive,
        ))
        record_index += 1
        if on_step is not None:
            on_step(observation, proposal, result.steps[-1], action)
        if action.type in (COMPLETE, IMPOSSIBLE):
            break
        target = loop.target_node(action, observation.nodes)
        if by == "operator" or asked:
            memory.screens.clear()  # a person decided: the count starts again
        else:
            from devices.uitree import screen_signature

            memory.screens.append(screen_signature(observation.nodes))
        outcome = device.perform(action)
        loop.reflect(action, outcome.changed, target, memory.excluded)
        memory.history.append(
            loop.history_entry(len(memory.history) + 1, action, by, outcome.changed, target,
                               observation.nodes)
        )

    result.success = bool(device.check(task)) if getattr(task, "has_predicate", False) else None
    last = result.steps[-1].executed if result.steps else None
    if last and last.get("type") == IMPOSSIBLE and not result.success:
        result.status = "failed"
    else:
        result.status = "succeeded" if result.success else "failed"
    return result
