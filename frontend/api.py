"""The JSON API under ``/api/`` (CONTRACT "HTTP"), with its OpenAPI document.

Views parse input, call one service and render the result. Every error is a JSON
``{"detail": …}`` with a 4xx status.
"""
from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest
from django.utils import timezone
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import HttpBearer, django_auth

from agents import events, services
from agents.models import Ticket, TicketStatus
from devices.models import Device
from frontend.models import ApiToken, hash_token


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        row = ApiToken.objects.select_related("user").filter(token_hash=hash_token(token)).first()
        if row is None or not row.user.is_active:
            return None
        ApiToken.objects.filter(id=row.id).update(last_used_at=timezone.now())
        request.user = row.user
        return row.user


api = NinjaAPI(
    title="Kairos API",
    version="1.0",
    description="Create tasks for phones and resolve the agent's tickets. "
                "Authenticate with a session or `Authorization: Bearer <token>` "
                "(`manage.py create_token USERNAME`).",
    auth=[BearerToken(), django_auth],
    urls_namespace="api",
)


@api.exception_handler(services.ServiceError)
def service_error(request: HttpRequest, exc: services.ServiceError):
    return api.create_response(request, {"detail": exc.detail}, status=exc.status)


@api.exception_handler(ValidationError)
def validation_error(request: HttpRequest, exc: ValidationError):
    problems = []
    for error in exc.errors:
        where = ".".join(str(p) for p in error.get("loc", ()) if p not in ("body", "payload"))
        problems.append(f"{where}: {error.get('msg')}" if where else str(error.get("msg")))
    return api.create_response(request, {"detail": "; ".join(problems) or "invalid request"},
                               status=400)


@api.exception_handler(AuthenticationError)
def auth_error(request: HttpRequest, exc: AuthenticationError):
    return api.create_response(request, {"detail": "authentication required"}, status=401)


class DeviceOut(Schema):
    id: str
    name: str
    kind: str
    status: str
    width: int
    height: int


class TaskIn(Schema):
    instruction: str
    device: str
    threshold: float | None = None
    backend: str | None = None
    suite: str | None = None
    suite_task: str | None = None


class ResolveIn(Schema):
    decision: Literal["approve", "edit", "takeover", "answer", "abort"]
    action: dict[str, Any] | None = None
    answer: str | None = None


class MessageIn(Schema):
    text: str


class InputIn(Schema):
    action: dict[str, Any]


def step_json(step: Any) -> dict[str, Any]:
    return {
        "index": step.index, "status": step.status, "action": step.executed_action,
        "proposed_action": step.proposed_action, "confidence": step.confidence,
        "by": step.decided_by, "thought": step.thought, "plan": step.plan,
        "summary": step.summary, "outcome": step.outcome,
        "screenshot_url": step.screenshot.url if step.screenshot else None,
        "prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
    }


def task_detail(task: Any) -> dict[str, Any]:
    data = events.task_summary(task)
    data.update({
        "owner": task.owner.get_username(), "backend": task.backend,
        "max_steps": task.max_steps, "answers": task.answers,
        "created_at": task.created_at.isoformat(),
        "finished_at": task.finished_at.isoformat() if task.finished_at else None,
        "steps": [step_json(s) for s in task.steps.order_by("index")],
        "tickets": [events.ticket_json(t) for t in task.tickets.select_related(
            "step", "assignee", "task__device").order_by("created_at")],
        "messages": [events.message_json(m) for m in task.messages.select_related("author")],
    })
    return data


@api.get("/devices", response=list[DeviceOut], tags=["devices"])
def list_devices(request: HttpRequest):
    return services.devices_json(Device.objects.all())


@api.post("/tasks", response={201: dict}, tags=["tasks"])
def create_task(request: HttpRequest, payload: TaskIn):
    device = services.access_device(request.user, payload.device)
    if (payload.backend == "oracle" or payload.suite) and not services.is_operator(request.user):
        raise services.Forbidden("only operators may run suite tasks or the oracle backend")
    task = services.create_task(
        request.user, device, payload.instruction, threshold=payload.threshold,
        backend=payload.backend, suite=payload.suite or "", suite_task=payload.suite_task or "",
    )
    return 201, task_detail(task)


