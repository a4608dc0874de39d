"""The JSON API under ``/api/`` (CONTRACT "HTTP"), with its OpenAPI document.

Views parse input, call one service and render the result. Every error is a JSON
``{"detail": …}``: 4xx for the caller's mistakes, 503 when the phone does not answer,
500 (logged, no details) for a bug. Request and response schemas: ``frontend/schemas.py``.
"""
from __future__ import annotations

import json
import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone
from ninja import NinjaAPI, Query
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer, SessionAuth

from access.devices import access_device, usable_devices
from access.errors import Forbidden, ServiceError
from access.roles import is_admin, is_operator
from agents.runtime import events
from agents.runtime.models import Ticket, TicketStatus
from agents.runtime.services import access, chat, lifecycle, takeover, tickets, validation, verdicts
from devices.actions import text_problem
from devices.host import DeviceError
from frontend.models import ApiToken, hash_token
from frontend.schemas import (
    NOT_BLANK, AskIn, DeviceOut, ErrorOut, InputIn, MessageIn, MessageOut, ResolveIn, StepOut,
    TaskIn, TaskOut, TaskStatusName, TaskSummaryOut, TicketOut, TicketStatusName, VerdictIn,
)

logger = logging.getLogger(__name__)


def user_for_token(token: str) -> Any:
    """The active user an API token belongs to, or None."""
    if len(token) > 200 or text_problem(token):
        return None
    row = ApiToken.objects.select_related("user").filter(token_hash=hash_token(token)).first()
    if row is None or not row.user.is_active:
        return None
    ApiToken.objects.filter(id=row.id).update(last_used_at=timezone.now())
    return row.user


def bearer_user(request: HttpRequest) -> Any:
    """The user of an ``Authorization: Bearer`` header, or None (outside ninja's views)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return user_for_token(token.strip()) if scheme.lower() == "bearer" and token else None


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        user = user_for_token(token)
        if user is not None:
            request.user = user
        return user


class BrowserSession(SessionAuth):
    """The logged-in browser's session; its unsafe requests need the CSRF token.

    Ninja's own session auth checks CSRF before it looks at the session, so a request
    with no credentials at all got 403 "CSRF check Failed" instead of 401.
    """

    def _get_key(self, request: HttpRequest) -> str | None:
        if not request.user.is_authenticated:
            return None
        if CsrfViewMiddleware(lambda r: None).process_view(request, None, (), {}):
            raise HttpError(403, "CSRF check failed: send the csrftoken cookie's value in "
                                 "X-CSRFToken, or use a Bearer token")
        return request.COOKIES.get(self.param_name)


class StrictJsonParser(Parser):
    """A JSON body must be an object (ninja reports any other as 400 "Cannot parse
    request body"); strings in it were already checked by :class:`InputCheck`."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        data = json.loads(request.body)
        if not isinstance(data, dict):
            raise ValueError("the request body must be a JSON object")
        return data


def _input_problem(value: Any, depth: int = 0) -> str | None:
    if depth > 64:
        return "is nested too deeply"
    if isinstance(value, str):
        return text_problem(value)
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, list):
        items = value
    else:
        return None
    for item in items:
        if problem := _input_problem(item, depth + 1):
            return problem
    return None


