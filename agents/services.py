"""Everything that changes a task, a step or a ticket.

``check_*`` validates and authorises, ``do``-style functions perform. Every status change
is a conditional UPDATE (``filter(status=…).update(…)``): a race has exactly one winner
and a redelivered Celery task does nothing twice. Events go out after commit.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from agents import events, loop
from agents.backends.base import HistoryEntry, Proposal, StepContext
from agents.models import (
    ACTIVE_TASK_STATUSES, DecidedBy, Decision, Message, Step, StepStatus, Task,
    TaskStatus, Ticket, TicketKind, TicketReason, TicketStatus, TrainingRecord,
)
from devices.actions import (
    COMPLETE, IMPOSSIBLE, TERMINAL_TYPES, Action, ActionError, ActionOutcome, text_problem,
    validate_action,
)
from devices.host import DeviceError, get_device_client
from devices.models import Device, DeviceStatus
from devices.uitree import nodes_from_json, screen_signature

logger = logging.getLogger(__name__)

MAX_INSTRUCTION_LENGTH = 2000
MAX_MESSAGE_LENGTH = 2000


class ServiceError(Exception):
    """A refused request; views turn it into a JSON 4xx with ``detail``."""

    status = 400

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


class NotFound(ServiceError):
    status = 404


class Forbidden(ServiceError):
    status = 403


class Conflict(ServiceError):
    status = 409


class TooMany(ServiceError):
    status = 429


class DeviceUnavailable(ServiceError):
    """The phone did not answer: nothing is wrong with the request; try again later."""

    status = 503


# --- roles ---------------------------------------------------------------------------

def is_operator(user: Any) -> bool:
    return bool(user and user.is_authenticated and (
        user.is_superuser or user.groups.filter(name__in=("operators", "admins")).exists()
    ))


def is_admin(user: Any) -> bool:
    return bool(user and user.is_authenticated and (
        user.is_superuser or user.groups.filter(name="admins").exists()
    ))


# --- access --------------------------------------------------------------------------

def usable_devices(user: Any):
    """The phones ``user`` may run tasks on: all for operators; for end users the phones
    open to everyone (no users listed) and those listing them."""
    devices = Device.objects.order_by("name")
    if is_operator(user):
        return devices
    return devices.filter(Q(users=None) | Q(users=user)).distinct()


def access_device(user: Any, ref: Any) -> Device:
    """A device by id or name that ``user`` may run tasks on."""
    if not isinstance(ref, str) or text_problem(ref) or len(ref) > 200:
        raise NotFound("unknown device")
    device = None
    try:
        device = Device.objects.filter(id=ref).first()
    except Exception:  # not a UUID
        device = None
    if device is None:
        device = Device.objects.filter(name=ref).first()
    if device is None:
        raise NotFound(f"unknown device '{str(ref)[:64]}'")
    if not usable_devices(user).filter(id=device.id).exists():
        raise Forbidden(f"you may not use device '{device.name}'")
    return device


def visible_tasks(user: Any):
    tasks = Task.objects.select_related("device", "owner")
    return tasks if is_operator(user) else tasks.filter(owner=user)


def access_task(user: Any, task_id: Any) -> Task:
    try:
        task = visible_tasks(user).filter(id=task_id).first()
    except Exception:
        task = None
    if task is None:
        raise NotFound("no such task")
    return task


def access_ticket(user: Any, ticket_id: Any) -> Ticket:
    if not is_operator(user):
        raise Forbidden("only operators handle tickets")
    try:
        ticket = Ticket.objects.select_related("task", "task__device", "step", "assignee").filter(
            id=ticket_id).first()
    except Exception:
        ticket = None
    if ticket is None:
        raise NotFound("no such ticket")
    return ticket


# --- creating and starting tasks -----------------------------------------------------

def check_text(text: str, what: str) -> str:
    """Refuse text no database or socket can carry (NUL, lone surrogates)."""
    if problem := text_problem(text):
        raise ServiceError(f"the {what} {problem}")
    return text


def check_instruction(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ServiceError("the instruction is empty")
    text = check_text(text.strip(), "instruction")
    if len(text) > MAX_INSTRUCTION_LENGTH:
        raise ServiceError(
            f"the instruction is {len(text)} characters; at most {MAX_INSTRUCTION_LENGTH}"
        )
    return text


def default_threshold(device: Device | None = None) -> float:
    """γ for a new task: the phone's own, else the admins' default, else the environment's.

    Admins set the first two on /review/calibration/ (or in /admin/);
    ``KAIROS_DEFAULT_THRESHOLD`` stays the initial default of an installation.
    """
    from agents.models import InstallationSettings

    if device is not None and device.threshold is not None:
        return float(device.threshold)
    stored = InstallationSettings.objects.filter(pk=1).values_list(
        "default_threshold", flat=True).first()
    return float(stored if stored is not None else settings.KAIROS_DEFAULT_THRESHOLD)


def check_threshold(value: Any, device: Device | None = None) -> float:
    if value is None:
        return default_threshold(device)
    try:
        threshold = float(value)
    except (TypeError, ValueError):
        raise ServiceError("threshold must be a number between 0 and 5") from None
    if not 0 <= threshold <= 5 or threshold != threshold:
        raise ServiceError(f"threshold must be between 0 and 5, not {value}")
    return threshold


def check_requested_threshold(user: Any, value: Any, device: Device) -> float | None:
    """γ a person asks for when starting a task from the API or the web form (issue 23.6).

    The phone's γ (else the installation's) is set by admins; end users may raise it for
    their own task but not lower it — a lower γ lets the agent act on steps it is less sure
    of, which only operators and admins may allow. Refused with 403 naming the phone's γ
    rather than silently clamped, so the caller knows what their task runs at. None (not
    given) means the phone's γ.
    """
    if value is None:
        return None
    threshold = check_threshold(value, device)
    floor = default_threshold(device)
    if threshold < floor and not is_operator(user):
        raise Forbidden(
            f"threshold {threshold:g} is below the γ of {floor:g} set for '{device.name}'; "
            f"only operators and admins may lower it (leave it out, or ask for {floor:g} "
            "or more)")
    return threshold


def check_queue_room(user: Any) -> None:
    """At most ``KAIROS_MAX_QUEUED_PER_USER`` of an end user's tasks wait for a phone at
    once (0: no limit), so one person cannot fill every phone's queue (issue 23.7).
    Operators and admins queue batches on purpose (suites, the chaos test) and are not
    limited."""
    limit = settings.KAIROS_MAX_QUEUED_PER_USER
    if limit <= 0 or is_operator(user):
        return
    waiting = Task.objects.filter(owner=user, status=TaskStatus.QUEUED).count()
    if waiting >= limit:
        raise TooMany(
            f"you already have {waiting} tasks waiting for a phone, the most one person may "
            f"have (KAIROS_MAX_QUEUED_PER_USER = {limit}); wait for one to start, or abort one")


def check_backend(name: Any, device: Device) -> str:
    from agents.backends import backend_names

    name = name or settings.KAIROS_DEFAULT_BACKEND
    if not isinstance(name, str) or name not in backend_names():
        raise NotFound(
            f"unknown backend '{str(name)[:32]}': use one of {', '.join(backend_names())}")
    if name == "oracle" and device.kind != "sim":
        raise Conflict("the oracle backend exists for simulated phones only")
    return name


def devices_json(devices: Any) -> list[dict[str, Any]]:
    """Devices as the API lists them: ``status`` is ``offline`` as its host reports, else
    ``busy`` while a task runs on it, else ``online``."""
    devices = list(devices)
    busy = set(Task.objects.filter(device__in=devices, status__in=ACTIVE_TASK_STATUSES)
               .exclude(status=TaskStatus.QUEUED).values_list("device_id", flat=True))
    out = []
    for device in devices:
        data = device.to_json()
        if device.status != DeviceStatus.OFFLINE and device.id in busy:
            data["status"] = "busy"
        out.append(data)
    return out


def check_device_online(device: Device) -> None:
    """A phone its device host reports offline (unplugged, its host stopped) takes no task."""
    if device.status == DeviceStatus.OFFLINE:
        raise Conflict(f"device '{device.name}' is offline: plug it in (or start the "
                       "device_host of its machine) and try again")


def check_suite(name: Any, task_id: Any) -> tuple[str, str]:
    """A suite named over the API: a bundled suite, or a file of ``KAIROS_SUITES_DIR``.

    Returns what the device host loads (a bundled name, or the absolute path of the file)
    and the task id. Unlike ``run_task --suite``, which takes any path an admin gives it,
    a caller over the network must not make the server open files of its choosing.
    """
    from devices.sim import SimLoadError, bundled_suite_names, find_suite

    if not name and not task_id:
        return "", ""
    if not isinstance(name, str) or not isinstance(task_id, str) or not name or not task_id:
        raise NotFound("a suite task needs both 'suite' and 'suite_task'")
    check_text(name, "suite")
    check_text(task_id, "suite_task")
    ref: str | None = name if name in bundled_suite_names() else None
    directory = settings.KAIROS_SUITES_DIR
    if ref is None and directory and "/" not in name and "\\" not in name and len(name) <= 100:
        for suffix in (".yaml", ".yml", ".json"):
            candidate = Path(directory).resolve() / f"{name}{suffix}"
            if candidate.is_file() and candidate.parent == Path(directory).resolve():
                ref = str(candidate)
                break
    if ref is None:
        where = f" or a file in {directory}" if directory else ""
        raise NotFound(f"no suite '{name[:64]}': use one of "
                       f"{', '.join(bundled_suite_names())}{where}")
    try:
        find_suite(ref).task(task_id)
    except KeyError as exc:
        raise NotFound(str(exc.args[0])[:300]) from None
    except SimLoadError as exc:
        raise ServiceError(f"suite '{name[:64]}' cannot be loaded: {str(exc)[:300]}") from None
    return ref, task_id


def create_task(
    owner: Any, device: Device, instruction: Any, *, threshold: Any = None,
    backend: str | None = None, suite: str = "", suite_task: str = "",
    max_steps: int | None = None, start: bool = True,
) -> Task:
    instruction = check_instruction(instruction)
    if not device.enabled:
        raise Conflict(f"the phone '{device.name}' is disabled by an admin")
    threshold = check_threshold(threshold, device)
    backend = check_backend(backend, device)
    check_device_online(device)
    if backend == "oracle" and not suite:
        raise ServiceError("the oracle backend needs a suite task")
    with transaction.atomic():
        # The phone's row is locked before the task is inserted, so two tasks created at
        # once for a free phone cannot both see it free and both start.
        _lock_device(device.id)
        task = Task.objects.create(
            owner=owner, device=device, instruction=instruction, threshold=threshold,
            backend=backend, suite=suite, suite_task=suite_task,
            max_steps=max_steps or settings.KAIROS_MAX_STEPS,
        )
        # One task drives a phone at a time; the others queue, first come first served.
        if start and start_next_queued(device.id) is None:
            events.task_updated(task)  # queued: it starts when the phone frees
    task.refresh_from_db()
    return task


def _lock_device(device_id: Any) -> None:
    """Serialise who drives a phone (call inside a transaction). ``FOR NO KEY UPDATE``:
    it does not wait for the key-share locks that inserting a task for it takes."""
    list(Device.objects.select_for_update(no_key=True).filter(id=device_id).values_list("id"))


def start_next_queued(device_id: Any) -> Task | None:
    """The phone has freed: start the oldest task queued for it, if any (FIFO)."""
    with transaction.atomic():
        _lock_device(device_id)
        if Task.objects.driving(device_id).exists():
            return None
        task = Task.objects.queued_on(device_id).select_related("device").first()
        if task is None:
            return None
        try:
            start_task(task)
        except DeviceError as exc:
            # The phone cannot be prepared (its device host is down): the task keeps its
            # place, and the workers' stall sweep tries again (agents/recovery.py).
            logger.warning("task %s stays queued: %s", task.id, exc)
            return None
        for waiting in Task.objects.queued_on(device_id).select_related("device"):
            events.task_updated(waiting)  # everyone behind moved up one place
        return task


def start_task(task: Task) -> None:
    """QUEUED → RUNNING, then the first step is scheduled after commit. The caller has
    checked that the phone is free (``create_task``, ``start_next_queued``)."""
    if task.suite and task.suite_task:
        # A suite task starts from its own initial state, like AndroidWorld's set-up.
        get_device_client().reset(task.device.name, task.suite, task.suite_task)
    won = Task.objects.filter(id=task.id, status=TaskStatus.QUEUED).update(
        status=TaskStatus.RUNNING, started_at=timezone.now()
    )
    if won:
        task.refresh_from_db()
        schedule_step(task.id, task.cursor)
        events.task_updated(task)


# --- scheduling ----------------------------------------------------------------------

def _celery_scheduler(task_id: str, index: int) -> None:
    from agents.tasks import run_step_task

    run_step_task.delay(task_id, index)


_scheduler: Callable[[str, int], None] = _celery_scheduler


def set_step_scheduler(scheduler: Callable[[str, int], None] | None
                       ) -> Callable[[str, int], None]:
    """``run_task`` drives steps inline instead of through Celery; returns the old one."""
    global _scheduler
    previous, _scheduler = _scheduler, scheduler or _celery_scheduler
    return previous


def schedule_step(task_id: Any, index: int) -> None:
    """Send step ``index`` to a worker after commit, and mark the task as moving.

    ``progressed_at`` is what the stall sweep (agents/recovery.py) reads: a message lost
    with a killed worker leaves it behind, and the sweep schedules the step again.
    """
    Task.objects.filter(id=task_id).update(progressed_at=timezone.now())
    scheduler = _scheduler
    transaction.on_commit(lambda: scheduler(str(task_id), index))


# --- the step ------------------------------------------------------------------------

def _history(task: Task) -> list[HistoryEntry]:
    rows = task.steps.filter(status=StepStatus.DONE).exclude(executed_action=None).order_by(
        "index").values_list("index", "executed_action", "decided_by", "summary", "screen_changed")
    return [
        HistoryEntry(index=n, action=action, by=by, summary=summary or "",
                     screen_changed=bool(changed) if changed is not None else True)
        for n, (_, action, by, summary, changed) in enumerate(rows, start=1)
    ]


def _backend_for(task: Task):
    from agents.backends import get_backend

    kwargs: dict[str, Any] = {}
    if task.backend == "oracle":
        from devices.host import get_local_host
        from devices.sim import find_suite

        kwargs = {"device": get_local_host().device(task.device.name),
                  "task": find_suite(task.suite).task(task.suite_task)}
    # The gate reads the calibrated confidence (issue 12): the backend's evidence mapped
    # to P(right) by the installation's calibrator, or the shipped one.
    from agents.calibration.gate import calibrated_backend, find_calibrator

    return calibrated_backend(get_backend(task.backend, **kwargs),
                              find_calibrator(task.backend, var_dir=settings.VAR_DIR))


# Backends whose prompts show D-PoT references; for the others the retrieval is skipped,
# since it costs a query and a TF-IDF pass on every step.
BACKENDS_WITH_REFERENCES = frozenset({"openai"})


def _references(task: Task) -> list[str]:
    """The two earlier succeeded goals most like this one (D-PoT §5.5): by a local
    sentence-embedding model when one is installed (``agents.embeddings``), else TF-IDF."""
    from agents.embeddings import load_embedder
    from agents.planning import ReferenceIndex

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
        apps=client.info(task.device.name).apps,  # adb phones list theirs too
        references=_references(task), asked=list(task.asked), step_index=index,
    )
    try:
        proposal = _backend_for(task).propose(ctx)
    except Exception as exc:  # a backend bug is a ticket, not a crashed loop
        logger.exception("backend %s failed", task.backend)
        proposal = Proposal(action=None, model_error=f"backend failed: {exc}")
    decision = loop.decide(proposal, ctx, task.threshold)
    decided = time.perf_counter()
    proposed = decision.action or proposal.action
    executes = decision.outcome == loop.EXECUTE and decision.action is not None
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
    except IntegrityError:
        default_storage.delete(screenshot)
        return None
    return step


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
        Step.objects.filter(id=step.id).update(status=StepStatus.DONE, outcome="finished",
                                               summary=action.describe(),
                                               executed_at=timezone.now())
        _finish_on(task, action, reason=step.thought)
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


def _finish_on(task: Task, action: Action, reason: str = "") -> None:
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
    finish_task(task, status, success=success, error=error[:2000])


def closing_summary(task: Task, by: Any = None) -> str:
    """The last line of a finished task's chat: what happened, and why it ended."""
    steps = task.steps.filter(status=StepStatus.DONE).exclude(executed_action=None)
    done = steps.count()
    helped = steps.filter(decided_by=DecidedBy.OPERATOR).count()
    count = f"{done} step{'s' if done != 1 else ''}" + (
        f", {helped} of them by an operator" if helped else "")
    if task.status == TaskStatus.SUCCEEDED:
        return f"Done in {count}."
    if task.status == TaskStatus.ABORTED:
        prefix = f"aborted by {by}: " if by is not None else ""
        why = f" Reason: {task.error[len(prefix):]}" if prefix and \
            task.error.startswith(prefix) else ""
        if by is not None and getattr(by, "pk", None) == task.owner_id:
            return f"You stopped this task after {count}.{why}"
        if by is not None:
            return f"An operator ({by.get_username()}) stopped this task after {count}.{why}"
        return f"This task was stopped after {count}: {task.error or 'no reason given'}."
    return f"Could not finish after {count}: {task.error or 'no reason given'}."


