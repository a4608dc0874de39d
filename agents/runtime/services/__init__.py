"""Everything that changes a task, a step or a ticket.

``check_*`` validates and authorises, ``do``-style functions perform. Every status change
is a conditional UPDATE (``filter(status=…).update(…)``): a race has exactly one winner
and a redelivered Celery task does nothing twice. Events go out after commit.
"""
from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from access.devices import access_device, usable_devices
from access.errors import (
    Conflict, DeviceUnavailable, Forbidden, NotFound, ServiceError, TooMany,
)
from access.roles import is_admin, is_operator
from agents.brain import loop
from agents.runtime import events
from agents.brain.appknowledge import with_purposes
from agents.brain.backends.base import HistoryEntry, Proposal, StepContext
from agents.brain.experience.memory import pick_group
from agents.runtime.models import (
    ACTIVE_TASK_STATUSES, DecidedBy, Decision, Message, Step, StepStatus, Task,
    TaskStatus, Ticket, TicketKind, TicketReason, TicketStatus, TrainingRecord,
)
from agents.brain.spot_checks import SPOT_CHECK_NOTE, spot_check, system_rng
from devices.actions import (
    COMPLETE, IMPOSSIBLE, PRESS_HOME, TERMINAL_TYPES, Action, ActionError, ActionOutcome,
    text_problem,
    validate_action,
)
from devices.host import DeviceError, get_device_client
from devices.models import Device, DeviceStatus
from devices.uitree import nodes_from_json, screen_signature

logger = logging.getLogger(__name__)

MAX_INSTRUCTION_LENGTH = 2000
MAX_MESSAGE_LENGTH = 2000


def reset_to_home(user: Any, device: Device) -> Device:
    """An operator sends an idle phone to its home screen, so the next task does not start
    wherever the last one left it (issue 26). Refused while a task drives the phone."""
    if not is_operator(user):
        raise Forbidden("only operators reset phones")
    check_device_online(device)
    with transaction.atomic():
        _lock_device(device.id)  # no task starts on it meanwhile
        driving = Task.objects.driving(device.id).first()
        if driving is not None:
            raise Conflict(f"a task is using '{device.name}' ({driving.get_status_display().lower()}); "
                           "reset it once the phone is idle")
        try:
            get_device_client().perform(device.name, Action(PRESS_HOME))
        except DeviceError as exc:
            raise DeviceUnavailable(str(exc)) from None
    logger.info("%s reset %s to its home screen", user, device.name)
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
    from agents.runtime.models import InstallationSettings

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
    from agents.brain.backends import backend_names

    name = name or settings.KAIROS_DEFAULT_BACKEND
    if not isinstance(name, str) or name not in backend_names():
        raise NotFound(
            f"unknown backend '{str(name)[:32]}': use one of {', '.join(backend_names())}")
    if name == "oracle" and device.kind != "sim":
        raise Conflict("the oracle backend exists for simulated phones only")
    if name == "openai":
        from agents.brain.backends.openai import configuration_problem

        # Refused now rather than accepted and turned into a model_error ticket that no
        # operator can fix (issue 26, item 6).
        problem = configuration_problem()
        if problem:
            raise Conflict(problem)
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
            # place, and the workers' stall sweep tries again (agents/runtime/recovery.py).
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
    from agents.runtime.tasks import run_step_task

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

    ``progressed_at`` is what the stall sweep (agents/runtime/recovery.py) reads: a message lost
    with a killed worker leaves it behind, and the sweep schedules the step again.
    """
    Task.objects.filter(id=task_id).update(progressed_at=timezone.now())
    scheduler = _scheduler
    transaction.on_commit(lambda: scheduler(str(task_id), index))


# --- the step ------------------------------------------------------------------------

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


# --- the experience memory: what production records teaches it (issue 25) -----------

def _step_fact(task: Task, step: Step, executed: Any, decision: str, proposed: Any = None):
    """The step as the memory learns it: its screen, the goal, the proposal, the action
    executed, the decision and — where the proposal came from memory — its kind."""
    from agents.brain.experience.learning import StepFact
    from agents.brain.experience.memory import step_key
    from devices.uitree import nodes_from_json

    def action(value: Any) -> Action | None:
        checked = validate_action(value) if value else None
        return checked if isinstance(checked, Action) else None

    evidence = (step.extra or {}).get("evidence") or {}
    # the memory's decision was proposed (alone, or the backend's agreeing with it)
    kind = (evidence.get("memory_kind") if evidence.get("rule") == "experience"
            or evidence.get("memory_agrees") else None)
    before = task.steps.filter(index__lt=step.index, status=StepStatus.DONE).exclude(
        executed_action=None).order_by("-index").values_list(
        "executed_action", "summary", "ui_nodes").first()
    prev = step_key(before[0], before[1] or "", task.goal,
                    pick_group(before[0], nodes_from_json(before[2] or []))) if before else ""
    return StepFact(app=step.app, nodes=nodes_from_json(step.ui_nodes or []),
                    instruction=task.goal, proposed=action(proposed), executed=action(executed),
                    decision=decision, memory_kind=kind, summary=step.summary, prev=prev)


def _learn_from_ticket(ticket: Ticket, task: Task, resolution: "Resolution", user: Any) -> None:
    """An approve or edit on a ticket teaches the installation's memory."""
    if not settings.KAIROS_EXPERIENCE or ticket.step is None or resolution.action is None:
        return
    if resolution.decision not in (Decision.APPROVE, Decision.EDIT):
        return
    from agents.brain.experience.learning import learn_from_ticket
    from agents.runtime.experience_store import DbStore

    step = ticket.step
    fact = _step_fact(task, step, resolution.action.to_json(), str(resolution.decision),
                      step.proposed_action)
    learn_from_ticket(DbStore(task=task, user=user), fact, task=str(task.id))


