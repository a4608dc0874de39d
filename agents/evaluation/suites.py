"""Offline evaluation: dataset replay (AITZ, StaR toggles) and simulated suites across γ.

Pure Python; ``manage.py evaluate`` and ``evaluate_dataset`` are thin wrappers over
:func:`evaluate_suite`, :func:`evaluate_dataset`, :func:`format_table` and
:func:`agents.brain.plot.gamma_plot_svg`. Every number comes from
:mod:`agents.brain.metrics`, so the admin pages, the commands and the tests agree on what "SR" means.

Dataset replay lives in :mod:`agents.evaluation.replay` and the text tables in
:mod:`agents.evaluation.tables`; their names are imported here, so callers keep importing
them from this module.
"""
from __future__ import annotations

import functools
import multiprocessing
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from agents.brain.calibration.gate import calibrated_backend
from agents.brain.metrics import METRIC_KEYS, StepLabel, TaskRecord, summarize
from agents.evaluation.replay import (  # noqa: F401 (re-exported)
    DEFAULT_THRESHOLD, ProgressCallback, dataset_observation, evaluate_dataset,
)
from agents.evaluation.tables import _number, format_table  # noqa: F401 (re-exported)
from devices.actions import TERMINAL_TYPES
from devices.sim.oracle import DEFAULT_MAX_STATES

DEFAULT_THRESHOLDS: tuple[float, ...] = (0, 1, 2, 3, 4, 5)
DEFAULT_ORACLE_BUDGET = DEFAULT_MAX_STATES