def finish_task(task: Task, status: str, *, success: bool | None = None, error: str = "",
                by: Any = None) -> bool:
    """End an active task once (terminal ``status``); its phone goes to the next queued
    task. ``by`` is the person who stopped it, if one did."""
    with transaction.atomic():
        won = Task.objects.filter(id=task.id, status__in=ACTIVE_TASK_STATUSES).update(
            status=status, success=success, error=error, finished_at=timezone.now())
        if not won:
            return False
        transaction.on_commit(lambda: _start_next_after(task.device_id))
        # A step still waiting for a person will never run: say so instead of "waiting".
        Step.objects.filter(task=task, status=StepStatus.WAITING).update(
            status=StepStatus.CANCELLED, outcome="task ended")
        task.refresh_from_db()
        message = Message.objects.create(task=task, sender=Message.Sender.SYSTEM,
                                         text=closing_summary(task, by))
        events.chat_message(message)
        for ticket in Ticket.objects.filter(task=task, status__in=(TicketStatus.OPEN,
                                                                   TicketStatus.CLAIMED)):
            if Ticket.objects.filter(id=ticket.id, status=ticket.status).update(
                    status=TicketStatus.CANCELLED, resolved_at=timezone.now()):
                ticket.status = TicketStatus.CANCELLED
                events.ticket_resolved(ticket)
        task.refresh_from_db()
        events.task_updated(task)
    return True