def _learn_from_takeover_input(task: Task, step: Step, user: Any) -> None:
    """An operator's input during a take-over teaches like an edit; the first one after
    the take-over is compared with the proposal that was taken over (repeating it
    confirms it)."""
    if not settings.KAIROS_EXPERIENCE:
        return
    from agents.brain.experience.learning import TAKEOVER, learn_from_ticket
    from agents.runtime.experience_store import DbStore

    proposed = None
    ticket = task.tickets.filter(decision=Decision.TAKEOVER).order_by("-resolved_at").first()
    if ticket is not None and ticket.step is not None and not task.steps.filter(
            index__gt=ticket.step.index, index__lt=step.index,
            decided_by=DecidedBy.OPERATOR).exists():
        proposed = ticket.step.proposed_action
    fact = _step_fact(task, step, step.executed_action, TAKEOVER, proposed)
    learn_from_ticket(DbStore(task=task, user=user), fact, task=str(task.id))


def learn_from_task_verdict(task: Task, right: bool, *, source: str = "verdict",
                            steps: Any = None) -> int:
    """THE place where end users' verdicts and spot checks feed the experience memory
    (issue 25 item 1; ``Task.verdict_right`` and "spot_check" tickets come from the issue
    "Labels you can trust and measure"). Call it with the task's verdict (``steps``
    None: every step that acted alone) or with a spot check's one step
    (``source="spot_check"``, ``steps=[step]``). A right verdict also keeps the task as a
    reference episode for planners. Returns the memory entries written."""
    if not settings.KAIROS_EXPERIENCE:
        return 0
    from agents.brain.experience.learning import ALONE, learn_from_verdict, record_episode
    from agents.runtime.experience_store import DbStore

    rows = list(steps) if steps is not None else list(task.steps.filter(
        status=StepStatus.DONE).exclude(executed_action=None).order_by("index"))
    alone = [_step_fact(task, s, s.executed_action, ALONE, s.proposed_action) for s in rows
             if s.decided_by == DecidedBy.AGENT and not s.tickets.exists()]
    store = DbStore(task=task)
    written = learn_from_verdict(store, alone, right, task=str(task.id), source=source)
    if right and steps is None:
        record_episode(store, task.goal, [_step_fact(task, s, s.executed_action, ALONE)
                                          for s in rows])
    return written


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


