"""``bench tokens``: what component recommendation and the compact history save in prompts.

Pure measurement on the bundled simulated suites, no model and no database. Every task
with a success predicate is walked along the oracle's shortest path on a fresh
:class:`~devices.sim.SimDevice` reset with the task; at every state (the final COMPLETE
state included, since the agent is prompted there too) the prompt's element list is built
exactly as the ``openai`` backend builds it:

* **recommended** — ``format_elements(recommend(nodes, goal, k).nodes)`` with the
  backend's default ``recommend_k`` (RecAgent §3.3);
* **full** — ``format_elements(nodes)`` over every node of the screen, what the backend
  sends without recommendation (its ``planning="separate"`` call does).

``goal`` is the text the backend would be prompted with: the instruction, refined by the
answers the user gives when the agent asks (the task's hidden preferences and, for a
signed-out account, the password) — ``StepContext.goal``.

Reported (CONTRACT ``bench tokens``):

* ``recommend_token_ratio`` — mean element-list tokens per step, recommended ÷ full
  (target ≤ 0.5, RecAgent's figure);
* ``target_recall`` — share of steps with a target element whose target survives
  recommendation: the node under the oracle's next CLICK/LONG_CLICK point
  (``loop.target_node``), or for TYPE the focused field (else the only field on screen,
  where the simulator types). Steps without a target (OPENAPP, BACK, SCROLL, WAIT,
  COMPLETE) are not counted (target ≥ 0.98);
* ``history_token_ratio`` — history tokens per episode, the compact D-PoT history
  (``planning.compact_history``, one line per step) ÷ a ReAct-style history
  (``planning.react_history``: every earlier turn's observation, action and result) summed
  over the prompts of the episode (target ≤ 0.30, D-PoT Table 1). The ReAct observations
  are the recommended element lists the agent saw and it has no thoughts (there is no
  model here), so the ReAct side is a lower bound and the ratio an upper bound.
  ``history_token_ratio_without_observations`` also drops the observations (turns of
  action, action input and result only): how much of the saving is the per-step line
  format alone.

Tokens are counted with :func:`agents.brain.tokens.count_tokens` (tiktoken when cached offline,
else the deterministic approximation; ``tokenizer`` says which).
"""
from __future__ import annotations

import inspect
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

from agents.brain import loop
from agents.brain.backends.base import HistoryEntry, StepContext
from agents.brain.elements import is_editable
from agents.brain.planning import compact_history, react_history
from agents.brain.recommend import format_elements, recommend
from agents.brain.tokens import count_tokens, tokenizer_name
from devices.actions import COMPLETE, IMPOSSIBLE, LONG_CLICK, CLICK, TYPE, Action
from devices.uitree import UINode

SUITES: tuple[str, ...] = ("toggles", "complex", "everyday")
TARGETS = {"recommend_token_ratio": 0.5, "target_recall": 0.98, "history_token_ratio": 0.30}
FALLBACK_K = 12
MAX_MISSES_SHOWN = 20


def default_recommend_k() -> int:
    """The ``openai`` backend's default ``recommend_k`` (what its prompts actually use)."""
    try:
        from agents.brain.backends.openai import OpenAIBackend
    except ImportError:  # the openai client is optional
        return FALLBACK_K
    default = inspect.signature(OpenAIBackend.__init__).parameters["recommend_k"].default
    return int(default) if isinstance(default, int) else FALLBACK_K


def task_goal(task: Any) -> str:
    """The goal the backend is prompted with once the user has answered its questions."""
    answers = [p.answer for p in task.preferences if p.answer]
    for perturbation in task.perturbations:
        password = perturbation.param("password") if perturbation.kind == "logged_out" else None
        if password:
            answer = f"My password is {password}"
            if answer not in answers:
                answers.append(answer)
    return StepContext(instruction=task.instruction, observation=None,  # type: ignore[arg-type]
                       answers=answers).goal


def oracle_target(action: Action, nodes: list[UINode]) -> UINode | None:
    """The element the oracle's action needs: the node under a tap, or the field a TYPE
    goes into (the focused one, else the only one on screen, as the simulator does)."""
    if action.type in (CLICK, LONG_CLICK):
        return loop.target_node(action, nodes)
    if action.type == TYPE:
        fields = [n for n in nodes if is_editable(n) and n.enabled]
        focused = [n for n in fields if n.focused]
        if focused:
            return focused[0]
        if len(fields) == 1:
            return fields[0]
    return None