def _start_next_after(device_id: Any) -> None:
    # After the finishing transaction commits, so a queued suite task's phone reset and
    # first step never hang on the transaction that freed the phone.
    try:
        start_next_queued(device_id)
    except Exception:  # the stall sweep starts it later; the finish itself stands
        logger.exception("could not start the next task queued for device %s", device_id)


# --- tickets -------------------------------------------------------------------------

def open_ticket(task: Task, step: Step | None, kind: str, reason: str, *, note: str = "",
                question: str = "", options: list[str] | None = None,
                set_status: bool = True) -> Ticket:
    waiting = TaskStatus.WAITING_USER if kind == TicketKind.CLARIFICATION \
        else TaskStatus.WAITING_OPERATOR
    with transaction.atomic():
        if set_status:
            Task.objects.filter(id=task.id, status=TaskStatus.RUNNING).update(status=waiting)
        counter = "clarifications" if kind == TicketKind.CLARIFICATION else "interventions"
        Task.objects.filter(id=task.id).update(**{counter: F(counter) + 1})
        ticket = Ticket.objects.create(task=task, step=step, kind=kind, reason=reason,
                                       note=note[:2000], question=question,
                                       options=options or [])
        task.refresh_from_db()
        if kind != TicketKind.CLARIFICATION:
            # A question goes to the user first; operators see it only once it is
            # escalated (escalate_clarification), as docs/end-users.md promises.
            events.ticket_opened(ticket)
        events.task_updated(task)
    return ticket