class InputCheck:
    """Middleware: no string of the path, the query, a form or a JSON body may hold NUL
    or a lone surrogate — PostgreSQL cannot store them (``psycopg.DataError``), sockets
    cannot carry them — so they are a 400 here, before any view, instead of a 500 deep
    inside one. Under ``/api/`` the answer is JSON ``detail``; elsewhere the *Bad request*
    page naming the field (issue 23.4: the review filters, the admin's changelists, the
    console's and calibration forms all passed them to the database)."""

    def __init__(self, get_response: Any):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        api = request.path.startswith("/api/")
        try:
            problem = self._problem(request, api)
        except RequestDataTooBig:
            # Django's own answer is an HTML 400 and an ERROR log line (issue 23.7).
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            if not api:
                raise
            return JsonResponse({"detail": f"the request body is over {limit} bytes"},
                                status=413)
        if problem is None:
            return self.get_response(request)
        accept = request.headers.get("Accept", "")
        if api or ("application/json" in accept and "text/html" not in accept):
            return JsonResponse({"detail": problem}, status=400)
        from django.shortcuts import render

        return render(request, "frontend/bad_request.html", {"problem": problem}, status=400)

    @staticmethod
    def _problem(request: HttpRequest, api: bool) -> str | None:
        # Outside /api/ a path is only ever matched against routes and file names (an odd
        # one is a 404 there, as docs/security.md says); its query and forms reach the
        # database.
        if api and (problem := text_problem(request.path)):
            return f"the URL {problem}"
        for key, values in request.GET.lists():
            if problem := _input_problem([key, *values]):
                return f"the query parameter '{key[:40]}' {problem}"
        if api:
            if request.content_type == "application/json" and request.body:
                try:
                    data = json.loads(request.body)
                except (ValueError, RecursionError):
                    return "the request body is not valid JSON"
                if problem := _input_problem(data):
                    return f"the request body {problem}"
        elif request.method == "POST" and request.content_type in (
                "application/x-www-form-urlencoded", "multipart/form-data"):
            for key, values in request.POST.lists():
                if problem := _input_problem([key, *values]):
                    return f"the form field '{key[:40]}' {problem}"
            for key, files in request.FILES.lists():
                if problem := _input_problem([key, *(f.name or "" for f in files)]):
                    return f"the file field '{key[:40]}' {problem}"
        return None


# No string a request carries may hold NUL (PostgreSQL cannot store it): every string
# schema of a request says so with a pattern (issue 23.7: Schemathesis drew such strings
# and took their 400 for a schema violation). Lone UTF-16 surrogates are refused too (the
# API's description says so), but not in the pattern: a class naming surrogates makes
# Hypothesis, so Schemathesis, drop the whole pattern, and the class of allowed ranges
# that avoids them makes its generation 35 times slower. A UTF-8 request cannot carry a
# lone surrogate anyway, only a JSON escape of one.
CLEAN_TEXT = r"^[^\u0000]*$"
CLEAN_NOT_BLANK = r"^[^\u0000]*[^\s\u0000][^\u0000]*$"  # not blank, and no NUL


def declare_clean_strings(document: dict[str, Any]) -> dict[str, Any]:
    """Give every string of a request (parameters and bodies) the pattern that refuses NUL;
    the "not blank" one (``\\S``) becomes its variant without NUL."""
    components = document.get("components", {}).get("schemas", {})
    seen: set[int] = set()

    def walk(schema: Any) -> None:
        if isinstance(schema, list):
            for item in schema:
                walk(item)
            return
        if not isinstance(schema, dict) or id(schema) in seen:
            return
        seen.add(id(schema))
        ref = schema.get("$ref", "")
        if ref.startswith("#/components/schemas/"):
            walk(components.get(ref.rsplit("/", 1)[-1]))
        types = schema.get("type")
        is_string = types == "string" or (isinstance(types, list) and "string" in types)
        if is_string and "enum" not in schema and "const" not in schema:
            pattern = schema.get("pattern")
            if pattern is None:
                schema["pattern"] = CLEAN_TEXT
            elif pattern == NOT_BLANK:
                schema["pattern"] = CLEAN_NOT_BLANK
        for key, value in list(schema.items()):
            if key in ("properties", "patternProperties", "dependentSchemas", "$defs"):
                walk(list(value.values()) if isinstance(value, dict) else value)
            elif isinstance(value, (dict, list)) and key not in ("enum", "const", "required",
                                                                 "examples", "default"):
                walk(value)

    for item in document.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                walk(parameter.get("schema"))
            for media in operation.get("requestBody", {}).get("content", {}).values():
                walk(media.get("schema"))
    return document


class KairosAPI(NinjaAPI):
    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        return declare_clean_strings(super().get_openapi_schema(*args, **kwargs))


api = KairosAPI(
    title="Kairos API",
    version="1.0",
    description="Create tasks for phones and resolve the agent's tickets. "
                "Authenticate with a session or `Authorization: Bearer <token>` "
                "(`manage.py create_token USERNAME`). Every error is JSON "
                "`{\"detail\": …}`. No string may contain a NUL character or a lone "
                "UTF-16 surrogate (400).",
    auth=[BearerToken(), BrowserSession()],
    parser=StrictJsonParser(),
    urls_namespace="api",
)


