"""Collaborative probing (OS-Kairos §4.1) as a product mechanism: labelled steps for any
backend, with the simulator's oracle as the teacher.

Pure Python (the simulator and the oracle, no Django). For every task of a suite two
branches run from the task's initial state:

* ``teacher`` — at each state the backend proposes, the record is written with the
  oracle's verdict (right: on a shortest path to success), and then the **teacher's**
  action is executed, as OS-Kairos does — or the backend's own when it was right, as an
  operator would approve it, so the next record's history is what the product's would
  be — so the states of a correct run are all labelled, up to the success state (where
  COMPLETE is right and anything else wrong);
* ``own`` — the backend's own action is executed whatever the verdict, so the states a
  wrong run reaches (and the recovery from them) are labelled too, until it declares
  COMPLETE / IMPOSSIBLE, runs out of steps, goes wrong ``OWN_WRONG_STREAK`` times in a
  row (a run that has lost its way repeats itself; the loop's records would drown every
  other state), or reaches a state the oracle cannot judge (a dead end: the step is
  labelled wrong and the branch ends).

A clarification is answered from the task's hidden preference and not labelled.

Records are the installation's handoff training record (``agents.runtime.models.TrainingRecord``:
``instruction``, ``goal``, ``history``, ``plan``, ``agent_action``, ``agent_confidence``,
``human_action`` — the teacher's action —, ``decision`` approve/edit, ``score_label`` 5/1)
plus the probe's own fields: ``source``, ``backend``, ``suite``, ``task``, ``branch``,
``app`` (foreground package), ``evidence`` and ``right``. The screenshot and UI tree are
not kept (``screenshot`` "", ``ui_nodes`` []): the calibrator reads the evidence.
"""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from agents.brain import loop
from agents.brain.backends.base import Backend, Proposal
from agents.evaluation.episode import EpisodeMemory
from devices.actions import COMPLETE, IMPOSSIBLE, Action

BRANCHES = ("teacher", "own")
OWN_WRONG_STREAK = 3


@dataclass(frozen=True)
class ProbeJob:
    """One task to probe; primitives only, so it crosses process boundaries."""

    suite: str
    task: str
    backend: str
    max_steps: int = 30
    max_states: int | None = None  # the oracle's search budget (None: its default)


def _safe_propose(backend: Backend, ctx: Any) -> Proposal:
    try:
        return backend.propose(ctx)
    except Exception as exc:  # a backend bug is a wrong step, not the end of probing
        return Proposal(action=None, error=f"backend failed: {exc!r}")


def probe_branch(device: Any, backend: Backend, task: Any, oracle: Any, branch: str, *,
                 suite: str, backend_name: str, max_steps: int = 30) -> list[dict[str, Any]]:
    """Run one branch (``teacher`` or ``own``) of ``task`` and return its records."""
    from devices.sim.oracle import NoPathError

    device.reset(task)
    memory = EpisodeMemory(instruction=task.instruction)
    apps = device.info.apps
    records: list[dict[str, Any]] = []
    budget = max_steps * 2  # clarifications do not perform actions, but are bounded
    performed = 0
    wrong_streak = 0
    while performed < max_steps and budget > 0:
        budget -= 1
        observation = device.observe()
        ctx = memory.context(observation, apps)
        proposal = _safe_propose(backend, ctx)
        if proposal.action is None and proposal.clarification is not None:
            question = proposal.clarification.question
            if question in memory.asked:
                break
            memory.asked.append(question)
            memory.answers.append(oracle.answer(question))
            continue
        state = device.snapshot()
        try:
            teacher = oracle.next_actions(state)
            right = proposal.action is not None and oracle.judge(state, proposal.action)
            dead_end = False
        except NoPathError:
            teacher, right, dead_end = [], False, True
        success = device.check(task)
        if proposal.action is not None and proposal.confidence is not None and proposal.evidence:
            records.append(_record(task, ctx, proposal, right, teacher, branch, suite,
                                   backend_name, observation.app, len(records)))
        if dead_end:
            break
        wrong_streak = 0 if right else wrong_streak + 1
        if branch == "teacher":
            if success:
                break  # the success state's verdict (COMPLETE right) is recorded
            if not teacher:
                break
            # A right proposal runs as the operator would approve it; otherwise the
            # teacher's action, a person's step in the history the next state shows.
            action = proposal.action if right and proposal.action is not None else teacher[0]
        else:
            if proposal.action is None or wrong_streak >= OWN_WRONG_STREAK:
                break
            action = proposal.action
        if action.type in (COMPLETE, IMPOSSIBLE):
            break
        target = loop.target_node(action, observation.nodes)
        outcome = device.perform(action)
        performed += 1
        loop.reflect(action, outcome.changed, target, memory.excluded)
        by = "agent" if branch == "own" or (proposal.action is not None and right) else "operator"
        memory.history.append(loop.history_entry(len(memory.history) + 1, action, by,
                                                 outcome.changed, target))
    return records