def open_clarification(task: Task, step: Step, question: str, options: list[str]) -> Ticket:
    with transaction.atomic():
        Task.objects.filter(id=task.id).update(asked=list(task.asked) + [question])
        ticket = open_ticket(task, step, TicketKind.CLARIFICATION, TicketReason.AMBIGUOUS_INTENT,
                             question=question, options=options)
        message = Message.objects.create(task=task, sender=Message.Sender.AGENT, text=question,
                                         ticket=ticket, options=options)
        events.chat_message(message)
        schedule_escalation(ticket)
    return ticket


def _stale_claim() -> Q:
    """A claim whose holder has shown no sign of life for KAIROS_CLAIM_TIMEOUT seconds.

    An operator's open ticket page renews its claim while they work; a closed laptop or a
    crashed browser cannot release it, so after the timeout anyone may take it.
    """
    cutoff = timezone.now() - timedelta(seconds=float(settings.KAIROS_CLAIM_TIMEOUT))
    return Q(status=TicketStatus.CLAIMED, claimed_at__lt=cutoff)


def claim_ticket(ticket: Ticket, user: Any) -> Ticket:
    """Take ``ticket`` for ``user``; the holder claiming again renews the claim."""
    with transaction.atomic():
        won = Ticket.objects.filter(
            Q(status=TicketStatus.OPEN) | Q(status=TicketStatus.CLAIMED, assignee=user)
            | _stale_claim(), id=ticket.id,
        ).update(status=TicketStatus.CLAIMED, assignee=user, claimed_at=timezone.now())
        was = (ticket.status, ticket.assignee_id)
        ticket.refresh_from_db()
        if not won:
            if ticket.status == TicketStatus.CLAIMED:
                raise Conflict(f"{ticket.assignee} holds this ticket")
            raise Conflict(f"this ticket is already {ticket.status}")
        if was != (TicketStatus.CLAIMED, user.pk):
            events.ticket_claimed(ticket)
    return ticket