def links(status: int, pointer: str, param: str, *operations: str) -> dict[str, Any]:
    """OpenAPI links: the id an answer carries feeds these operations (clients and
    Schemathesis's stateful tests follow them from a created task to its actions)."""
    return {"responses": {status: {"links": {
        op: {"operationId": f"frontend_api_{op}", "parameters": {param: pointer}}
        for op in operations}}}}


TASK_OPERATIONS = ("get_task", "abort_task", "post_message", "operator_input", "hand_back",
                   "post_verdict")
TICKET_OPERATIONS = ("get_ticket", "claim_ticket", "release_ticket", "resolve_ticket")


def errors(*codes: int) -> dict[int, Any]:
    """The error answers an endpoint may give, for the OpenAPI document."""
    return {code: ErrorOut for code in (400, 401, *codes)}


@api.exception_handler(ServiceError)
def service_error(request: HttpRequest, exc: ServiceError):
    return api.create_response(request, {"detail": exc.detail}, status=exc.status)


# Numeric fields with a range, for one message naming both ends.
BOUNDS = {"threshold": (0, 5)}


@api.exception_handler(ValidationError)
def validation_error(request: HttpRequest, exc: ValidationError):
    problems = []
    for error in exc.errors:
        where = ".".join(str(p) for p in error.get("loc", ()) if p not in ("body", "payload"))
        message = str(error.get("msg"))
        if error.get("type") == "string_pattern_mismatch":
            message = "must not be empty"
        elif error.get("type") == "float_type" and where in BOUNDS:
            message = "must be a number between {} and {} (not a string or true/false)" \
                .format(*BOUNDS[where])
        elif where in BOUNDS:
            message = "must be between {} and {}".format(*BOUNDS[where])
        problems.append(f"{where}: {message}" if where else message)
    return api.create_response(request, {"detail": "; ".join(problems) or "invalid request"},
                               status=400)


@api.exception_handler(AuthenticationError)
def auth_error(request: HttpRequest, exc: AuthenticationError):
    return api.create_response(request, {"detail": "authentication required"}, status=401)


@api.exception_handler(DeviceError)
def device_error(request: HttpRequest, exc: DeviceError):
    return api.create_response(request, {"detail": f"the phone is unavailable: {exc}"[:500]},
                               status=503)


@api.exception_handler(Exception)
def server_error(request: HttpRequest, exc: Exception):
    # With DEBUG on or off: JSON for the caller, the traceback for the log only.
    if isinstance(exc, HttpError):
        return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)
    logger.error("API error on %s %s", request.method, request.path[:200], exc_info=exc)
    return api.create_response(request, {"detail": "internal server error"}, status=500)


def api_not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Unknown routes under ``/api/``: JSON, never the HTML 404 page."""
    return JsonResponse({"detail": "no such API endpoint; see /api/docs"}, status=404)


def api_or_page_server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: JSON under ``/api/``, the HTML page elsewhere."""
    from django.views.defaults import server_error as page_server_error

    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "internal server error"}, status=500)
    return page_server_error(request)


def step_json(step: Any) -> dict[str, Any]:
    return {
        "index": step.index, "status": step.status, "action": step.executed_action,
        "proposed_action": step.proposed_action, "confidence": step.confidence,
        "by": step.decided_by, "thought": step.thought, "plan": step.plan,
        "summary": step.summary, "outcome": step.outcome, "target_label": _target_label(step),
        "screenshot_url": step.screenshot.url if step.screenshot else None,
        "prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
    }


def _target_label(step: Any) -> str:
    """The executed action's element as a person names it (the task page shows it)."""
    from agents.brain.loop import display_label
    from devices.actions import Action, validate_action
    from devices.uitree import nodes_from_json

    action = validate_action(step.executed_action) if step.executed_action else None
    if not isinstance(action, Action) or action.x is None or not step.ui_nodes:
        return ""
    return display_label(action, nodes_from_json(step.ui_nodes))


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
        "verdict": verdict_json(task),
    })
    return data