def closing_summary(task: Task, by: Any = None) -> str:
    """The last line of a finished task's chat: what happened, and why it ended."""
    steps = task.steps.filter(status=StepStatus.DONE).exclude(executed_action=None)
    done = steps.count()
    helped = steps.filter(decided_by=DecidedBy.OPERATOR).count()
    count = f"{done} step{'s' if done != 1 else ''}" + (
        f", {helped} of them by an operator" if helped else "")
    if task.status == TaskStatus.SUCCEEDED:
        # What was done, in the steps' own words, and what the agent saw at the end
        # ("'Wi-Fi' is already on"): "Done in 3 steps" alone told the user nothing.
        rows = list(steps.order_by("index").values_list("summary", "executed_action", "thought"))
        acts = [summary or str(action.get("type")) for summary, action, _ in rows
                if action.get("type") not in TERMINAL_TYPES]
        text = f"Done in {count}"
        if acts:
            text += ": " + "; ".join(acts[:6]) + ("; …" if len(acts) > 6 else "")
        text += "."
        if rows and rows[-1][1].get("type") in TERMINAL_TYPES and rows[-1][2]:
            text += f" {rows[-1][2]}"
        return text
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
        if ticket.reason == TicketReason.TAKEOVER_LAPSED:
            return Resolution(decision)  # the agent goes on from the phone's screen
        proposed = ticket.step.proposed_action if ticket.step else None
        checked = validate_action(proposed) if proposed else None
        if not isinstance(checked, Action):
            raise Conflict("there is no valid proposed action to approve; edit it instead")
        return Resolution(decision, action=checked)
    if decision == Decision.EDIT:
        if ticket.step is None:
            raise Conflict("this ticket has no step to edit: approve to let the agent go on, "
                           "or take over")
        device = ticket.task.device
        checked = validate_action(action, (device.width, device.height))
        if isinstance(checked, ActionError):
            raise ServiceError(f"invalid action: {checked.message}")
        if ticket.step is not None and ticket.step.ui_nodes:
            checked = loop.shown_name(checked, nodes_from_json(ticket.step.ui_nodes))
        return Resolution(decision, action=checked)
    if decision == Decision.ABORT and isinstance(answer, str) and answer.strip():
        # An abort may say why; the user reads it in their chat.
        return Resolution(decision, answer=check_message_text(answer))
    return Resolution(decision)


def resolve_ticket(ticket: Ticket, user: Any, decision: Any, action: Any = None,
                   answer: Any = None) -> Ticket:
    """Approve / edit / take over / answer / abort. Exactly one resolution wins."""
    from agents.runtime.training.labels import judge

    resolution = check_resolution(ticket, decision, action, answer)
    now = timezone.now()
    human_action = resolution.action.to_json() if resolution.action else None
    step = ticket.step
    # What the decision says about the proposal: an edit that changes nothing labels it
    # right; a take-over is wrong until its first input says otherwise (operator_input).
    right = judge(resolution.decision, step.proposed_action if step else None, human_action,
                  step.ui_nodes if step else None)
    with transaction.atomic():
        won = Ticket.objects.filter(
            Q(status=TicketStatus.OPEN) | Q(status=TicketStatus.CLAIMED, assignee=user)
            | _stale_claim(), id=ticket.id,
        ).update(status=TicketStatus.RESOLVED, decision=resolution.decision,
                 human_action=human_action, agent_right=right,
                 answer=resolution.answer, resolved_by=user, resolved_at=now,
                 assignee=user)
        ticket.refresh_from_db()
        if not won:
            if ticket.status == TicketStatus.CLAIMED:
                raise Conflict(f"{ticket.assignee} holds this ticket")
            raise Conflict(f"this ticket is no longer open (it is {ticket.status})")
        task = Task.objects.select_related("device").get(id=ticket.task_id)
        goal = task.goal  # as the agent had it, before this resolution's answer
        _learn_from_ticket(ticket, task, resolution, user)
        _apply_resolution(ticket, task, resolution, user)
        if ticket.reason != TicketReason.TAKEOVER_LAPSED:  # no agent action to label
            # After the commit, and after the step it schedules is handed to a worker
            # (on_commit runs in order): the training copy of the screen and history is
            # not on the path from approve to action (bench tickets, issue 26).
            step = ticket.step
            transaction.on_commit(lambda: _record_training(ticket, task, user, step, goal))
        events.ticket_resolved(ticket)
        if resolution.decision in (Decision.APPROVE, Decision.EDIT, Decision.TAKEOVER):
            # A new label: refit the calibrator once KAIROS_REFIT_EVERY have come in.
            from agents.runtime.learning import schedule_due_refits

            transaction.on_commit(schedule_due_refits)
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
        # progressed_at counts the take-over's idle time from here (lapse_idle_takeovers).
        Task.objects.filter(id=task.id, status__in=waiting).update(
            status=TaskStatus.TAKEN_OVER, progressed_at=timezone.now())
        return
    if resolution.action is None:  # approving a lapsed take-over: the agent goes on
        _resume(task, waiting, next_index=_next_step_index(task))
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