def reassign_ticket(ticket: Ticket, admin: Any, to_user: Any) -> Ticket:
    """An admin gives a still-open ticket to ``to_user`` (an operator), whoever holds it."""
    if not is_admin(admin):
        raise Forbidden("only admins reassign tickets")
    if to_user is None or not is_operator(to_user):
        raise ServiceError("tickets can only be given to an operator")
    with transaction.atomic():
        won = Ticket.objects.filter(
            id=ticket.id, status__in=(TicketStatus.OPEN, TicketStatus.CLAIMED),
        ).update(status=TicketStatus.CLAIMED, assignee=to_user, claimed_at=timezone.now())
        ticket.refresh_from_db()
        if not won:
            raise Conflict(f"this ticket is already {ticket.status}")
        events.ticket_claimed(ticket)
    return ticket


def release_ticket(ticket: Ticket, user: Any) -> Ticket:
    with transaction.atomic():
        won = Ticket.objects.filter(id=ticket.id, status=TicketStatus.CLAIMED,
                                    assignee=user).update(status=TicketStatus.OPEN,
                                                          assignee=None, claimed_at=None)
        ticket.refresh_from_db()
        if not won:
            raise Conflict("you do not hold this ticket")
        events.ticket_claimed(ticket)
    return ticket


@dataclass
class Resolution:
    decision: str
    action: Action | None = None
    answer: str = ""


def check_resolution(ticket: Ticket, decision: Any, action: Any = None,
                     answer: Any = None) -> Resolution:
    """Validate a resolution with the same rules as the agent's own actions."""
    choices = {c.value for c in Decision}
    if decision not in choices:
        raise ServiceError(f"decision must be one of {', '.join(sorted(choices))}")
    if decision == Decision.ANSWER:
        return Resolution(decision, answer=check_message_text(answer))
    if decision == Decision.APPROVE:
        if ticket.kind == TicketKind.CLARIFICATION:
            raise Conflict("a clarification is resolved with an answer, not approved")
        proposed = ticket.step.proposed_action if ticket.step else None
        checked = validate_action(proposed) if proposed else None
        if not isinstance(checked, Action):
            raise Conflict("there is no valid proposed action to approve; edit it instead")
        return Resolution(decision, action=checked)
    if decision == Decision.EDIT:
        device = ticket.task.device
        checked = validate_action(action, (device.width, device.height))
        if isinstance(checked, ActionError):
            raise ServiceError(f"invalid action: {checked.message}")
        return Resolution(decision, action=checked)
    if decision == Decision.ABORT and isinstance(answer, str) and answer.strip():
        # An abort may say why; the user reads it in their chat.
        return Resolution(decision, answer=check_message_text(answer))
    return Resolution(decision)