@dataclass
class _Totals:
    steps: int = 0
    full_tokens: int = 0
    rec_tokens: int = 0
    full_elements: int = 0
    rec_elements: int = 0
    targeted: int = 0
    recalled: int = 0
    episodes: int = 0
    compact_tokens: int = 0
    react_tokens: int = 0
    react_bare_tokens: int = 0
    history_steps: int = 0
    misses: list[dict[str, Any]] = field(default_factory=list)

    def add(self, other: "_Totals") -> None:
        for name in ("steps", "full_tokens", "rec_tokens", "full_elements", "rec_elements",
                     "targeted", "recalled", "episodes", "compact_tokens", "react_tokens",
                     "react_bare_tokens", "history_steps"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.misses.extend(other.misses)

    def summary(self) -> dict[str, Any]:
        def ratio(a: float, b: float) -> float | None:
            return round(a / b, 4) if b else None

        def mean(total: float, n: int) -> float | None:
            return round(total / n, 1) if n else None

        return {
            "recommend_token_ratio": ratio(self.rec_tokens, self.full_tokens),
            "target_recall": ratio(self.recalled, self.targeted),
            "history_token_ratio": ratio(self.compact_tokens, self.react_tokens),
            "history_token_ratio_without_observations": ratio(self.compact_tokens,
                                                               self.react_bare_tokens),
            "steps": self.steps,
            "episodes": self.episodes,
            "targeted_steps": self.targeted,
            "targets_recalled": self.recalled,
            "full_tokens_per_step": mean(self.full_tokens, self.steps),
            "recommended_tokens_per_step": mean(self.rec_tokens, self.steps),
            "full_elements_per_step": mean(self.full_elements, self.steps),
            "recommended_elements_per_step": mean(self.rec_elements, self.steps),
            "compact_history_tokens_per_episode": mean(self.compact_tokens, self.episodes),
            "react_history_tokens_per_episode": mean(self.react_tokens, self.episodes),
            "react_history_without_observations_tokens_per_episode": mean(
                self.react_bare_tokens, self.episodes),
        }


def _line_count(text: str) -> int:
    return len(text.splitlines()) if text else 0


def _walk_task(device: Any, task: Any, k: int, suite_name: str) -> _Totals:
    """One task along the oracle's shortest path; raises NoPathError / ValueError."""
    from devices.sim import Oracle

    device.reset(task)
    oracle = Oracle(device, task)
    goal = task_goal(task)
    totals = _Totals(episodes=1)
    history: list[HistoryEntry] = []
    observations: list[str] = []
    compact_total = react_total = react_bare_total = 0
    limit = max(task.max_steps, 1) * 3
    for _ in range(limit):
        view = device.view()
        nodes = list(view.nodes)
        width, height = device.info.width, device.info.height
        # The prompts of this step, with the history of the steps before it.
        compact_total += count_tokens(compact_history(history))
        react_total += count_tokens(react_history(history, observations=observations))
        react_bare_total += count_tokens(react_history(history))
        rec = recommend(nodes, goal, k=k)
        full_text = format_elements(nodes, width, height)
        rec_text = format_elements(rec.nodes, width, height)
        totals.steps += 1
        totals.full_tokens += count_tokens(full_text)
        totals.rec_tokens += count_tokens(rec_text)
        totals.full_elements += _line_count(full_text)
        totals.rec_elements += _line_count(rec_text)

        choices = oracle.next_actions(device.snapshot())
        action = choices[0] if choices else Action(IMPOSSIBLE)
        target = oracle_target(action, nodes)
        if target is not None:
            totals.targeted += 1
            if target.key in {n.key for n in rec.nodes}:
                totals.recalled += 1
            else:
                totals.misses.append({
                    "suite": suite_name, "task": task.id, "step": len(history),
                    "action": action.type, "target": target.label or target.key,
                    "goal": goal,
                })
        if action.type in (COMPLETE, IMPOSSIBLE):
            break
        outcome = device.perform(action)
        history.append(loop.history_entry(len(history) + 1, action, "agent", outcome.changed,
                                          loop.target_node(action, nodes)))
        observations.append(rec_text)
    totals.history_steps = len(history)
    totals.compact_tokens = compact_total
    totals.react_tokens = react_total
    totals.react_bare_tokens = react_bare_total
    return totals


def bench_tokens(suites: Iterable[str] = SUITES, *, k: int | None = None,
                 tasks: Iterable[str] | None = None) -> dict[str, Any]:
    """Walk the suites' tasks along the oracle's path and measure the prompts (module doc).

    ``tasks`` limits the run to those task ids (tests use one or two); ``k`` overrides the
    backend's default ``recommend_k``.
    """
    from devices.sim import NoPathError, SimDevice, find_suite

    k = default_recommend_k() if k is None else int(k)
    wanted = set(tasks) if tasks is not None else None
    overall = _Totals()
    per_suite: dict[str, Any] = {}
    skipped: list[dict[str, str]] = []
    episode_ratios: list[float] = []
    for name in suites:
        suite = find_suite(name)
        device = SimDevice("bench-tokens", apps=suite.bundle)
        suite_totals = _Totals()
        for task in suite.tasks:
            if wanted is not None and task.id not in wanted:
                continue
            if not task.has_predicate:
                skipped.append({"suite": suite.name, "task": task.id,
                                "why": "no success predicate"})
                continue
            try:
                totals = _walk_task(device, task, k, suite.name)
            except (NoPathError, ValueError) as exc:
                skipped.append({"suite": suite.name, "task": task.id, "why": str(exc)[:200]})
                continue
            if totals.full_tokens:
                episode_ratios.append(totals.rec_tokens / totals.full_tokens)
            suite_totals.add(totals)
        per_suite[suite.name] = suite_totals.summary()
        overall.add(suite_totals)

    result: dict[str, Any] = {"bench": "tokens", **overall.summary()}
    result.update({
        "recommend_k": k,
        "tokenizer": tokenizer_name(),
        "suites": per_suite,
        "targets": dict(TARGETS),
        "met": {name: _meets(result[name], target, upper=name != "target_recall")
                for name, target in TARGETS.items()},
        "episode_recommend_ratio_p50": round(statistics.median(episode_ratios), 4)
        if episode_ratios else None,
        "missed_targets": overall.misses[:MAX_MISSES_SHOWN],
        "missed_targets_total": len(overall.misses),
        "skipped_tasks": skipped,
    })
    return result


def _meets(value: float | None, target: float, *, upper: bool) -> bool | None:
    if value is None:
        return None
    return value <= target if upper else value >= target