def _record_training(ticket: Ticket, task: Task, user: Any, step: Step | None,
                     goal: str) -> None:
    from agents.runtime.training.labels import score_of

    # The history before the ticket's step: by now a worker may have run it and more.
    rows = task.steps.filter(status=StepStatus.DONE).exclude(executed_action=None)
    if step is not None:
        rows = rows.filter(index__lt=step.index)
    history = [summary or str(action) for summary, action in
               rows.order_by("index").values_list("summary", "executed_action")]

    label = score_of(ticket.agent_right)  # OS-Kairos Eq. 3, see agents/runtime/training/labels.py
    seconds = (ticket.resolved_at - ticket.created_at).total_seconds() if ticket.resolved_at \
        else None
    TrainingRecord.objects.create(
        ticket=ticket, task=task, step_index=step.index if step else None,
        instruction=task.instruction, goal=goal,
        screenshot=step.screenshot.name if step and step.screenshot else "",
        ui_nodes=step.ui_nodes if step else [],
        history=history,
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

def _next_step_index(task: Task) -> int:
    last = task.steps.order_by("-index").values_list("index", flat=True).first()
    return 0 if last is None else last + 1


def lapse_idle_takeovers(now: Any = None, timeout: float | None = None) -> list[str]:
    """Take-overs without an input for ``KAIROS_TAKEOVER_TIMEOUT`` seconds go back to the
    queue as an open ticket that says why (issue 26, item 1): an operator who pressed T and
    closed the browser must not hold the phone, and the tasks queued behind it, for ever.

    Each lapse is a conditional UPDATE on the task's ``progressed_at`` (set at the
    take-over and at every input), so an input that lands meanwhile keeps the take-over
    and several sweepers lapse a task once. Returns the ids of the lapsed tasks.
    """
    now = now or timezone.now()
    timeout = float(settings.KAIROS_TAKEOVER_TIMEOUT) if timeout is None else timeout
    cutoff = now - timedelta(seconds=timeout)
    idle = Task.objects.filter(status=TaskStatus.TAKEN_OVER).filter(
        Q(progressed_at__lt=cutoff) | Q(progressed_at=None))
    lapsed = []
    for task_id, seen in idle.values_list("id", "progressed_at")[:100]:
        with transaction.atomic():
            claim = Task.objects.filter(id=task_id, status=TaskStatus.TAKEN_OVER)
            claim = claim.filter(progressed_at=seen) if seen else claim.filter(progressed_at=None)
            if not claim.update(status=TaskStatus.WAITING_OPERATOR, progressed_at=now):
                continue
            task = Task.objects.select_related("device").get(id=task_id)
            holder = task.tickets.filter(decision=Decision.TAKEOVER).order_by(
                "-resolved_at").select_related("resolved_by").first()
            who = holder.resolved_by.get_username() if holder and holder.resolved_by else \
                "an operator"
            open_ticket(task, None, TicketKind.INTERVENTION, TicketReason.TAKEOVER_LAPSED,
                        set_status=False, note=(
                            f"The take-over by {who} lapsed: no input for {timeout:g} s. "
                            "Approve lets the agent go on from the phone's current screen; "
                            "take over to drive the phone again, or abort."))
        lapsed.append(str(task_id))
    return lapsed


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


@contextmanager
def input_lock(task_id: Any, *, wait: bool = True) -> Iterator[bool]:
    """Serialise a task's take-over inputs, its hand-back and the settling of inputs a dead
    server left, *across the phone's action* (issue 23, item 1).

    An input's step is committed before the phone acts, so no transaction's row lock can
    span the action. PostgreSQL: a session advisory lock on the task, which PostgreSQL
    releases when the holding process dies (``kill -9`` of ``serve``). Other databases
    (SQLite: the embedded default, one process): a lock of this process. Yields whether
    the lock is held (always, with ``wait``).
    """
    from django.db import connection

    if connection.vendor == "postgresql":
        key = int.from_bytes(uuid.UUID(str(task_id)).bytes[:8], "big", signed=True)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)" if wait
                           else "SELECT pg_try_advisory_lock(%s)", [key])
            held = True if wait else bool(cursor.fetchone()[0])
        try:
            yield held
        finally:
            if held:
                try:
                    with connection.cursor() as cursor:
                        cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
                except Exception:  # the session is broken: closing it frees its locks
                    connection.close()
        return
    # Striped: a bounded set of locks, one picked by the task's id (two tasks sharing one
    # only wait for each other's inputs now and then).
    lock = _input_locks[uuid.UUID(str(task_id)).int % len(_input_locks)]
    held = lock.acquire(blocking=wait)
    try:
        yield held
    finally:
        if held:
            lock.release()