def resolve_ticket(ticket: Ticket, user: Any, decision: Any, action: Any = None,
                   answer: Any = None) -> Ticket:
    """Approve / edit / take over / answer / abort. Exactly one resolution wins."""
    resolution = check_resolution(ticket, decision, action, answer)
    now = timezone.now()
    with transaction.atomic():
        won = Ticket.objects.filter(
            Q(status=TicketStatus.OPEN) | Q(status=TicketStatus.CLAIMED, assignee=user)
            | _stale_claim(), id=ticket.id,
        ).update(status=TicketStatus.RESOLVED, decision=resolution.decision,
                 human_action=resolution.action.to_json() if resolution.action else None,
                 answer=resolution.answer, resolved_by=user, resolved_at=now,
                 assignee=user)
        ticket.refresh_from_db()
        if not won:
            if ticket.status == TicketStatus.CLAIMED:
                raise Conflict(f"{ticket.assignee} holds this ticket")
            raise Conflict(f"this ticket is no longer open (it is {ticket.status})")
        task = Task.objects.select_related("device").get(id=ticket.task_id)
        _record_training(ticket, task, user)
        _apply_resolution(ticket, task, resolution, user)
        events.ticket_resolved(ticket)
        task.refresh_from_db()
        events.task_updated(task)
    return ticket


def _apply_resolution(ticket: Ticket, task: Task, resolution: Resolution, user: Any) -> None:
    step = ticket.step
    waiting = (TaskStatus.WAITING_OPERATOR, TaskStatus.WAITING_USER)
    if resolution.decision == Decision.ABORT:
        why = f": {resolution.answer}" if resolution.answer else ""
        finish_task(task, TaskStatus.ABORTED, error=f"aborted by {user}{why}", by=user)
        return
    if resolution.decision == Decision.ANSWER:
        Task.objects.filter(id=task.id).update(answers=list(task.answers) + [resolution.answer])
        if ticket.kind == TicketKind.CLARIFICATION and task.owner_id != getattr(user, "pk", None):
            # The owner sees in the chat that someone answered for them, and what.
            message = Message.objects.create(
                task=task, sender=Message.Sender.OPERATOR, author=user, ticket=ticket,
                text=f"An operator answered for you: {resolution.answer}")
            events.chat_message(message)
        if step is not None:
            Step.objects.filter(id=step.id, status=StepStatus.WAITING).update(
                status=StepStatus.ANSWERED, outcome="clarified")
        _resume(task, waiting, next_index=(step.index + 1) if step else task.cursor)
        return
    if resolution.decision == Decision.TAKEOVER:
        if step is not None:
            Step.objects.filter(id=step.id, status=StepStatus.WAITING).update(
                status=StepStatus.CANCELLED, outcome="taken over")
        Task.objects.filter(id=task.id, status__in=waiting).update(status=TaskStatus.TAKEN_OVER)
        return
    # approve / edit: the step runs the chosen action, then the loop goes on.
    assert resolution.action is not None
    by = DecidedBy.AGENT if resolution.decision == Decision.APPROVE else DecidedBy.OPERATOR
    if step is None or step.status != StepStatus.WAITING:
        raise Conflict("the step of this ticket is no longer waiting")
    Step.objects.filter(id=step.id, status=StepStatus.WAITING).update(
        status=StepStatus.READY, executed_action=resolution.action.to_json(), decided_by=by)
    _resume(task, waiting, next_index=step.index)


def _resume(task: Task, from_statuses: tuple, next_index: int) -> None:
    if task.tickets.filter(status__in=(TicketStatus.OPEN, TicketStatus.CLAIMED)).exists():
        return  # another person is still needed before the agent can go on
    won = Task.objects.filter(id=task.id, status__in=from_statuses).update(
        status=TaskStatus.RUNNING, cursor=next_index)
    if won:
        schedule_step(task.id, next_index)


def _record_training(ticket: Ticket, task: Task, user: Any) -> None:
    from agents.training.labels import score_label

    step = ticket.step
    label = score_label(ticket.decision)  # OS-Kairos Eq. 3, see agents/training/labels.py
    seconds = (ticket.resolved_at - ticket.created_at).total_seconds() if ticket.resolved_at \
        else None
    TrainingRecord.objects.create(
        ticket=ticket, task=task, step_index=step.index if step else None,
        instruction=task.instruction, goal=task.goal,
        screenshot=step.screenshot.name if step and step.screenshot else "",
        ui_nodes=step.ui_nodes if step else [],
        history=[e.summary or str(e.action) for e in _history(task)],
        plan=step.plan if step else [], agent_action=step.proposed_action if step else None,
        agent_confidence=step.confidence if step else None, human_action=ticket.human_action,
        decision=ticket.decision, reason=ticket.reason, question=ticket.question,
        answer=ticket.answer, score_label=label, operator=user, operator_seconds=seconds,
    )


