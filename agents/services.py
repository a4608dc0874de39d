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
from devices.actions import COMPLETE, IMPOSSIBLE, TERMINAL_TYPES, Action, ActionError, validate_action
from devices.host import DeviceError, get_device_client
from devices.models import Device, DeviceStatus
from devices.uitree import nodes_from_json

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

def access_device(user: Any, ref: str) -> Device:
    """A device by id or name that ``user`` may run tasks on."""
    device = None
    try:
        device = Device.objects.filter(id=ref).first()
    except Exception:  # not a UUID
        device = None
    if device is None:
        device = Device.objects.filter(name=ref).first()
    if device is None:
        raise NotFound(f"unknown device '{str(ref)[:64]}'")
    if not is_operator(user) and device.users.exists() and not device.users.filter(
        pk=user.pk
    ).exists():
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

def check_instruction(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ServiceError("the instruction is empty")
    text = text.strip()
    if len(text) > MAX_INSTRUCTION_LENGTH:
        raise ServiceError(
            f"the instruction is {len(text)} characters; at most {MAX_INSTRUCTION_LENGTH}"
        )
    return text


def check_threshold(value: Any) -> float:
    if value is None:
        return float(settings.KAIROS_DEFAULT_THRESHOLD)
    try:
        threshold = float(value)
    except (TypeError, ValueError):
        raise ServiceError("threshold must be a number between 0 and 5") from None
    if not 0 <= threshold <= 5 or threshold != threshold:
        raise ServiceError(f"threshold must be between 0 and 5, not {value}")
    return threshold


def check_backend(name: Any, device: Device) -> str:
    from agents.backends import backend_names

    name = name or settings.KAIROS_DEFAULT_BACKEND
    if name not in backend_names():
        raise ServiceError(
            f"unknown backend '{str(name)[:32]}': use one of {', '.join(backend_names())}")
    if name == "oracle" and device.kind != "sim":
        raise ServiceError("the oracle backend exists for simulated phones only")
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


def create_task(
    owner: Any, device: Device, instruction: Any, *, threshold: Any = None,
    backend: str | None = None, suite: str = "", suite_task: str = "",
    max_steps: int | None = None, start: bool = True,
) -> Task:
    instruction = check_instruction(instruction)
    threshold = check_threshold(threshold)
    backend = check_backend(backend, device)
    check_device_online(device)
    if backend == "oracle" and not suite:
        raise ServiceError("the oracle backend needs a suite task")
    with transaction.atomic():
        task = Task.objects.create(
            owner=owner, device=device, instruction=instruction, threshold=threshold,
            backend=backend, suite=suite, suite_task=suite_task,
            max_steps=max_steps or settings.KAIROS_MAX_STEPS,
        )
        if start:
            start_task(task)
    return task


def start_task(task: Task) -> None:
    """QUEUED → RUNNING, then the first step is scheduled after commit."""
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
    return get_backend(task.backend, **kwargs)


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
        # A worker died mid-action: the device may or may not have acted, so the action
        # is never repeated; the next step observes the screen as it is.
        with transaction.atomic():
            Step.objects.filter(id=step.id, status=StepStatus.EXECUTING).update(
                status=StepStatus.DONE, outcome="unknown: worker stopped during the action")
            return _advance(task, index)
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
            open_ticket(task, step, TicketKind.INTERVENTION, TicketReason.DEVICE_ERROR,
                        note=str(exc))
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
    """Run the step's decided action once; a second delivery finds it claimed."""
    won = Step.objects.filter(id=step.id, status__in=(StepStatus.READY, StepStatus.PROPOSED)
                              ).update(status=StepStatus.EXECUTING)
    if not won:
        return "duplicate"
    action = validate_action(step.executed_action)
    assert isinstance(action, Action), "only validated actions are stored for execution"
    if action.type in TERMINAL_TYPES:
        Step.objects.filter(id=step.id).update(status=StepStatus.DONE, outcome="finished",
                                               summary=action.describe(),
                                               executed_at=timezone.now())
        _finish_on(task, action)
        return "finished"
    nodes = nodes_from_json(step.ui_nodes) if step.ui_nodes else []
    target = loop.target_node(action, nodes)
    started = time.perf_counter()
    try:
        outcome = get_device_client().perform(task.device.name, action)
    except DeviceError as exc:
        with transaction.atomic():
            Step.objects.filter(id=step.id).update(status=StepStatus.WAITING,
                                                   outcome=f"error: {exc}"[:255])
            Task.objects.filter(id=task.id, status=TaskStatus.RUNNING).update(
                status=TaskStatus.WAITING_OPERATOR)
            open_ticket(task, step, TicketKind.INTERVENTION, TicketReason.DEVICE_ERROR,
                        note=str(exc), set_status=False)
        return "waiting"
    excluded = set(task.excluded_elements)
    loop.reflect(action, outcome.changed, target, excluded)
    entry = loop.history_entry(step.index, action, step.decided_by, outcome.changed, target)
    with transaction.atomic():
        Step.objects.filter(id=step.id).update(
            status=StepStatus.DONE, screen_changed=outcome.changed,
            outcome=("changed" if outcome.changed else "unchanged") if outcome.ok
            else f"error: {outcome.error}"[:255],
            summary=entry.summary[:255], execute_ms=(time.perf_counter() - started) * 1000,
            executed_at=timezone.now(),
        )
        result = _advance(task, step.index, excluded)
    return "executed" if result == "scheduled" else result


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


def _finish_on(task: Task, action: Action) -> None:
    success: bool | None = None
    if task.suite and task.suite_task:
        try:
            success = get_device_client().check(task.device.name, task.suite, task.suite_task)
        except DeviceError as exc:
            logger.warning("could not judge task %s: %s", task.id, exc)
    if action.type == COMPLETE:
        status = TaskStatus.SUCCEEDED if success is not False else TaskStatus.FAILED
    else:
        status = TaskStatus.FAILED
    finish_task(task, status, success=success)


def finish_task(task: Task, status: str, *, success: bool | None = None, error: str = "") -> bool:
    with transaction.atomic():
        won = Task.objects.filter(id=task.id, status__in=ACTIVE_TASK_STATUSES).update(
            status=status, success=success, error=error, finished_at=timezone.now())
        if not won:
            return False
        for ticket in Ticket.objects.filter(task=task, status__in=(TicketStatus.OPEN,
                                                                   TicketStatus.CLAIMED)):
            if Ticket.objects.filter(id=ticket.id, status=ticket.status).update(
                    status=TicketStatus.CANCELLED, resolved_at=timezone.now()):
                ticket.status = TicketStatus.CANCELLED
                events.ticket_resolved(ticket)
        task.refresh_from_db()
        events.task_updated(task)
    return True


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


def claim_ticket(ticket: Ticket, user: Any) -> Ticket:
    with transaction.atomic():
        won = Ticket.objects.filter(id=ticket.id, status=TicketStatus.OPEN).update(
            status=TicketStatus.CLAIMED, assignee=user, claimed_at=timezone.now())
        ticket.refresh_from_db()
        if not won:
            if ticket.status == TicketStatus.CLAIMED and ticket.assignee_id == user.pk:
                return ticket
            if ticket.status == TicketStatus.CLAIMED:
                raise Conflict(f"{ticket.assignee} holds this ticket")
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
            raise ServiceError("a clarification is resolved with an answer, not approved")
        proposed = ticket.step.proposed_action if ticket.step else None
        checked = validate_action(proposed) if proposed else None
        if not isinstance(checked, Action):
            raise ServiceError("there is no valid proposed action to approve; edit it instead")
        return Resolution(decision, action=checked)
    if decision == Decision.EDIT:
        device = ticket.task.device
        checked = validate_action(action, (device.width, device.height))
        if isinstance(checked, ActionError):
            raise ServiceError(f"invalid action: {checked.message}")
        return Resolution(decision, action=checked)
    return Resolution(decision)


def resolve_ticket(ticket: Ticket, user: Any, decision: Any, action: Any = None,
                   answer: Any = None) -> Ticket:
    """Approve / edit / take over / answer / abort. Exactly one resolution wins."""
    resolution = check_resolution(ticket, decision, action, answer)
    now = timezone.now()
    with transaction.atomic():
        won = Ticket.objects.filter(
            Q(status=TicketStatus.OPEN) | Q(status=TicketStatus.CLAIMED, assignee=user),
            id=ticket.id,
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
        finish_task(task, TaskStatus.ABORTED, error=f"aborted by {user}")
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
    step = ticket.step
    # OS-Kairos Eq. 3 ("action || score"): an approved action is a full-score example,
    # a replaced one a low-score example; answers and aborts carry no action label.
    label = {Decision.APPROVE: 5, Decision.EDIT: 1, Decision.TAKEOVER: 1}.get(ticket.decision)
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
    if not finish_task(task, TaskStatus.ABORTED, error=f"aborted by {user}"):
        raise Conflict(f"the task is already {task.status}")
    task.refresh_from_db()
    return task


# --- take-over -----------------------------------------------------------------------

def check_takeover_holder(task: Task, user: Any) -> Ticket:
    ticket = task.tickets.filter(decision=Decision.TAKEOVER, resolved_by=user).order_by(
        "-resolved_at").first()
    if task.status != TaskStatus.TAKEN_OVER or ticket is None:
        raise Forbidden("you do not hold a take-over of this task")
    return ticket


def operator_input(task: Task, user: Any, action: Any) -> Step:
    """One input of an operator in control, executed and recorded as an operator step."""
    check_takeover_holder(task, user)
    checked = validate_action(action, (task.device.width, task.device.height))
    if isinstance(checked, ActionError):
        raise ServiceError(f"invalid action: {checked.message}")
    if checked.type in TERMINAL_TYPES:
        raise ServiceError("hand the task back, or abort it, instead of COMPLETE/IMPOSSIBLE")
    client = get_device_client()
    observation = client.observe(task.device.name)
    with transaction.atomic():
        index = task.steps.count() and (task.steps.order_by("-index").first().index + 1)
        step = Step.objects.create(
            task=task, index=index, frame=observation.frame, screen_width=observation.width,
            screen_height=observation.height, app=observation.app,
            ui_nodes=[n.to_json() for n in observation.nodes], proposed_action=None,
            executed_action=checked.to_json(), decided_by=DecidedBy.OPERATOR,
            status=StepStatus.EXECUTING,
        )
        step.screenshot.save(f"{task.id}-{index}.jpg", ContentFile(observation.jpeg), save=True)
    outcome = client.perform(task.device.name, checked)
    target = loop.target_node(checked, observation.nodes)
    entry = loop.history_entry(index, checked, DecidedBy.OPERATOR, outcome.changed, target)
    Step.objects.filter(id=step.id).update(
        status=StepStatus.DONE, screen_changed=outcome.changed, summary=entry.summary[:255],
        outcome="changed" if outcome.changed else "unchanged", executed_at=timezone.now())
    Task.objects.filter(id=task.id).update(cursor=index + 1)
    task.refresh_from_db()
    events.task_updated(task)
    step.refresh_from_db()
    return step


def hand_back(task: Task, user: Any) -> Task:
    check_takeover_holder(task, user)
    with transaction.atomic():
        next_index = (task.steps.order_by("-index").values_list("index", flat=True).first() or 0) + 1
        won = Task.objects.filter(id=task.id, status=TaskStatus.TAKEN_OVER).update(
            status=TaskStatus.RUNNING, cursor=next_index)
        if not won:
            raise Conflict(f"the task is {task.status}")
        schedule_step(task.id, next_index)
        task.refresh_from_db()
        events.task_updated(task)
    return task


# --- chat ----------------------------------------------------------------------------

def check_message_text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ServiceError("the message is empty")
    text = text.strip()
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
    action = choices[0] if choices else Action(IMPOSSIBLE)
    return resolve_ticket(ticket, user, Decision.EDIT, action=action.to_json())


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