_input_locks = tuple(threading.Lock() for _ in range(64))


def _orphaned_inputs(task_id: Any):
    """Take-over inputs still marked executing though no request runs them any more (call
    under :func:`input_lock`): their server died, or their phone stopped answering, while
    the phone acted. An input's index is below the task's cursor from the moment it is
    reserved; an agent's executing step is always at the cursor."""
    return Step.objects.filter(task_id=task_id, status=StepStatus.EXECUTING,
                               decided_by=DecidedBy.OPERATOR, proposed_action__isnull=True,
                               index__lt=F("task__cursor"))


def settle_inputs(task: Task) -> int:
    """Record what the phone did for each orphaned input of ``task`` (under the input lock).

    The device host is asked, as for a worker that died mid-action, whether it performed
    the step (it answers in turn with the phone's other requests, after the step's own
    perform has run or expired): performed, the step is done with the phone's outcome;
    not performed, it is cancelled. Raises DeviceError when the host cannot be asked (the
    step stays as it is, to be settled later). Returns how many steps were settled.
    """
    client = get_device_client()
    settled = 0
    for step in _orphaned_inputs(task.id):
        action = validate_action(step.executed_action)
        recorded = client.performed(task.device.name, _origin(task, step))
        if recorded is not None and isinstance(action, Action):
            _record_input(task, step, action, _outcome(recorded))
        else:
            Step.objects.filter(id=step.id, status=StepStatus.EXECUTING).update(
                status=StepStatus.CANCELLED,
                outcome="not run: the server stopped before the phone acted")
        settled += 1
    return settled


def settle_orphaned_inputs() -> dict[str, str]:
    """The stall sweep's part (agents/runtime/recovery.py): settle the inputs a dead server left on
    every task whose inputs nobody is sending right now."""
    done: dict[str, str] = {}
    task_ids = set(Step.objects.filter(
        status=StepStatus.EXECUTING, decided_by=DecidedBy.OPERATOR,
        proposed_action__isnull=True, index__lt=F("task__cursor"),
    ).values_list("task_id", flat=True)[:100])
    for task in Task.objects.filter(id__in=task_ids).select_related("device"):
        with input_lock(task.id, wait=False) as held:
            if not held:
                continue  # an input is being sent: its own request records it
            try:
                if settled := settle_inputs(task):
                    done[str(task.id)] = f"settled {settled} orphaned input(s)"
            except DeviceError as exc:
                logger.warning("task %s: cannot settle its orphaned inputs yet: %s",
                               task.id, exc)
    return done


def _record_input(task: Task, step: Step, action: Action, outcome: ActionOutcome) -> bool:
    nodes = nodes_from_json(step.ui_nodes) if step.ui_nodes else []
    target = loop.target_node(action, nodes)
    entry = loop.history_entry(step.index, action, DecidedBy.OPERATOR, outcome.changed, target)
    # A refused input (TYPE with no field focused) is recorded as failed, as the agent's
    # are.
    return bool(Step.objects.filter(id=step.id, status=StepStatus.EXECUTING).update(
        status=StepStatus.DONE, screen_changed=outcome.changed, summary=entry.summary[:255],
        outcome=("changed" if outcome.changed else "unchanged") if outcome.ok
        else f"error: {outcome.error}"[:255],
        executed_at=timezone.now()))