def abort_task(task: Task, user: Any) -> Task:
    if not finish_task(task, TaskStatus.ABORTED, error=f"aborted by {user}", by=user):
        task.refresh_from_db()
        raise Conflict(f"the task has already ended ({task.get_status_display().lower()})")
    task.refresh_from_db()
    return task


# --- take-over -----------------------------------------------------------------------

def check_takeover_holder(task: Task, user: Any) -> Ticket:
    """The take-over ``user`` holds on ``task``: the task's *latest* take-over, still on.

    An operator who took over earlier and handed back must not keep control once
    someone else took over at a later ticket.
    """
    ticket = task.tickets.filter(decision=Decision.TAKEOVER).order_by("-resolved_at").first()
    if task.status != TaskStatus.TAKEN_OVER or ticket is None or \
            ticket.resolved_by_id != getattr(user, "pk", None):
        raise Forbidden("you do not hold the take-over of this task")
    return ticket


def operator_input(task: Task, user: Any, action: Any) -> Step:
    """One input of an operator in control, executed and recorded as an operator step.

    Inputs are serialised on the task's row (``SELECT … FOR UPDATE``): three sent at once
    used to pick the same step index, and two of them failed on the unique index and
    were lost (issue 11, item 8). Each now waits its turn and runs in the order it got
    the lock, as the phone executes them anyway.
    """
    check_takeover_holder(task, user)
    checked = validate_action(action, (task.device.width, task.device.height))
    if isinstance(checked, ActionError):
        raise ServiceError(f"invalid action: {checked.message}")
    if checked.type in TERMINAL_TYPES:
        raise ServiceError("hand the task back, or abort it, instead of COMPLETE/IMPOSSIBLE")
    client = get_device_client()
    with transaction.atomic():
        task = Task.objects.select_for_update(of=("self",)).select_related("device").get(
            id=task.id)
        check_takeover_holder(task, user)  # again, under the lock: it may have just ended
        last = task.steps.order_by("-index").values_list("index", flat=True).first()
        index = 0 if last is None else last + 1
        try:
            observation = client.observe(task.device.name)
        except DeviceError as exc:
            raise DeviceUnavailable(str(exc)) from None
        step = Step.objects.create(
            task=task, index=index, frame=observation.frame, screen_width=observation.width,
            screen_height=observation.height, app=observation.app,
            ui_nodes=[n.to_json() for n in observation.nodes], proposed_action=None,
            executed_action=checked.to_json(), decided_by=DecidedBy.OPERATOR,
            status=StepStatus.EXECUTING,
        )
        step.screenshot.save(f"{task.id}-{index}.jpg", ContentFile(observation.jpeg), save=True)
        try:
            outcome = client.perform(task.device.name, checked,
                                     origin={"task": str(task.id), "step": index})
        except DeviceError as exc:
            # Kept, not rolled back: the phone may have acted, and the host files the
            # action under this step's index, which must not be given to another input.
            Step.objects.filter(id=step.id).update(status=StepStatus.DONE,
                                                   outcome=f"unknown: {exc}"[:255])
            error = DeviceUnavailable(str(exc))
        else:
            error = None
            target = loop.target_node(checked, observation.nodes)
            entry = loop.history_entry(index, checked, DecidedBy.OPERATOR, outcome.changed,
                                       target)
            # A refused input (TYPE with no field focused) is recorded as failed, as the
            # agent's are.
            Step.objects.filter(id=step.id).update(
                status=StepStatus.DONE, screen_changed=outcome.changed,
                summary=entry.summary[:255],
                outcome=("changed" if outcome.changed else "unchanged") if outcome.ok
                else f"error: {outcome.error}"[:255],
                executed_at=timezone.now())
        Task.objects.filter(id=task.id).update(cursor=index + 1)
        task.refresh_from_db()
        events.task_updated(task)
    if error is not None:
        raise error
    step.refresh_from_db()
    return step


def hand_back(task: Task, user: Any) -> Task:
    check_takeover_holder(task, user)
    with transaction.atomic():
        # Under the task's lock, like inputs: the next step's index is after the last input.
        list(Task.objects.select_for_update(of=("self",)).filter(id=task.id).values_list("id"))
        next_index = (task.steps.order_by("-index").values_list("index", flat=True).first() or 0) + 1
        won = Task.objects.filter(id=task.id, status=TaskStatus.TAKEN_OVER).update(
            status=TaskStatus.RUNNING, cursor=next_index)
        if not won:
            raise Conflict(f"the task is not taken over any more "
                           f"({task.get_status_display().lower()})")
        schedule_step(task.id, next_index)
        task.refresh_from_db()
        events.task_updated(task)
    return task