@api.get("/tasks", response=list[dict], tags=["tasks"])
def list_tasks(request: HttpRequest, status: str | None = None):
    tasks = services.visible_tasks(request.user)
    if status:
        tasks = tasks.filter(status=status)
    return [events.task_summary(t) for t in tasks[:200]]


@api.get("/tasks/{task_id}", response=dict, tags=["tasks"])
def get_task(request: HttpRequest, task_id: str):
    return task_detail(services.access_task(request.user, task_id))


@api.post("/tasks/{task_id}/abort", response=dict, tags=["tasks"])
def abort_task(request: HttpRequest, task_id: str):
    task = services.access_task(request.user, task_id)
    return task_detail(services.abort_task(task, request.user))


@api.post("/tasks/{task_id}/messages", response={201: dict}, tags=["tasks"])
def post_message(request: HttpRequest, task_id: str, payload: MessageIn):
    task = services.access_task(request.user, task_id)
    return 201, events.message_json(services.post_message(task, request.user, payload.text))


@api.post("/tasks/{task_id}/input", response=dict, tags=["tasks"])
def operator_input(request: HttpRequest, task_id: str, payload: InputIn):
    task = services.access_task(request.user, task_id)
    return step_json(services.operator_input(task, request.user, payload.action))


@api.post("/tasks/{task_id}/hand_back", response=dict, tags=["tasks"])
def hand_back(request: HttpRequest, task_id: str):
    task = services.access_task(request.user, task_id)
    return task_detail(services.hand_back(task, request.user))


@api.get("/tickets", response=list[dict], tags=["tickets"])
def list_tickets(request: HttpRequest, status: str | None = None):
    if not services.is_operator(request.user):
        raise services.Forbidden("only operators handle tickets")
    tickets = Ticket.objects.select_related("task", "task__device", "step", "assignee")
    if status == "open":  # "open" means still waiting for a person, claimed or not
        tickets = tickets.filter(status__in=(TicketStatus.OPEN, TicketStatus.CLAIMED))
    elif status:
        if status not in TicketStatus.values:
            raise services.ServiceError(f"unknown status '{status[:20]}'")
        tickets = tickets.filter(status=status)
    return [events.ticket_json(t) for t in tickets.order_by("created_at")[:500]]


@api.get("/tickets/{ticket_id}", response=dict, tags=["tickets"])
def get_ticket(request: HttpRequest, ticket_id: str):
    return events.ticket_json(services.access_ticket(request.user, ticket_id))


@api.post("/tickets/{ticket_id}/claim", response=dict, tags=["tickets"])
def claim_ticket(request: HttpRequest, ticket_id: str):
    ticket = services.access_ticket(request.user, ticket_id)
    return events.ticket_json(services.claim_ticket(ticket, request.user))


@api.post("/tickets/{ticket_id}/release", response=dict, tags=["tickets"])
def release_ticket(request: HttpRequest, ticket_id: str):
    ticket = services.access_ticket(request.user, ticket_id)
    return events.ticket_json(services.release_ticket(ticket, request.user))


@api.post("/tickets/{ticket_id}/resolve", response=dict, tags=["tickets"])
def resolve_ticket(request: HttpRequest, ticket_id: str, payload: ResolveIn):
    ticket = services.access_ticket(request.user, ticket_id)
    ticket = services.resolve_ticket(ticket, request.user, payload.decision,
                                     action=payload.action, answer=payload.answer)
    return events.ticket_json(ticket)


def healthz_status() -> tuple[dict[str, str], bool]:
    """Probe the database, the broker and the channel layer."""
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer
    from django.conf import settings
    from django.db import connection

    status: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        status["db"] = "ok"
    except Exception as exc:
        status["db"] = f"error: {exc}"
    if settings.REDIS_URL:
        import redis

        try:
            redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
            status["broker"] = "ok"
        except Exception as exc:
            status["broker"] = f"error: {exc}"
    else:
        status["broker"] = "ok"  # in-memory broker inside this process
    try:
        layer = get_channel_layer()
        async_to_sync(layer.send)("healthz.probe", {"type": "healthz"})
        async_to_sync(layer.receive)("healthz.probe")
        status["channel_layer"] = "ok"
    except Exception as exc:
        status["channel_layer"] = f"error: {exc}"
    return status, all(v == "ok" for v in status.values())