def verdict_json(task: Any) -> dict[str, Any] | None:
    if task.verdict_right is None:
        return None
    return {"right": task.verdict_right, "note": task.verdict_note,
            "at": task.verdict_at.isoformat() if task.verdict_at else ""}


@api.get("/devices", response={200: list[DeviceOut], **errors()}, tags=["devices"])
def list_devices(request: HttpRequest):
    """The phones you may run tasks on; ``status`` is online, busy (a task runs on it) or
    offline (unplugged, or no device host serves it)."""
    return validation.devices_json(usable_devices(request.user))


@api.post("/devices/{device_id}/home", response={200: DeviceOut, **errors(403, 404, 409, 503)},
          tags=["devices"])
def reset_device_to_home(request: HttpRequest, device_id: str):
    """Operators: send an idle phone (by id or name) to its home screen, so the next task
    starts there; 409 while a task uses it or when it is offline."""
    if not is_operator(request.user):
        raise Forbidden("only operators reset phones")
    found = access_device(request.user, device_id)
    lifecycle.reset_to_home(request.user, found)
    return validation.devices_json([found])[0]


@api.post("/tasks", response={201: TaskOut, **errors(403, 404, 409, 413, 429, 503)},
          tags=["tasks"],
          openapi_extra=links(201, "$response.body#/id", "task_id", *TASK_OPERATIONS))
def create_task(request: HttpRequest, payload: TaskIn):
    """Start a task on a phone; 404 for an unknown phone, 403 for one you may not use (or
    a ``threshold`` below the phone's γ, for end users), 429 when you already have
    ``KAIROS_MAX_QUEUED_PER_USER`` tasks waiting for a phone."""
    device = access_device(request.user, payload.device)
    if (payload.backend == "oracle" or payload.suite or payload.suite_task) and \
            not is_operator(request.user):
        raise Forbidden("only operators may run suite tasks or the oracle backend")
    suite, suite_task = validation.check_suite(payload.suite, payload.suite_task)
    threshold = validation.check_requested_threshold(request.user, payload.threshold, device)
    validation.check_queue_room(request.user)
    task = lifecycle.create_task(
        request.user, device, payload.instruction, threshold=threshold,
        backend=payload.backend, suite=suite, suite_task=suite_task,
    )
    return 201, task_detail(task)


@api.get("/tasks", response={200: list[TaskSummaryOut], **errors()}, tags=["tasks"],
         openapi_extra=links(200, "$response.body#/0/id", "task_id", *TASK_OPERATIONS))
def list_tasks(request: HttpRequest, status: Query[TaskStatusName | None] = None):
    """Your tasks (all tasks for operators), newest first, at most 200."""
    tasks = access.visible_tasks(request.user)
    if status:
        tasks = tasks.filter(status=status)
    return [events.task_summary(t) for t in tasks[:200]]


@api.get("/tasks/{task_id}", response={200: TaskOut, **errors(404)}, tags=["tasks"])
def get_task(request: HttpRequest, task_id: str):
    return task_detail(access.access_task(request.user, task_id))


@api.post("/tasks/{task_id}/abort", response={200: TaskOut, **errors(403, 404, 409)},
          tags=["tasks"])
def abort_task(request: HttpRequest, task_id: str):
    """Stop the task; 409 when it has already ended."""
    task = access.access_task(request.user, task_id)
    return task_detail(lifecycle.abort_task(task, request.user))


@api.post("/tasks/{task_id}/messages", response={201: MessageOut, **errors(403, 404, 409)},
          tags=["tasks"])
def post_message(request: HttpRequest, task_id: str, payload: MessageIn):
    """Write in the task's chat; from its owner this answers an open question."""
    task = access.access_task(request.user, task_id)
    return 201, events.message_json(chat.post_message(task, request.user, payload.text))


@api.post("/tasks/{task_id}/verdict", response={200: TaskOut, **errors(403, 404, 409)},
          tags=["tasks"])
def post_verdict(request: HttpRequest, task_id: str, payload: VerdictIn):
    """The owner's answer to "Did Kairos do what you asked?" once the task has finished:
    once per task (409 the second time, or before it finished); owner only."""
    task = access.access_task(request.user, task_id)
    return task_detail(verdicts.record_verdict(task, request.user, payload.right,
                                               payload.note))