def _record(task: Any, ctx: Any, proposal: Proposal, right: bool, teacher: list[Action],
            branch: str, suite: str, backend_name: str, app: str, index: int) -> dict[str, Any]:
    evidence = dict(proposal.evidence)
    evidence.setdefault("action", proposal.action.type if proposal.action else "none")
    evidence.setdefault("raw", float(proposal.extra.get("raw_confidence", proposal.confidence)
                                     or proposal.confidence or 0.0))
    return {
        "source": "probe", "backend": backend_name, "suite": suite, "task": task.id,
        "branch": branch, "step_index": index, "app": app,
        "instruction": task.instruction, "goal": ctx.goal, "screenshot": "", "ui_nodes": [],
        "history": [entry.summary for entry in ctx.history], "plan": list(proposal.plan),
        "agent_action": proposal.action.to_json() if proposal.action else None,
        "agent_confidence": proposal.confidence,
        "human_action": teacher[0].to_json() if teacher else None,
        "decision": "approve" if right else "edit", "reason": "probe",
        "question": "", "answer": "", "score_label": 5 if right else 1,
        "evidence": evidence, "right": right,
    }


def probe_task(job: ProbeJob) -> list[dict[str, Any]]:
    """Both branches of one task, on a fresh simulated phone (module level: picklable)."""
    from agents.brain.backends import get_backend
    from agents.evaluation.suites import _find_task, _load_suite, _sim_device
    from devices.sim import Oracle

    suite = _load_suite(job.suite)
    task = _find_task(suite, job.task)
    device = _sim_device(suite, task)
    try:
        backend = get_backend(job.backend, device=device, task=task)
    except TypeError as exc:
        if "unexpected keyword argument" not in str(exc):
            raise
        backend = get_backend(job.backend)
    kwargs = {"max_states": job.max_states} if job.max_states else {}
    oracle = Oracle(device, task, **kwargs)
    records: list[dict[str, Any]] = []
    for branch in BRANCHES:
        records.extend(probe_branch(device, backend, task, oracle, branch,
                                    suite=str(suite.name), backend_name=job.backend,
                                    max_steps=min(task.max_steps or job.max_steps, job.max_steps)))
    return records


def probe_jobs(suites: Iterable[str], backend: str, *, max_steps: int = 30,
               max_states: int | None = None) -> list[ProbeJob]:
    """One job per scorable task of each suite (those with a success predicate)."""
    from agents.evaluation.suites import suite_tasks

    jobs = []
    for suite in suites:
        _, task_ids = suite_tasks(suite)
        jobs.extend(ProbeJob(suite, task, backend, max_steps, max_states) for task in task_ids)
    return jobs


def run_probes(jobs: list[ProbeJob], *, workers: int = 1,
               progress: Callable[[int, int], None] | None = None,
               probe_fn: Callable[[ProbeJob], list[dict[str, Any]]] = probe_task,
               ) -> Iterator[dict[str, Any]]:
    """Records of every job, job by job (in completion order with ``workers > 1``)."""
    total = len(jobs)
    if workers <= 1 or total <= 1:
        for done, job in enumerate(jobs, 1):
            yield from probe_fn(job)
            if progress:
                progress(done, total)
        return
    import multiprocessing

    # spawn, as evaluate: a forked copy of a held lock in a threaded parent deadlocks.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, total), mp_context=context) as pool:
        futures = [pool.submit(probe_fn, job) for job in jobs]
        for done, future in enumerate(as_completed(futures), 1):
            yield from future.result()
            if progress:
                progress(done, total)