def operator_input(task: Task, user: Any, action: Any) -> Step:
    """One input of an operator in control, executed and recorded as an operator step.

    Inputs are serialised per task (:func:`input_lock`): three sent at once used to pick the
    same step index, and two of them failed on the unique index and were lost (issue 11,
    item 8). Each now waits its turn and runs in the order it got the lock, as the phone
    executes them anyway.

    The step is committed, with its index, *before* the phone acts, and marked done after
    (issue 23, item 1): a server killed while the phone acts used to roll the step back,
    hand its index to the next input, and the device host — which runs each step at most
    once — answered that input with the old outcome and did nothing. A step left executing
    so is settled (:func:`settle_inputs`) by the next input, the hand-back or the stall
    sweep, from the host's own record of what it performed.
    """
    takeover = check_takeover_holder(task, user)
    checked = validate_action(action, (task.device.width, task.device.height))
    if isinstance(checked, ActionError):
        raise ServiceError(f"invalid action: {checked.message}")
    if checked.type in TERMINAL_TYPES:
        raise ServiceError("hand the task back, or abort it, instead of COMPLETE/IMPOSSIBLE")
    client = get_device_client()
    with input_lock(task.id):
        with transaction.atomic():
            task = Task.objects.select_for_update(of=("self",)).select_related("device").get(
                id=task.id)
            check_takeover_holder(task, user)  # again, under the lock: it may have just ended
            try:
                settle_inputs(task)
                observation = client.observe(task.device.name)
            except DeviceError as exc:
                raise DeviceUnavailable(str(exc)) from None
            checked = loop.shown_name(checked, observation.nodes)  # "Navigate up", not node-2
            last = task.steps.order_by("-index").values_list("index", flat=True).first()
            index = max(0 if last is None else last + 1, task.cursor)
            step = Step.objects.create(
                task=task, index=index, frame=observation.frame,
                screen_width=observation.width, screen_height=observation.height,
                app=observation.app, ui_nodes=[n.to_json() for n in observation.nodes],
                proposed_action=None, executed_action=checked.to_json(),
                decided_by=DecidedBy.OPERATOR, status=StepStatus.EXECUTING,
            )
            step.screenshot.save(f"{task.id}-{index}.jpg", ContentFile(observation.jpeg),
                                 save=True)
            Task.objects.filter(id=task.id).update(cursor=index + 1)
        # Committed: whatever happens from here on, the step and its index survive.
        try:
            outcome = client.perform(task.device.name, checked,
                                     origin={"task": str(task.id), "step": index})
        except DeviceError as exc:
            # The phone may still act: the step stays executing, and is settled from the
            # host's record once it answers again. Its index is never handed out again.
            error: DeviceUnavailable | None = DeviceUnavailable(str(exc))
        else:
            error = None
            _record_input(task, step, checked, outcome)
            _label_takeover(takeover, checked)
            step.refresh_from_db()
            _learn_from_takeover_input(task, step, user)
        # An input renews the take-over (lapse_idle_takeovers).
        Task.objects.filter(id=task.id).update(progressed_at=timezone.now())
        task.refresh_from_db()
        events.task_updated(task)
    if error is not None:
        raise error
    step.refresh_from_db()
    return step


def _label_takeover(ticket: Ticket, action: Action) -> None:
    """A take-over's first input labels the step it replaced (issue 24, item 1): it is
    the person's action for that step, and the proposal was right when it is the same.
    Later inputs belong to later screens and label nothing."""
    from agents.runtime.training.labels import judge, score_of

    step = ticket.step
    if step is None:
        return
    right = judge(Decision.TAKEOVER, step.proposed_action, action.to_json(), step.ui_nodes)
    if Ticket.objects.filter(id=ticket.id, human_action__isnull=True).update(
            human_action=action.to_json(), agent_right=right):
        TrainingRecord.objects.filter(ticket_id=ticket.id).update(
            human_action=action.to_json(), score_label=score_of(right))