@api.post("/tasks/{task_id}/input", response={200: StepOut, **errors(403, 404, 409, 503)},
          tags=["tasks"])
def operator_input(request: HttpRequest, task_id: str, payload: InputIn):
    """One input on the phone by the operator holding the task's take-over."""
    task = access.access_task(request.user, task_id)
    return step_json(takeover.operator_input(task, request.user, payload.action))


@api.post("/tasks/{task_id}/hand_back", response={200: TaskOut, **errors(403, 404, 409)},
          tags=["tasks"])
def hand_back(request: HttpRequest, task_id: str):
    """End your take-over: the agent goes on from the phone's current screen. An admin
    may hand back anyone's take-over (recorded in the audit trail)."""
    task = access.access_task(request.user, task_id)
    try:
        takeover.check_takeover_holder(task, request.user)
    except Forbidden:
        if is_admin(request.user):
            from frontend.services import admin_hand_back

            return task_detail(admin_hand_back(request.user, task))
        raise
    return task_detail(takeover.hand_back(task, request.user))


@api.get("/tickets", response={200: list[TicketOut], **errors(403)}, tags=["tickets"],
         openapi_extra=links(200, "$response.body#/0/id", "ticket_id", *TICKET_OPERATIONS))
def list_tickets(request: HttpRequest, status: Query[TicketStatusName | None] = None):
    """Operators: tickets, oldest first; ``status=open`` includes claimed ones."""
    if not is_operator(request.user):
        raise Forbidden("only operators handle tickets")
    tickets = Ticket.objects.select_related("task", "task__device", "step", "assignee")
    if status == TicketStatus.OPEN:  # still waiting for a person, claimed or not
        tickets = tickets.filter(status__in=(TicketStatus.OPEN, TicketStatus.CLAIMED))
    elif status:
        tickets = tickets.filter(status=status)
    return [events.ticket_json(t) for t in tickets.order_by("created_at")[:500]]


@api.get("/tickets/{ticket_id}", response={200: TicketOut, **errors(403, 404)},
         tags=["tickets"])
def get_ticket(request: HttpRequest, ticket_id: str):
    return events.ticket_json(access.access_ticket(request.user, ticket_id))


@api.post("/tickets/{ticket_id}/claim", response={200: TicketOut, **errors(403, 404, 409)},
          tags=["tickets"])
def claim_ticket(request: HttpRequest, ticket_id: str):
    """Take the ticket; 409 when someone else holds it or it is closed."""
    ticket = access.access_ticket(request.user, ticket_id)
    return events.ticket_json(tickets.claim_ticket(ticket, request.user))


@api.post("/tickets/{ticket_id}/release", response={200: TicketOut, **errors(403, 404, 409)},
          tags=["tickets"])
def release_ticket(request: HttpRequest, ticket_id: str):
    """Give back a ticket you hold; 409 when you do not hold it."""
    ticket = access.access_ticket(request.user, ticket_id)
    return events.ticket_json(tickets.release_ticket(ticket, request.user))


@api.post("/tickets/{ticket_id}/ask", response={201: MessageOut, **errors(403, 404, 409)},
          tags=["tickets"])
def ask_user(request: HttpRequest, ticket_id: str, payload: AskIn):
    """Ask the task's owner a question from this ticket, with quick replies: their reply
    answers the ticket and the agent goes on with it (issue 26)."""
    ticket = access.access_ticket(request.user, ticket_id)
    message = chat.ask_user(ticket, request.user, payload.question, payload.options)
    return 201, events.message_json(message)


@api.post("/tickets/{ticket_id}/resolve", response={200: TicketOut, **errors(403, 404, 409)},
          tags=["tickets"])
def resolve_ticket(request: HttpRequest, ticket_id: str, payload: ResolveIn):
    """Approve, edit, take over, answer or abort; 409 when no longer open, 400 on an
    invalid action."""
    ticket = access.access_ticket(request.user, ticket_id)
    ticket = tickets.resolve_ticket(ticket, request.user, payload.decision,
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