# --- chat ----------------------------------------------------------------------------

def check_message_text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ServiceError("the message is empty")
    text = check_text(text.strip(), "message")
    if len(text) > MAX_MESSAGE_LENGTH:
        raise ServiceError(f"the message is {len(text)} characters; at most {MAX_MESSAGE_LENGTH}")
    return text


def post_message(task: Task, user: Any, text: Any, ticket_id: Any = None) -> Message:
    """A chat message; from the task's owner it answers an open clarification.

    ``ticket_id`` names the question a quick reply answers: when that question is closed
    the reply is refused (409) rather than posted as a stray message.
    """
    text = check_message_text(text)
    is_owner = task.owner_id == user.pk
    if not is_owner and not is_operator(user):
        raise Forbidden("this is not your task")
    task.refresh_from_db(fields=["status"])
    if task.is_finished:
        # Nobody reads the chat of a finished task: refuse rather than lose the message.
        raise Conflict("this task has finished; the chat is closed (start a new task instead)")
    with transaction.atomic():
        open_questions = task.tickets.filter(kind=TicketKind.CLARIFICATION, status__in=(
            TicketStatus.OPEN, TicketStatus.CLAIMED))
        if ticket_id:
            try:
                named = task.tickets.filter(id=ticket_id, kind=TicketKind.CLARIFICATION).first()
            except Exception:  # not a UUID
                named = None
            if named is None:
                raise NotFound("no such question in this task")
            if not named.is_open:
                raise Conflict("this question is already closed; write a new message instead")
            open_questions = open_questions.filter(id=named.id)
        ticket = open_questions.order_by("created_at").first()
        message = Message.objects.create(
            task=task, sender=Message.Sender.USER if is_owner else Message.Sender.OPERATOR,
            author=user, text=text, ticket=ticket if is_owner else None)
        events.chat_message(message)
        if ticket is not None and is_owner:
            # The owner knows their own preference best: an operator who claimed the
            # escalated question loses the claim, and their later resolve gets a 409.
            Ticket.objects.filter(id=ticket.id, status=TicketStatus.CLAIMED).exclude(
                assignee=user).update(status=TicketStatus.OPEN, assignee=None, claimed_at=None)
            resolve_ticket(ticket, user, Decision.ANSWER, answer=text)
    return message


# --- the simulated operator ----------------------------------------------------------

def resolve_with_oracle(ticket: Ticket, user: Any) -> Ticket:
    """Resolve a ticket as the simulator's oracle would (run_task --operator oracle).

    Approve a proposal on a shortest path, else edit it to the oracle's next action;
    answer a clarification with the task's hidden preference.
    """
    task = ticket.task
    if not (task.suite and task.suite_task):
        raise ServiceError("the oracle operator needs a suite task")
    client = get_device_client()
    name = task.device.name
    if ticket.kind == TicketKind.CLARIFICATION:
        answer = client.oracle_answer(name, task.suite, task.suite_task, ticket.question)
        return resolve_ticket(ticket, user, Decision.ANSWER, answer=answer)
    proposed = validate_action(ticket.step.proposed_action) if ticket.step and \
        ticket.step.proposed_action else None
    if isinstance(proposed, Action) and ticket.step.status == StepStatus.WAITING and \
            client.oracle_judge(name, task.suite, task.suite_task, proposed):
        return resolve_ticket(ticket, user, Decision.APPROVE)
    if ticket.step is None or ticket.step.status != StepStatus.WAITING:
        return resolve_ticket(ticket, user, Decision.ABORT)
    choices = client.oracle_next(name, task.suite, task.suite_task)
    if not choices:
        # A dead end: no path to success is left (something the agent did cannot be
        # undone). A person would stop here, as evaluate's simulated operator does.
        return resolve_ticket(ticket, user, Decision.ABORT)
    return resolve_ticket(ticket, user, Decision.EDIT, action=choices[0].to_json())


# --- clarification escalation ---------------------------------------------------------

def schedule_escalation(ticket: Ticket) -> None:
    from agents.tasks import escalate_clarification_task

    delay = float(settings.KAIROS_CLARIFICATION_TIMEOUT)
    transaction.on_commit(
        lambda: escalate_clarification_task.apply_async((str(ticket.id),), countdown=delay))


def escalate_clarification(ticket_id: Any) -> bool:
    """A question the user left unanswered goes to the operators' queue (once)."""
    with transaction.atomic():
        won = Ticket.objects.filter(id=ticket_id, kind=TicketKind.CLARIFICATION,
                                    status=TicketStatus.OPEN, escalated=False).update(
            escalated=True)
        if not won:
            return False
        ticket = Ticket.objects.select_related("task", "task__device", "step").get(id=ticket_id)
        message = Message.objects.create(
            task=ticket.task, sender=Message.Sender.SYSTEM, ticket=ticket,
            text="No answer yet, so an operator has been asked to help. You can still answer here.")
        events.chat_message(message)
        events.ticket_opened(ticket)
    return True