def hand_back(task: Task, user: Any, *, as_admin: bool = False) -> Task:
    """The holder gives the phone back to the agent; ``as_admin``: an admin does it for
    whoever holds it (the caller records it in the audit trail)."""
    if as_admin:
        if not is_admin(user):
            raise Forbidden("only admins hand back another operator's take-over")
        if task.status != TaskStatus.TAKEN_OVER:
            raise Conflict(f"the task is not taken over "
                           f"({task.get_status_display().lower()})")
    else:
        check_takeover_holder(task, user)
    with input_lock(task.id):
        try:
            # An input a dead server left is recorded before the agent looks again.
            settle_inputs(task)
        except DeviceError as exc:  # the stall sweep settles it once the phone answers
            logger.warning("task %s: handed back with an input not settled yet: %s",
                           task.id, exc)
        with transaction.atomic():
            # Under the task's lock, like inputs: the next step's index is after the last
            # step, inputs a dead server left included, so it is never an input's again.
            task = Task.objects.select_for_update(of=("self",)).select_related("device").get(
                id=task.id)
            last = task.steps.order_by("-index").values_list("index", flat=True).first()
            next_index = max(0 if last is None else last + 1, task.cursor)
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
        named = None
        if ticket_id:
            try:
                named = task.tickets.filter(id=ticket_id).first()
            except Exception:  # not a UUID
                named = None
            # A question: the agent's, or one an operator asked from a ticket (ask_user).
            if named is None or (named.kind != TicketKind.CLARIFICATION
                                 and not _operator_asked(named)):
                raise NotFound("no such question in this task")
            if not named.is_open:
                raise Conflict("this question is already closed; write a new message instead")
        ticket = named or open_questions.order_by("created_at").first()
        message = Message.objects.create(
            task=task, sender=Message.Sender.USER if is_owner else Message.Sender.OPERATOR,
            author=user, text=text, ticket=ticket if is_owner else None)
        events.chat_message(message)
        if ticket is None and is_owner:
            ticket = _answered_intervention(task, text)
            if ticket is not None:
                Message.objects.filter(id=message.id).update(ticket=ticket)
            else:
                # No question is open, yet a reply is an answer all the same (to an
                # operator's chat question, or said ahead): it refines the goal the agent
                # reads at its next choices (RecAgent Eq. 6), e.g. "medium" for the size.
                Task.objects.filter(id=task.id).update(answers=list(
                    Task.objects.filter(id=task.id).values_list("answers", flat=True)[0]
                ) + [text])
        if ticket is not None and is_owner:
            # The owner knows their own preference best: an operator who claimed the
            # escalated question loses the claim, and their later resolve gets a 409.
            Ticket.objects.filter(id=ticket.id, status=TicketStatus.CLAIMED).exclude(
                assignee=user).update(status=TicketStatus.OPEN, assignee=None, claimed_at=None)
            resolve_ticket(ticket, user, Decision.ANSWER, answer=text)
    return message


# --- the owner's verdict ---------------------------------------------------------------

MAX_VERDICT_NOTE_LENGTH = 2000


def check_verdict(right: Any, note: Any) -> tuple[bool, str]:
    if not isinstance(right, bool):
        raise ServiceError("'right' must be true or false")
    if note is None:
        note = ""
    if not isinstance(note, str):
        raise ServiceError("'note' must be text")
    note = check_text(note.strip(), "note")
    if len(note) > MAX_VERDICT_NOTE_LENGTH:
        raise ServiceError(f"the note is {len(note)} characters; at most "
                           f"{MAX_VERDICT_NOTE_LENGTH}")
    return right, note


def record_verdict(task: Task, user: Any, right: Any, note: Any = None) -> Task:
    """The owner's answer to "Did Kairos do what you asked?" (issue 24, item 3).

    Owner only (operators may see the task, but only its owner knows what they meant),
    once per task, and only once the task has finished. A "no" keeps the episode's
    acted-alone steps out of ``learnable_steps`` and puts it at the top of /review/.
    """
    if task.owner_id != getattr(user, "pk", None):
        raise Forbidden("only the task's owner says whether it did what they asked")
    right, note = check_verdict(right, note)
    with transaction.atomic():
        won = Task.objects.filter(id=task.id, status__in=(
            TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.ABORTED),
            verdict_right__isnull=True).update(verdict_right=right, verdict_note=note,
                                               verdict_at=timezone.now())
        task.refresh_from_db()
        if not won:
            if not task.is_finished:
                raise Conflict("the task has not finished yet; answer once it has")
            raise Conflict("you have already answered for this task")
        # The verdict teaches the experience memory (a "yes" confirms the steps that acted
        # alone, a "no" corrects those that came from memory), and a "yes" labels those
        # steps for the next refit.
        learn_from_task_verdict(task, right)
        if right:
            from agents.runtime.learning import schedule_due_refits
            transaction.on_commit(schedule_due_refits)
    return task


def said_no_episodes(limit: int = 20):
    """Finished tasks whose owner said Kairos did not do what they asked, newest first:
    the top of the admins' review."""
    return (Task.objects.filter(verdict_right=False).select_related("owner", "device")
            .order_by("-verdict_at")[:limit])


def learnable_steps():
    """The executed steps this installation may learn from (issue 24, item 3).

    Every done step with an executed action, except the steps that acted alone (no
    ticket; the agent decided) in an episode whose owner said "no, that is not what I
    asked": nobody judged those steps, and the one person who knows says the episode
    went wrong. Steps a person decided stay: their label is the person's. A "yes"
    confirms the acted-alone steps (``Task.verdict_right`` True).
    """
    return (Step.objects.filter(status=StepStatus.DONE, executed_action__isnull=False)
            .exclude(Q(task__verdict_right=False) & Q(decided_by=DecidedBy.AGENT)
                     & Q(tickets__isnull=True)))


