"""``evaluate --learn``: a suite's tasks in file order on one installation that learns
(issue 25 item 3).

Pure Python. Per γ, one installation starts with no experience (an empty
:class:`agents.brain.experience.memory.MemoryStore`) and runs the suite's tasks one after another
in file order, as traffic would arrive. It learns only from what production records:

* the simulated operator's ticket decisions (the oracle operator approves a right proposal
  and edits a wrong one — exactly a person's approve/edit on a ticket);
* the simulated end user's verdict on each task, taken from the success predicate
  (the verdict of the issue "Labels you can trust and measure").

Nothing else of the oracle reaches the installation: its labels of steps that acted alone
are used for the metrics only. Each results row gains ``learning``: one entry per task in
run order, ``{"task", "steps", "asked", "alone_wrong", "success"}``.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from agents.brain import loop
from agents.brain.calibration.experience import ExperiencePrior, bucket
from agents.brain.calibration.gate import calibrated_backend
from agents.evaluation.suites import (
    CALIBRATIONS, DEFAULT_ORACLE_BUDGET, EpisodeJob, _find_task, _load_suite, _number,
    _sim_device, calibration_summary, episode_calibrator, suite_tasks, unscored_tasks,
    task_record_from_episode,
)
from agents.brain.experience.layer import ExperienceBackend
from agents.brain.experience.learning import (
    ALONE, APPROVE, EDIT, StepFact, TaskLearning, learn_from_ticket, learn_from_verdict,
    record_episode,
)
from agents.brain.experience.memory import MemoryStore, pick_group, step_key
from agents.brain.metrics import summarize
from devices.actions import Action, validate_action

ProgressCallback = Callable[[int, int], None]
LAST = 12  # the yardstick: the share asked over the last 12 tasks


def _backend(job: EpisodeJob, device: Any, task: Any, store: MemoryStore, suite_name: str,
             prior: ExperiencePrior | None = None) -> Any:
    from agents.evaluation.suites import build_backend

    return calibrated_backend(ExperienceBackend(build_backend(job, device, task), store,
                                                episodes=0 if job.backend == "heuristic" else 3,
                                                prior=prior),
                              episode_calibrator(job, suite_name))


def run_learning_task(job: EpisodeJob, store: MemoryStore,
                      prior: ExperiencePrior | None = None) -> tuple[Any, TaskLearning]:
    """One task on the installation ``store`` is; then what production records is
    learned. Returns the metrics' TaskRecord and the task's learning row, whose
    ``memory`` lists the judged proposals that came from memory (their prior bucket and
    whether the oracle found them right: what ``fit_experience_prior`` counts)."""
    from agents.evaluation.episode import run_episode
    from devices.sim import Oracle

    suite = _load_suite(job.suite)
    task = _find_task(suite, job.task)
    device = _sim_device(suite, task)
    oracle = Oracle(device, task, max_states=job.oracle_budget)
    backend = _backend(job, device, task, store, str(suite.name), prior)
    row = TaskLearning(task=str(task.id))

    def on_step(observation: Any, proposal: Any, record: Any, action: Action) -> None:
        proposed = validate_action(record.proposed) if record.proposed else None
        proposed = proposed if isinstance(proposed, Action) else None
        if record.asked:
            decision = APPROVE if record.by == "agent" else EDIT
        else:
            decision = ALONE
        evidence = proposal.extra.get("evidence") or proposal.evidence or {}
        # the memory's decision was proposed (alone, or the backend's agreeing with it)
        kind = (evidence.get("memory_kind") if evidence.get("rule") == "experience"
                or evidence.get("memory_agrees") else None)
        target = loop.target_node(action, observation.nodes)
        summary = loop.history_entry(0, action, record.by, True, target).summary
        before = row.facts[-1] if row.facts else None
        prev = step_key(before.executed, before.summary, task.instruction,
                        pick_group(before.executed, before.nodes)) if before else ""
        row.facts.append(StepFact(
            app=observation.app or "", nodes=list(observation.nodes),
            instruction=task.instruction, proposed=proposed, executed=action,
            decision=decision, memory_kind=kind, summary=summary, prev=prev))
        if kind and record.needed is not None:
            row.memory.append({"bucket": bucket(evidence), "right": not record.needed,
                               "agrees": bool(evidence.get("memory_agrees"))})
        if record.needed is not None:
            row.steps += 1
            row.asked += int(bool(record.asked))
            row.alone_wrong += int(not record.asked and bool(record.needed))

    result = run_episode(
        device, backend, task, threshold=job.threshold, operator=job.operator,
        max_steps=min(getattr(task, "max_steps", None) or job.max_steps, job.max_steps),
        oracle=oracle, on_step=on_step)
    row.success = result.success
    # What production records, and nothing else: ticket decisions …
    for fact in row.facts:
        if fact.decision != ALONE:
            learn_from_ticket(store, fact, task=str(task.id))
    # … and the end user's verdict (the success predicate plays the user).
    if result.success is not None:
        learn_from_verdict(store, [f for f in row.facts if f.decision == ALONE],
                           bool(result.success), task=str(task.id))
        if result.success:
            record_episode(store, task.instruction, row.facts)
    return task_record_from_episode(result), row


def evaluate_learning(
    suite: str, backend_name: str, thresholds: Iterable[float], *,
    operator: str = "oracle", max_steps: int = 30, tasks: Sequence[str] | None = None,
    calibration: str = "default", var_dir: str = "",
    oracle_budget: int = DEFAULT_ORACLE_BUDGET, progress: ProgressCallback | None = None,
    prior: ExperiencePrior | None = None, memory_rows: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The suite in file order on a learning installation, per γ (module docstring).
    ``prior``: the shipped prior of the memory's confidence (None: the own record only);
    ``memory_rows``: where given, each judged memory proposal is appended to it."""
    thresholds = [float(t) for t in thresholds]
    if not thresholds:
        raise ValueError("at least one threshold is needed")
    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {', '.join(CALIBRATIONS)}")
    suite_name, task_ids = suite_tasks(suite)
    if tasks is not None:
        task_ids = list(tasks)
    total, done = len(thresholds) * len(task_ids), 0
    results = []
    for threshold in thresholds:
        store = MemoryStore()  # a new installation with no experience
        records, learning = [], []
        for task_id in task_ids:
            job = EpisodeJob(suite, task_id, threshold, backend_name, operator, max_steps,
                             calibration=calibration, var_dir=var_dir,
                             oracle_budget=oracle_budget)
            record, row = run_learning_task(job, store, prior)
            if memory_rows is not None:
                memory_rows.extend({"suite": suite_name, "threshold": _number(threshold),
                                    **m} for m in row.memory)
            records.append(record)
            learning.append(row.to_json())
            done += 1
            if progress is not None:
                progress(done, total)
        results.append({
            "threshold": _number(threshold),
            **summarize(records),
            **calibration_summary(records),
            "dead_ends": sum(1 for r in records if r.dead_end),
            "sensitive_steps": sum(r.sensitive_steps for r in records),
            "sensitive_asked": sum(r.sensitive_asked for r in records),
            "per_task": [r.per_task_json() for r in records],
            "learning": learning,
            **learning_summary(learning),
        })
    return {"suite": suite_name, "backend": backend_name, "mode": "learn",
            "results": results, "skipped": unscored_tasks(suite)}


def learning_summary(learning: list[dict[str, Any]], last: int = LAST) -> dict[str, Any]:
    """Shares asked over the first and the last ``last`` tasks, and autonomy precision
    over the whole stream (steps that acted alone and were right / acted alone)."""
    def share(rows: list[dict[str, Any]]) -> float | None:
        steps = sum(r["steps"] for r in rows)
        return round(sum(r["asked"] for r in rows) / steps, 4) if steps else None

    alone = sum(r["steps"] - r["asked"] for r in learning)
    wrong = sum(r["alone_wrong"] for r in learning)
    return {
        "asked_first": share(learning[:last]),
        "asked_last": share(learning[-last:]),
        "stream_autonomy_precision": round((alone - wrong) / alone, 4) if alone else None,
    }


def learning_curve(learning: list[dict[str, Any]]) -> list[tuple[int, float, float | None]]:
    """(tasks seen, share of that task's steps asked, autonomy precision so far)."""
    points = []
    alone = wrong = 0
    for i, row in enumerate(learning, 1):
        alone += row["steps"] - row["asked"]
        wrong += row["alone_wrong"]
        share = row["asked"] / row["steps"] if row["steps"] else 0.0
        points.append((i, share, (alone - wrong) / alone if alone else None))
    return points
