"""The agent's steps: proposed, executed once on the phone, the cursor moved on, recovered.

One step (DESIGN "Data flow of one step"): the phone observed, the backend proposes, the
gate decides; a ticket or a question opens when a person is needed, and a random share
of the steps that would act alone is asked anyway (spot checks). The decided action is
performed at most once (idempotent per task and index), the outcome recorded and the
next step scheduled, or the task finished when the agent ends it. A step a worker left
mid-action is settled from the device host's record (``abandon_executing_step``,
``follow_up_settled_step``, for the stall sweep in agents/runtime/recovery.py).
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from agents.brain import loop
from agents.brain.appknowledge import with_purposes
from agents.brain.backends.base import HistoryEntry, Proposal, StepContext
from agents.brain.experience.memory import pick_group
from agents.brain.spot_checks import SPOT_CHECK_NOTE, spot_check, system_rng
from agents.runtime import events
from agents.runtime.models import (
    DecidedBy, Message, Step, StepStatus, Task, TaskStatus, TicketKind, TicketReason,
)
from agents.runtime.services.chat import open_clarification
from agents.runtime.services.lifecycle import finish_task, schedule_step
from agents.runtime.services.tickets import open_ticket
from devices.actions import COMPLETE, TERMINAL_TYPES, Action, ActionOutcome, validate_action
from devices.host import DeviceError, get_device_client
from devices.models import Device
from devices.uitree import nodes_from_json, screen_signature

logger = logging.getLogger(__name__)


def _history(task: Task) -> list[HistoryEntry]:
    rows = task.steps.filter(status=StepStatus.DONE).exclude(executed_action=None).order_by(
        "index").values_list("index", "executed_action", "decided_by", "summary", "screen_changed")
    history = [
        HistoryEntry(index=n, action=action, by=by, summary=summary or "",
                     screen_changed=bool(changed) if changed is not None else True)
        for n, (_, action, by, summary, changed) in enumerate(rows, start=1)
    ]
    if history:
        # the last step's pick among siblings, read off the screen it was decided on: what
        # the experience memory keys the next step on (agents.brain.experience.memory.pick_group)
        last = rows[len(rows) - 1][0]
        nodes = task.steps.filter(index=last).values_list("ui_nodes", flat=True).first()
        history[-1] = replace(history[-1], pick=pick_group(history[-1].action,
                                                           nodes_from_json(nodes or [])))
    return history


def _backend_for(task: Task):
    from agents.brain.backends import get_backend

    kwargs: dict[str, Any] = {}
    if task.backend == "oracle":
        from devices.host import get_local_host
        from devices.sim import find_suite

        kwargs = {"device": get_local_host().device(task.device.name),
                  "task": find_suite(task.suite).task(task.suite_task)}
    # The gate reads the calibrated confidence (issue 12): the backend's evidence mapped
    # to P(right) by the installation's calibrator, or the shipped one.
    from agents.brain.calibration.gate import calibrated_backend, find_calibrator

    backend = get_backend(task.backend, **kwargs)
    if settings.KAIROS_EXPERIENCE:
        # Every backend proposes from the installation's experience (issue 25).
        from agents.brain.experience.layer import with_experience
        from agents.runtime.experience_store import DbStore

        # Earlier episodes are read only for backends whose prompt shows them.
        from agents.brain.calibration.experience import shipped_prior

        backend = with_experience(backend, DbStore(), episodes=3 if task.backend in
                                  BACKENDS_WITH_REFERENCES else 0,
                                  prior=shipped_prior() if settings.KAIROS_EXPERIENCE_PRIOR
                                  else None)
    return calibrated_backend(backend,
                              find_calibrator(task.backend, var_dir=settings.VAR_DIR))


# Backends whose prompts show D-PoT references; for the others the retrieval is skipped,
# since it costs a query and a TF-IDF pass on every step.
BACKENDS_WITH_REFERENCES = frozenset({"openai"})


def _references(task: Task) -> list[str]:
    """The two earlier succeeded goals most like this one (D-PoT §5.5): by a local
    sentence-embedding model when one is installed (``agents.brain.embeddings``), else TF-IDF."""
    from agents.brain.embeddings import load_embedder
    from agents.brain.planning import ReferenceIndex

    if task.backend not in BACKENDS_WITH_REFERENCES:
        return []
    goals = list(Task.objects.filter(status=TaskStatus.SUCCEEDED).exclude(id=task.id)
                 .order_by("-finished_at").values_list("instruction", flat=True)[:200])
    if not goals:
        return []
    embed = load_embedder()
    if embed is not None:
        try:
            return ReferenceIndex(goals, embed=embed).most_similar(task.instruction, k=2)
        except Exception:  # a model that fails mid-run costs the step its references' quality only
            logger.exception("sentence embedding failed; D-PoT references use TF-IDF")
    return ReferenceIndex(goals).most_similar(task.instruction, k=2)


def run_step(task_id: Any, index: int) -> str:
    """One agent step (DESIGN "Data flow of one step"). Idempotent for a given index.

    Returns what happened, for logs and tests: ``stale``, ``waiting``, ``executed``,
    ``finished`` or ``duplicate``.
    """
    task = Task.objects.select_related("device").filter(id=task_id).first()
    if task is None or task.status != TaskStatus.RUNNING or task.cursor != index:
        return "stale"
    step = Step.objects.filter(task=task, index=index).first()
    if step is None:
        step = _propose_step(task, index)
        if step is None:
            return "duplicate"
    if step.status in (StepStatus.WAITING, StepStatus.DONE, StepStatus.ANSWERED,
                       StepStatus.CANCELLED):
        return "waiting" if step.status == StepStatus.WAITING else "stale"
    if step.status == StepStatus.EXECUTING:
        return abandon_executing_step(task, step)
    return execute_step(task, step)


_spot_rng = system_rng()  # the operating system's entropy: nothing can predict a draw


def spot_check_share(device: Device | None) -> float:
    """The share of would-be autonomous steps asked anyway: the phone's own, else
    ``KAIROS_SPOT_CHECK`` (issue 24, item 2)."""
    if device is not None and device.spot_check is not None:
        return float(device.spot_check)
    return float(settings.KAIROS_SPOT_CHECK)


def _screen_visits(task: Task, nodes: list) -> int:
    """Steps the agent ran on this very screen since a person last decided (a step with a
    ticket, or an operator's input): what the no-progress guard counts."""
    asked = task.steps.filter(Q(decided_by=DecidedBy.OPERATOR) | Q(tickets__isnull=False)
                              ).order_by("-index").values_list("index", flat=True).first()
    rows = task.steps.filter(status=StepStatus.DONE, decided_by=DecidedBy.AGENT)
    if asked is not None:
        rows = rows.filter(index__gt=asked)
    current = screen_signature(nodes)
    return loop.count_visits(
        [screen_signature(nodes_from_json(ui)) for ui in rows.values_list("ui_nodes", flat=True)
         if ui], current)


def _json_safe(value: Any) -> Any:
    """A backend's free-form ``extra`` as plain JSON (odd values become strings)."""
    try:
        return json.loads(json.dumps(value or {}, default=str))
    except (TypeError, ValueError):
        return {}


def _propose_step(task: Task, index: int) -> Step | None:
    client = get_device_client()
    started = time.perf_counter()
    try:
        observation = client.observe(task.device.name)
    except DeviceError as exc:
        with transaction.atomic():
            try:
                step = Step.objects.create(task=task, index=index, status=StepStatus.WAITING)
            except IntegrityError:
                return None
            _device_error_ticket(task, step, str(exc))
        return step
    observed = time.perf_counter()
    ctx = StepContext(
        instruction=task.instruction, observation=observation, history=_history(task),
        answers=list(task.answers), excluded_elements=set(task.excluded_elements),
        # adb phones list theirs too, without descriptions: the agent knows the standard ones
        apps=with_purposes(client.info(task.device.name).apps),
        references=_references(task), asked=list(task.asked), step_index=index,
        screen_visits=_screen_visits(task, observation.nodes),
    )
    try:
        proposal = _backend_for(task).propose(ctx)
    except Exception as exc:  # a backend bug is a ticket, not a crashed loop
        logger.exception("backend %s failed", task.backend)
        proposal = Proposal(action=None, model_error=f"backend failed: {exc}")
    decision = loop.decide(proposal, ctx, task.threshold)
    if decision.outcome == loop.EXECUTE:
        decision = _unless_drifted(decision, observation.app)
    decided = time.perf_counter()
    proposed = decision.action or proposal.action
    executes = decision.outcome == loop.EXECUTE and decision.action is not None
    # A random share of the steps that would act alone is asked anyway (issue 24): drawn
    # here, after the backend has proposed, so no backend sees or predicts the draw.
    spot = executes and spot_check(spot_check_share(task.device), _spot_rng)
    executes = executes and not spot
    # The screenshot file is written first so the step row is inserted complete, in one
    # statement; a duplicate delivery that loses the insert removes its file again.
    screenshot = default_storage.save(
        Step.screenshot.field.generate_filename(None, f"{task.id}-{index}.jpg"),
        ContentFile(observation.jpeg))
    try:
        with transaction.atomic():
            step = Step.objects.create(
                task=task, index=index, frame=observation.frame, screenshot=screenshot,
                screen_width=observation.width, screen_height=observation.height,
                app=observation.app, ui_nodes=[n.to_json() for n in observation.nodes],
                candidates=list(proposal.candidates), plan=list(proposal.plan),
                current_step=proposal.current_step, thought=proposal.thought,
                raw_output=proposal.raw[:20000],
                proposed_action=proposed.to_json() if proposed else None,
                confidence=proposal.confidence,
                prompt_tokens=proposal.prompt_tokens,
                completion_tokens=proposal.completion_tokens,
                extra=_json_safe(proposal.extra),
                calibrator_version=str(proposal.extra.get("calibrator_version") or "")[:64],
                observe_ms=(observed - started) * 1000, decide_ms=(decided - observed) * 1000,
                status=StepStatus.READY if executes else StepStatus.WAITING,
                executed_action=decision.action.to_json() if executes else None,
            )
            if decision.outcome == loop.CLARIFY:
                open_clarification(task, step, decision.question, decision.options)
            elif decision.outcome == loop.TICKET:
                open_ticket(task, step, TicketKind.INTERVENTION, decision.reason or
                            TicketReason.LOW_CONFIDENCE, note=decision.note)
            elif spot:
                open_ticket(task, step, TicketKind.INTERVENTION, TicketReason.SPOT_CHECK,
                            note=SPOT_CHECK_NOTE)
    except IntegrityError:
        default_storage.delete(screenshot)
        return None
    return step


def _unless_drifted(decision: loop.Decision, app: str) -> loop.Decision:
    """A step that would act alone on an app whose recent confident steps were wrong too
    often asks a person instead (issue 24, item 5; the rule: agents/brain/calibration/drift.py)."""
    if not app:
        return decision
    from agents.runtime.learning import drift_for_app

    state = drift_for_app(app)
    if not state.drifted:
        return decision
    return loop.Decision(
        loop.TICKET, action=decision.action, reason=TicketReason.LOW_CONFIDENCE,
        target=decision.target,
        note=f"drift: {state.describe()}; its steps ask until new labels show otherwise")


def execute_step(task: Task, step: Step) -> str:
    """Run the step's decided action once; a second delivery finds it claimed.

    A step a person decided (it had a ticket) waited while the phone may have moved on:
    the host is asked first whether it already performed this step (a worker that timed
    out on a slow host), then the screen is observed again, and an action decided for
    another screen is not run (issue 11, item 7): the step is cancelled and the agent
    looks again, opening a new ticket on the new screen if it is unsure.
    """
    won = Step.objects.filter(id=step.id, status__in=(StepStatus.READY, StepStatus.PROPOSED)
                              ).update(status=StepStatus.EXECUTING)
    if not won:
        return "duplicate"
    Task.objects.filter(id=task.id).update(progressed_at=timezone.now())
    action = validate_action(step.executed_action)
    assert isinstance(action, Action), "only validated actions are stored for execution"
    if action.type in TERMINAL_TYPES:
        # Judged first (the phone is asked, which takes a while), then the step and the
        # task end in one transaction: a worker killed in between used to leave the step
        # done and the task running for good (the chaos test under load, 2026-11-28).
        status, success, error = _verdict(task, action, reason=step.thought)
        with transaction.atomic():
            if not Step.objects.filter(id=step.id, status=StepStatus.EXECUTING).update(
                    status=StepStatus.DONE, outcome="finished", summary=action.describe(),
                    executed_at=timezone.now()):
                return "stale"  # the stall sweep closed it and moved on meanwhile
            finish_task(task, status, success=success, error=error)
        return "finished"
    client = get_device_client()
    origin = _origin(task, step)
    started = time.perf_counter()
    try:
        outcome = None
        if step.tickets.exists():
            recorded = client.performed(task.device.name, origin)
            if recorded is not None:
                outcome = _outcome(recorded)
            elif step.ui_nodes and screen_signature(nodes_from_json(step.ui_nodes)) != \
                    screen_signature(client.observe(task.device.name).nodes):
                return _skip_moved_screen(task, step)
        if outcome is None:
            outcome = client.perform(task.device.name, action, origin=origin)
    except DeviceError as exc:
        with transaction.atomic():
            # Conditional: the stall sweep may have closed a step this slow already.
            if not Step.objects.filter(id=step.id, status=StepStatus.EXECUTING).update(
                    status=StepStatus.WAITING, outcome=f"error: {exc}"[:255]):
                return "stale"
            _device_error_ticket(task, step, str(exc))
        return "waiting"
    return _record_outcome(task, step, action, outcome, started)


def _origin(task: Task, step: Step) -> dict[str, Any]:
    """The ids the device host files a step's action under (at most once per step)."""
    return {"task": str(task.id), "step": step.index}


def _outcome(data: dict[str, Any]) -> ActionOutcome:
    return ActionOutcome(ok=data["ok"], changed=data["changed"], error=data.get("error"),
                         details=data.get("details") or {})


def _device_error_ticket(task: Task, step: Step, note: str) -> None:
    """The phone could not be reached for ``step`` (now waiting): a person decides."""
    Task.objects.filter(id=task.id, status=TaskStatus.RUNNING).update(
        status=TaskStatus.WAITING_OPERATOR)
    open_ticket(task, step, TicketKind.INTERVENTION, TicketReason.DEVICE_ERROR,
                note=note, set_status=False)
    # The owner hears it from the task chat, not only from a status badge.
    message = Message.objects.create(
        task=task, sender=Message.Sender.SYSTEM,
        text="The phone stopped answering, so an operator has been asked to check it. "
             "The task goes on once they have.")
    events.chat_message(message)


def _record_outcome(task: Task, step: Step, action: Action, outcome: ActionOutcome,
                    started: float) -> str:
    nodes = nodes_from_json(step.ui_nodes) if step.ui_nodes else []
    target = loop.target_node(action, nodes)
    excluded = set(task.excluded_elements)
    loop.reflect(action, outcome.changed, target, excluded)
    entry = loop.history_entry(step.index, action, step.decided_by, outcome.changed, target)
    with transaction.atomic():
        if not Step.objects.filter(id=step.id, status=StepStatus.EXECUTING).update(
            status=StepStatus.DONE, screen_changed=outcome.changed,
            outcome=("changed" if outcome.changed else "unchanged") if outcome.ok
            else f"error: {outcome.error}"[:255],
            summary=entry.summary[:255], execute_ms=(time.perf_counter() - started) * 1000,
            executed_at=timezone.now(),
        ):
            return "stale"  # the stall sweep closed it and moved on meanwhile
        result = _advance(task, step.index, excluded)
    return "executed" if result == "scheduled" else result


def _skip_moved_screen(task: Task, step: Step) -> str:
    with transaction.atomic():
        if not Step.objects.filter(id=step.id, status=StepStatus.EXECUTING).update(
                status=StepStatus.CANCELLED,
                outcome="not run: the screen changed after the action was decided"):
            return "stale"
        message = Message.objects.create(
            task=task, sender=Message.Sender.SYSTEM,
            text="The phone's screen changed before the chosen action could run, so it was "
                 "not run. The agent looks at the screen again.")
        events.chat_message(message)
        return _advance(task, step.index)


def abandon_executing_step(task: Task, step: Step) -> str:
    """A worker died mid-action (a redelivered message, or the stall sweep found it).

    The device host is asked whether it performed the step: it answers in turn with this
    phone's other requests, after an earlier perform of it finished or expired. Performed:
    the step is recorded as done. Not performed: the step is cancelled and the next step
    observes the screen again, so the action is never run twice. The host unreachable: the
    step waits for a person with a ``device_error`` ticket.
    """
    try:
        recorded = get_device_client().performed(task.device.name, _origin(task, step))
    except DeviceError as exc:
        with transaction.atomic():
            if not Step.objects.filter(id=step.id, status=StepStatus.EXECUTING).update(
                    status=StepStatus.WAITING,
                    outcome="unknown: the worker stopped during the action"):
                return "stale"
            _device_error_ticket(task, step, f"the worker stopped during the action, and "
                                             f"the phone cannot be asked whether it acted: {exc}")
        return "waiting"
    action = validate_action(step.executed_action)
    if recorded is not None and isinstance(action, Action):
        return _record_outcome(task, step, action, _outcome(recorded), time.perf_counter())
    with transaction.atomic():
        if not Step.objects.filter(id=step.id, status=StepStatus.EXECUTING).update(
                status=StepStatus.CANCELLED,
                outcome="not run: the worker stopped before the phone acted"):
            return "stale"
        return _advance(task, step.index)


def follow_up_settled_step(task: Task, step: Step) -> str:
    """The stall sweep found a running task whose step at the cursor is already settled
    (done, answered or cancelled): what follows the step was lost with its worker. Code
    before 2026-11-28 ended a COMPLETE step and its task in two writes, and a worker killed
    between them left the task running for good. A terminal step ends the task now; any
    other moves the cursor on, and the next step observes the screen again."""
    action = validate_action(step.executed_action) if step.executed_action else None
    if step.status == StepStatus.DONE and isinstance(action, Action) \
            and action.type in TERMINAL_TYPES:
        status, success, error = _verdict(task, action, reason=step.thought)
        return "finished" if finish_task(task, status, success=success, error=error) \
            else "stale"
    with transaction.atomic():
        return _advance(task, step.index)


def _advance(task: Task, index: int, excluded: set[str] | None = None) -> str:
    """Move the cursor past ``index`` and schedule the next step. Call inside a transaction."""
    changes: dict[str, Any] = {"cursor": index + 1}
    if excluded is not None and excluded != set(task.excluded_elements):
        changes["excluded_elements"] = sorted(excluded)
    won = Task.objects.filter(id=task.id, status=TaskStatus.RUNNING, cursor=index).update(
        **changes)
    if not won:
        return "stale"
    for field, value in changes.items():
        setattr(task, field, value)
    executed = task.steps.filter(status=StepStatus.DONE).exclude(executed_action=None).count()
    if executed >= task.max_steps:
        finish_task(task, TaskStatus.FAILED, error="stopped at the step limit")
        return "finished"
    schedule_step(task.id, index + 1)
    events.task_updated(task)
    return "scheduled"


def _verdict(task: Task, action: Action, reason: str = "") -> tuple[str, bool | None, str]:
    """How a task the agent ends with ``action`` (COMPLETE / IMPOSSIBLE) ends: its status,
    whether the phone shows what was asked (suite tasks only) and the user's reason."""
    success: bool | None = None
    if task.suite and task.suite_task:
        try:
            success = get_device_client().check(task.device.name, task.suite, task.suite_task)
        except DeviceError as exc:
            logger.warning("could not judge task %s: %s", task.id, exc)
    error = ""
    if action.type == COMPLETE:
        status = TaskStatus.SUCCEEDED if success is not False else TaskStatus.FAILED
        if status == TaskStatus.FAILED:
            error = "the agent thought it was done, but the phone does not show what was asked"
    else:
        status = TaskStatus.FAILED
        # The user is told why: the agent's own reason for giving up.
        reason = reason.strip().rstrip(".") or "no reason given"
        error = f"the agent believes this cannot be done: {reason}"
    return status, success, error[:2000]