def _operator_asked(ticket: Ticket) -> bool:
    """An operator asked the user a question from ``ticket`` (ask_user)."""
    return ticket.messages.filter(sender=Message.Sender.OPERATOR).exists()


MAX_ASK_OPTIONS = 6


def ask_user(ticket: Ticket, user: Any, question: Any, options: Any = None) -> Message:
    """An operator asks the task's owner a structured question from a ticket, with quick
    replies (issue 26): the user's reply answers the ticket, and the agent goes on with it
    as part of its goal — as when the agent asks itself."""
    if not is_operator(user):
        raise Forbidden("only operators ask from a ticket")
    question = check_message_text(question)
    if options is None:
        options = []
    if not isinstance(options, list) or len(options) > MAX_ASK_OPTIONS:
        raise ServiceError(f"options must be a list of at most {MAX_ASK_OPTIONS} answers")
    checked = []
    for option in options:
        if not isinstance(option, str) or not option.strip() or len(option.strip()) > 80:
            raise ServiceError("each option must be a short non-empty text (at most 80 characters)")
        checked.append(check_text(option.strip(), "option"))
    ticket.refresh_from_db()
    if not ticket.is_open:
        raise Conflict(f"this ticket is no longer open (it is {ticket.status})")
    if ticket.kind == TicketKind.CLARIFICATION:
        raise Conflict("this ticket is already a question to the user; answer it, or wait")
    if ticket.status == TicketStatus.CLAIMED and ticket.assignee_id != user.pk:
        raise Conflict(f"{ticket.assignee} holds this ticket")
    with transaction.atomic():
        message = Message.objects.create(
            task=ticket.task, sender=Message.Sender.OPERATOR, author=user, ticket=ticket,
            text=question, options=list(dict.fromkeys(checked)))
        events.chat_message(message)
    return message


# Tickets where the agent was unsure what the user wants: the user's own reply may settle
# them. A sensitive action, a device or model error is for an operator whatever is said.
ANSWERABLE_BY_THE_USER = (TicketReason.LOW_CONFIDENCE, TicketReason.AMBIGUOUS_INTENT,
                          TicketReason.NO_PROGRESS)


def _answered_intervention(task: Task, text: str) -> Ticket | None:
    """The open intervention the owner's chat reply answers: one waiting on a step whose
    screen offers an option the reply names ("A latte please" while the agent proposed
    Americano on the drinks list). The agent then looks again with the reply as part of
    its goal instead of an operator guessing (issue 26, item 5)."""
    for ticket in task.tickets.filter(
            kind=TicketKind.INTERVENTION, status__in=(TicketStatus.OPEN, TicketStatus.CLAIMED),
            step__status=StepStatus.WAITING).select_related("step").order_by("created_at"):
        if _operator_asked(ticket):
            return ticket  # an operator asked the user from this ticket: this is the answer
        if ticket.reason not in ANSWERABLE_BY_THE_USER:
            continue
        labels = [n.text or n.content_desc for n in nodes_from_json(ticket.step.ui_nodes or [])
                  if n.text or n.content_desc]
        if loop.names_an_option(text, labels):
            return ticket
    return None


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
    from agents.runtime.tasks import escalate_clarification_task

    delay = float(settings.KAIROS_CLARIFICATION_TIMEOUT)
    transaction.on_commit(
        lambda: escalate_clarification_task.apply_async((str(ticket.id),), countdown=delay))


def escalate_overdue_clarifications(now: Any = None) -> list[str]:
    """The stall sweep's part (agents/runtime/recovery.py, issue 23, item 2): every question still
    unanswered ``KAIROS_CLARIFICATION_TIMEOUT`` after it was asked goes to the operators.

    The delayed hand-off :func:`schedule_escalation` sends is held by the worker that took
    it: a worker killed whole leaves it in Redis's unacknowledged set for the transport's
    visibility timeout (an hour). The database knows what is overdue; both paths escalate
    through the same conditional UPDATE, so a question reaches operators once.
    """
    cutoff = (now or timezone.now()) - timedelta(
        seconds=float(settings.KAIROS_CLARIFICATION_TIMEOUT))
    overdue = Ticket.objects.filter(kind=TicketKind.CLARIFICATION, status=TicketStatus.OPEN,
                                    escalated=False, created_at__lte=cutoff)
    return [str(ticket_id) for ticket_id in overdue.values_list("id", flat=True)[:100]
            if escalate_clarification(ticket_id)]


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