# --- simulated suites ------------------------------------------------------------------


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to run; primitives only, so it crosses process boundaries."""

    suite: str  # a suite file path or a bundled suite name
    task: str
    threshold: float
    backend: str
    operator: str = "oracle"
    max_steps: int = 30
    # Which calibrator the gate reads (agents.brain.calibration.gate): "default" (the
    # installation's, as serve uses), "off" (the backend's own claim), "out" (the
    # shipped one's variant fitted without this suite: out of sample), "in" (fitted on
    # every suite, this one included).
    calibration: str = "default"
    var_dir: str = ""
    # States the oracle may search from one state before it calls it a dead end
    # (``evaluate --oracle-budget``, ``KAIROS_ORACLE_BUDGET``).
    oracle_budget: int = DEFAULT_ORACLE_BUDGET


EpisodeFn = Callable[[EpisodeJob], TaskRecord]


class EpisodeFailed(RuntimeError):
    """An episode raised (a simulator or runner bug): names the task and γ, so a sweep of
    hundreds of episodes says which one to rerun with ``run_task``."""

    def __init__(self, job: EpisodeJob, error: BaseException) -> None:
        super().__init__(
            f"task {job.task!r} of suite {job.suite!r} at threshold {_number(job.threshold)} "
            f"failed: {error!r}"
        )
        self.job = job


def evaluate_suite(
    suite: str | Path,
    backend_name: str,
    thresholds: Iterable[float] = DEFAULT_THRESHOLDS,
    *,
    operator: str = "oracle",
    jobs: int = 1,
    progress: ProgressCallback | None = None,
    max_steps: int = 30,
    tasks: Sequence[str] | None = None,
    episode_fn: EpisodeFn | None = None,
    calibration: str = "default",
    var_dir: str = "",
    oracle_budget: int = DEFAULT_ORACLE_BUDGET,
) -> dict[str, Any]:
    """Run every task of a simulated suite at every γ and report the CONTRACT JSON.

    ``jobs > 1`` runs episodes in worker processes (spawned, each building its own
    SimDevice and backend by name, so nothing unpicklable crosses). ``progress(done,
    total)`` is called in this process after each episode. ``tasks`` restricts (and
    orders) the task ids; ``episode_fn`` replaces the simulator run — it must be a
    module-level function when ``jobs > 1``. An episode that reaches a state from which
    the oracle finds no path within ``oracle_budget`` states is scored as failed and
    counted in ``dead_ends``; the sweep goes on (only a crash raises EpisodeFailed).
    """
    thresholds = [float(t) for t in thresholds]
    if not thresholds:
        raise ValueError("at least one threshold is needed")
    suite_ref = str(suite)
    skipped: list[str] = []
    if tasks is None:
        suite_name, task_ids = suite_tasks(suite_ref)
        skipped = unscored_tasks(suite_ref)
    else:
        suite_name, task_ids = _suite_label(suite_ref), list(tasks)
    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {', '.join(CALIBRATIONS)}")
    episode_fn = episode_fn or run_suite_episode
    if oracle_budget < 1:
        raise ValueError("the oracle's budget must be at least 1 state")
    work = [
        EpisodeJob(suite_ref, task, threshold, backend_name, operator, max_steps,
                   oracle_budget=oracle_budget, calibration=calibration, var_dir=var_dir)
        for threshold in thresholds for task in task_ids
    ]
    records: dict[EpisodeJob, TaskRecord] = {}
    total = len(work)
    if jobs <= 1 or total <= 1:
        for done, job in enumerate(work, 1):
            try:
                records[job] = episode_fn(job)
            except Exception as exc:
                raise EpisodeFailed(job, exc) from exc
            if progress is not None:
                progress(done, total)
    else:
        # spawn, not fork: the evaluate command may run inside a process with threads
        # (Django, an in-process worker), and a forked copy of a held lock deadlocks.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, total), mp_context=context) as pool:
            futures = {pool.submit(episode_fn, job): job for job in work}
            for done, future in enumerate(as_completed(futures), 1):
                job = futures[future]
                try:
                    records[job] = future.result()
                except Exception as exc:
                    for pending in futures:
                        pending.cancel()
                    raise EpisodeFailed(job, exc) from exc
                if progress is not None:
                    progress(done, total)
    results = []
    for threshold in thresholds:
        group = [records[job] for job in work if job.threshold == threshold]
        results.append({
            "threshold": _number(threshold),
            **summarize(group),
            **calibration_summary(group),
            "dead_ends": sum(1 for record in group if record.dead_end),
            # Suites that mark sensitive elements (``sensitive`` in a task): proposals that
            # tapped one, and how many of those the gate asked about (the policy's goal:
            # all of them, at every γ).
            "sensitive_steps": sum(record.sensitive_steps for record in group),
            "sensitive_asked": sum(record.sensitive_asked for record in group),
            "per_task": [record.per_task_json() for record in group],
        })
    # Tasks without a success predicate (free-form demo instructions) cannot be scored:
    # they are left out and named, so a suite that carries demos still evaluates.
    return {"suite": suite_name, "backend": backend_name, "results": results,
            "skipped": skipped}


def _calibrated_steps(records: Sequence[TaskRecord]) -> list[tuple[float, bool]]:
    return [(label.p_right, not label.needed) for record in records for label in record.labels
            if label.p_right is not None and label.needed is not None]


def calibration_summary(records: Sequence[TaskRecord]) -> dict[str, Any]:
    """``ece`` (expected calibration error of the calibrated P(right) over the judged
    steps), ``ece_by_chance`` (what a perfectly calibrated confidence could show by chance
    on these steps, 95th percentile: the yardstick for ``ece`` on a small suite) and, when
    a calibrator scored any step, ``reliability`` (per P(right) bin: steps, mean
    calibrated P(right), observed share right). ``ece`` and ``ece_by_chance`` are None
    when no step was scored by a calibrator."""
    from agents.brain.calibration.fit import (
        ece_by_chance, expected_calibration_error, reliability_bins,
    )

    pairs = _calibrated_steps(records)
    summary: dict[str, Any] = {"ece": expected_calibration_error(pairs),
                               "ece_by_chance": ece_by_chance([p for p, _ in pairs])}
    if summary["ece"] is not None:
        summary["reliability"] = reliability_bins(pairs)
    return summary


def task_record_from_episode(result: Any) -> TaskRecord:
    """Labels for the metrics from the runner's ``EpisodeResult`` (duck-typed).

    Per step (a ``StepRecord``):
    * ``needed``/``asked`` as recorded; clarification records carry ``needed=None`` and
      so stay out of HSR, but count in ``clarifications``.
    * ``action_match`` (SR): the step's executed action was right — the agent's proposal
      was right, or a person was asked and acted (OS-Kairos C.4: an intervened step uses
      the ground truth), unless the runner recorded its own ``action_match``.
    * ``type_match`` (Type): the runner's ``type_match`` when it records one; otherwise a
      right step matched its type, and a wrong unasked step is counted as a type miss
      too (a lower bound: without the oracle's action its type is unknown).
    ``steps`` counts actions performed on the device; COMPLETE/IMPOSSIBLE are declarations,
    not operations, and the oracle's optimum does not count them either (RE).
    """
    labels: list[StepLabel] = []
    for step in result.steps:
        needed = getattr(step, "needed", None)
        asked = bool(getattr(step, "asked", False))
        executed = getattr(step, "executed", None)
        if getattr(step, "kind", None) == "clarification" or needed is None:
            labels.append(StepLabel(needed=None, asked=asked))
            continue
        action_match = getattr(step, "action_match", None)
        if action_match is None:
            action_match = (not needed) or (asked and executed is not None)
        type_match = getattr(step, "type_match", None)
        if type_match is None:
            type_match = bool(action_match)
        p_right = getattr(step, "p_right", None)
        labels.append(StepLabel(needed, asked, type_match, action_match, p_right))
    steps = sum(
        1 for step in result.steps
        if getattr(step, "executed", None)
        and step.executed.get("type") not in TERMINAL_TYPES
    )
    return TaskRecord(
        task=str(result.task),
        success=result.success,
        steps=steps,
        interventions=int(result.interventions),
        clarifications=int(result.clarifications),
        optimal_steps=result.optimal_steps,
        labels=tuple(labels),
        dead_end=bool(getattr(result, "dead_end", False)),
        sensitive_steps=sum(1 for step in result.steps if getattr(step, "sensitive", False)),
        sensitive_asked=sum(1 for step in result.steps
                            if getattr(step, "sensitive", False) and getattr(step, "asked", False)),
    )



def build_backend(job: "EpisodeJob", device: Any, task: Any) -> Any:
    """The job's backend for one episode. Only the oracle backend needs the device and the
    task (CONTRACT), and the oracle's budget; a constructor that does not take them is
    built with fewer."""
    from agents.brain.backends import get_backend

    attempts: list[dict[str, Any]] = [
        {"device": device, "task": task, "max_states": job.oracle_budget},
        {"device": device, "task": task}, {}]
    for kwargs in attempts:
        try:
            return get_backend(job.backend, **kwargs)
        except TypeError as exc:
            if "unexpected keyword argument" not in str(exc) or not kwargs:
                raise
    raise AssertionError("unreachable: the last attempt takes no arguments")


def run_suite_episode(job: EpisodeJob) -> TaskRecord:
    """One episode on a fresh simulated device with the lead's pure runner
    (:func:`agents.evaluation.episode.run_episode`), bounded by the smaller of the task's own
    ``max_steps`` and the job's (``evaluate --max-steps``)."""
    from agents.evaluation.episode import run_episode
    from devices.sim import Oracle

    suite = _load_suite(job.suite)
    task = _find_task(suite, job.task)
    device = _sim_device(suite, task)
    oracle = Oracle(device, task, max_states=job.oracle_budget)
    backend = calibrated_backend(build_backend(job, device, task),
                                 episode_calibrator(job, str(suite.name)))
    result = run_episode(
        device, backend, task, threshold=job.threshold, operator=job.operator,
        max_steps=min(getattr(task, "max_steps", None) or job.max_steps, job.max_steps),
        oracle=oracle,
    )
    return task_record_from_episode(result)


CALIBRATIONS = ("default", "off", "out", "in")


def episode_calibrator(job: EpisodeJob, suite_name: str) -> Any:
    """The calibrator ``job.calibration`` asks for (None: the backend's own claim)."""
    from agents.brain.calibration.gate import find_calibrator

    if job.calibration == "off":
        return None
    calibrator = find_calibrator(job.backend, var_dir=job.var_dir or None)
    if calibrator is None and job.calibration in ("out", "in"):
        raise ValueError(f"no calibrator for backend '{job.backend}': run manage.py probe "
                         "and manage.py calibrate first")
    if calibrator is not None and job.calibration == "out":
        return calibrator.for_suite(suite_name)
    return calibrator


def _sim_device(suite: Any, task: Any) -> Any:
    """A fresh simulated phone for one episode (the runner resets it to the task's initial
    state). Built by name, as the device host builds its phones; a suite file may bring
    apps of its own, so its bundle is handed over when the simulator takes one."""
    import inspect

    from devices.sim import SimDevice

    try:
        params = inspect.signature(SimDevice).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    extra = {key: suite.bundle for key in ("apps", "bundle") if key in params}
    return SimDevice(f"eval-{task.id}", **extra)


def suite_tasks(suite: str) -> tuple[str, list[str]]:
    """The suite's name and the ids of the tasks it can score (those with a success
    predicate), in file order."""
    loaded = _load_suite(suite)
    return str(getattr(loaded, "name", None) or _suite_label(suite)), [
        str(task.id) for task in loaded.tasks if _scorable(task)
    ]


def unscored_tasks(suite: str) -> list[str]:
    """Ids of the suite's tasks without a success predicate (demo instructions), which
    evaluation skips: no oracle, no success, nothing to score."""
    return [str(task.id) for task in _load_suite(suite).tasks if not _scorable(task)]


def _scorable(task: Any) -> bool:
    return getattr(task, "success", True) is not None


@functools.lru_cache(maxsize=8)
def _load_suite(suite: str) -> Any:
    # Cached per process: a worker runs many episodes of the same suite.
    from devices.sim import find_suite

    return find_suite(suite)


def _find_task(suite: Any, task_id: str) -> Any:
    if hasattr(suite, "task"):
        return suite.task(task_id)
    for task in suite.tasks:
        if str(task.id) == task_id:
            return task
    raise KeyError(f"suite {getattr(suite, 'name', '?')!r} has no task {task_id!r}")


def _suite_label(suite: str) -> str:
    path = Path(suite)
    return path.stem if path.suffix else suite


__all__ = [
    "DEFAULT_THRESHOLD", "DEFAULT_THRESHOLDS", "EpisodeFailed", "EpisodeJob", "METRIC_KEYS",
    "dataset_observation", "evaluate_dataset", "evaluate_suite", "format_table",
    "run_suite_episode", "suite_tasks", "task_record_from_episode", "unscored_tasks",
]
