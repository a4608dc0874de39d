"""Server-rendered pages for the three surfaces: operators, end users, admins."""
from __future__ import annotations

import json
import logging
from functools import wraps
from typing import Any, Callable

from django.conf import settings
from django.db.models import Q
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from access.devices import access_device, usable_devices
from access.errors import ServiceError
from access.roles import is_admin, is_operator
from agents.runtime import events, presence
from agents.runtime.models import (ACTIVE_TASK_STATUSES, Step, Task, TaskStatus, Ticket, TicketKind,
                           TicketStatus)
from agents.runtime.services import (
    access, chat as chat_service, lifecycle, tickets, validation, verdicts,
)
from devices.actions import Action, text_problem, validate_action
from devices.models import Device
from frontend.api import healthz_status

logger = logging.getLogger(__name__)


def operator_required(view: Callable) -> Callable:
    @wraps(view)
    @login_required
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_operator(request.user):
            return render(request, "frontend/forbidden.html", status=403)
        return view(request, *args, **kwargs)
    return wrapper


def admin_required(view: Callable) -> Callable:
    @wraps(view)
    @login_required
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_admin(request.user):
            return render(request, "frontend/forbidden.html", status=403)
        return view(request, *args, **kwargs)
    return wrapper


def healthz(request: HttpRequest) -> JsonResponse:
    """Each component's "ok" or "error". Why one failed (its message names database roles
    and service addresses) is logged, and shown to staff only (issue 23.7)."""
    status, ok = healthz_status()
    if not ok:
        logger.warning("healthz: %s", "; ".join(
            f"{name} {value}" for name, value in status.items() if value != "ok"))
        if not (request.user.is_authenticated and request.user.is_staff):
            status = {name: value if value == "ok" else "error"
                      for name, value in status.items()}
    return JsonResponse(status, status=200 if ok else 503)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    if is_operator(request.user):
        return redirect("console")
    return redirect("task_list")


def _task_form(request: HttpRequest, devices: Any, form: Any, status: int = 200) -> HttpResponse:
    # Each phone's γ, so the form can say what "the phone's γ" is (issue 26.3).
    devices = list(devices)
    for device in devices:
        device.gamma = validation.default_threshold(device)
    return render(request, "frontend/task_list.html", {
        "tasks": access.visible_tasks(request.user).filter(owner=request.user)[:50],
        "devices": devices, "form": form,
        "may_lower": is_operator(request.user)}, status=status)


@login_required
def task_list(request: HttpRequest) -> HttpResponse:
    devices = usable_devices(request.user).filter(enabled=True)
    if request.method == "POST":
        try:
            device = access_device(request.user, request.POST.get("device", ""))
            # Empty means the phone's γ: the form sends a number only when it was changed.
            threshold = validation.check_requested_threshold(
                request.user, request.POST.get("threshold", "").strip() or None, device)
            validation.check_queue_room(request.user)
            task = lifecycle.create_task(request.user, device, request.POST.get("instruction"),
                                         threshold=threshold)
        except ServiceError as exc:
            messages.error(request, exc.detail)
            return _task_form(request, devices, request.POST, exc.status)
        return redirect("task_detail", task_id=task.id)
    return _task_form(request, devices, {})


@login_required
def task_detail(request: HttpRequest, task_id: Any) -> HttpResponse:
    try:
        task = access.access_task(request.user, task_id)
    except ServiceError:
        return render(request, "frontend/not_found.html", status=404)
    if request.method == "POST":
        try:
            if request.POST.get("abort"):
                lifecycle.abort_task(task, request.user)
            elif "verdict" in request.POST:
                answer = request.POST.get("verdict")
                if answer not in ("yes", "no"):
                    raise ServiceError("answer yes or no")
                verdicts.record_verdict(task, request.user, answer == "yes",
                                        request.POST.get("note", ""))
            else:
                chat_service.post_message(task, request.user, request.POST.get("text"),
                                          ticket_id=request.POST.get("ticket") or None)
        except ServiceError as exc:
            messages.error(request, exc.detail)
        return redirect("task_detail", task_id=task.id)
    # Each message is read with its ticket in one query: whether a question still takes
    # quick replies is as of the same moment as the question itself. (The open tickets,
    # read apart before the chat, could miss a question the worker asked in between: it
    # showed with no replies for good, the socket joining after it was sent; issue 23.8.)
    chat = list(task.messages.select_related("author", "ticket"))
    # The rest of the page is read after the chat, so it is never older than a question
    # it shows; what happens after is the socket's and the page's catch-up read's.
    task.refresh_from_db()
    steps = list(task.steps.order_by("index"))
    shots = [s for s in steps if s.screenshot]
    open_question = next((m.ticket for m in reversed(chat) if m.ticket is not None
                          and m.ticket.kind == TicketKind.CLARIFICATION and m.ticket.is_open),
                         None)
    return render(request, "frontend/task_detail.html", {
        "task": task, "steps": steps, "now_text": now_text(task, request.user),
        "final_shot": shots[-1] if task.is_finished and shots else None,
        "chat": chat,
        "is_operator": is_operator(request.user),
        "is_owner": task.owner_id == request.user.pk,
        "open_question": open_question,
    })


def now_text(task: Any, viewer: Any) -> str:
    """What the task page says is happening, in the viewer's words (task.js mirrors it)."""
    if task.status == "succeeded":
        return "Finished."
    if task.status == "aborted":
        who, why = "", ""
        if task.error.startswith("aborted by "):
            who, _, why = task.error.removeprefix("aborted by ").partition(": ")
        why = f" Reason: {why}" if why else ""
        if who and who == viewer.get_username():
            return f"You stopped this task.{why}"
        return f"An operator ({who}) stopped this task.{why}" if who else \
            f"Stopped: {task.error or 'no reason given'}."
    if task.status == "failed":
        return f"Could not finish: {task.error}." if task.error else "Could not finish."
    position = task.queue_position if task.status == "queued" else None
    if position:
        # One task drives a phone at a time: this one waits for the tasks ahead of it.
        return f"Queued, position {position} — waiting for the phone."
    return {"queued": "Waiting to start…", "waiting_user": "Waiting for your answer in the chat.",
            "waiting_operator": "An operator is checking the next step.",
            "taken_over": "An operator is using the phone for you."}.get(task.status, "Working…")


@operator_required
def console(request: HttpRequest) -> HttpResponse:
    tickets = Ticket.objects.select_related("task", "task__device", "step", "assignee").filter(
        status__in=(TicketStatus.OPEN, TicketStatus.CLAIMED)).exclude(
        kind="clarification", escalated=False).order_by("created_at")
    devices = list(Device.objects.order_by("name"))
    active = {}
    for task in Task.objects.filter(status__in=ACTIVE_TASK_STATUSES).order_by("created_at"):
        active.setdefault(task.device_id, task)  # the oldest active task drives the phone
    for device in devices:
        device.active_task = active.get(device.id)
    # Who holds each phone right now (a take-over), for the console's "In control" list.
    taken = []
    for task in Task.objects.filter(status=TaskStatus.TAKEN_OVER).select_related("device"):
        holder = task.tickets.filter(decision="takeover").order_by("-resolved_at").select_related(
            "resolved_by").first()
        taken.append({"task": task, "ticket": holder,
                      "by": holder.resolved_by.get_username() if holder and holder.resolved_by else ""})
    # The queue's priority, as console.js keeps it: sensitive actions first, then oldest.
    tickets = sorted(tickets, key=lambda t: (t.reason != "sensitive_action", t.created_at))
    return render(request, "frontend/console.html", {
        "tickets": tickets, "devices": devices, "sla": int(settings.KAIROS_TICKET_SLA),
        # The same tickets for console.js: the list it starts from (issue 23.8).
        "queue": json.dumps([events.ticket_json(t) for t in tickets]),
        "taken": taken, "is_admin": is_admin(request.user),
        "online": presence.online()})


@operator_required
def ticket_detail(request: HttpRequest, ticket_id: Any) -> HttpResponse:
    try:
        ticket = access.access_ticket(request.user, ticket_id)
    except ServiceError:
        return render(request, "frontend/not_found.html", status=404)
    step = ticket.step
    proposed = validate_action(step.proposed_action) if step and step.proposed_action else None
    return render(request, "frontend/ticket_detail.html", {
        "ticket": ticket, "task": ticket.task, "step": step,
        "proposal_text": proposed.describe() if isinstance(proposed, Action) else "none",
        "history": ticket.task.steps.filter(status="done").order_by("index"),
        "chat": ticket.task.messages.select_related("author").order_by("created_at", "id"),
        "candidates": _candidates(step),
        "is_admin": is_admin(request.user),
        "operators": _operators() if is_admin(request.user) else [],
        "claim_timeout": int(settings.KAIROS_CLAIM_TIMEOUT),
        "sla": int(settings.KAIROS_TICKET_SLA),
    })


def _operators() -> list[str]:
    from django.contrib.auth import get_user_model

    users = get_user_model().objects.filter(is_active=True).filter(
        Q(is_superuser=True) | Q(groups__name__in=("operators", "admins"))).distinct()
    return sorted(u.get_username() for u in users)


def _candidates(step: Any) -> list[dict[str, Any]]:
    if step is None:
        return []
    from devices.uitree import nodes_from_json

    keys = set(step.candidates or [])
    nodes = nodes_from_json(step.ui_nodes or [])
    # The agent's own candidates first, then every other element a person could tap: the
    # right one is often not among the agent's (issue 26, item 8).
    chosen = [n for n in nodes if n.key in keys] + [
        n for n in nodes if n.key not in keys and (n.clickable or n.checkable) and n.label]
    return [{"key": n.key, "label": n.label, "cls": n.short_class, "x": n.center[0],
             "y": n.center[1], "left": n.bounds[0], "top": n.bounds[1],
             "width": n.bounds[2] - n.bounds[0], "height": n.bounds[3] - n.bounds[1]}
            for n in chosen[:60]]


@require_POST
@operator_required
def ticket_action(request: HttpRequest, ticket_id: Any) -> HttpResponse:
    try:
        ticket = access.access_ticket(request.user, ticket_id)
        decision = request.POST.get("decision", "")
        if decision == "claim":
            tickets.claim_ticket(ticket, request.user)
            return redirect("ticket_detail", ticket_id=ticket.id)
        if decision == "release":
            tickets.release_ticket(ticket, request.user)
            return redirect("console")
        if decision == "reassign":
            from django.contrib.auth import get_user_model

            to_user = get_user_model().objects.filter(
                username=request.POST.get("assignee", "")).first()
            tickets.reassign_ticket(ticket, request.user, to_user)
            messages.success(request, f"Ticket given to {to_user}.")
            return redirect("ticket_detail", ticket_id=ticket.id)
        action = None
        if decision == "edit":
            action = {"type": request.POST.get("type", "CLICK")}
            for field in ("x", "y", "text", "direction", "app"):
                if request.POST.get(field):
                    action[field] = request.POST[field]
        tickets.resolve_ticket(ticket, request.user, decision, action=action,
                               answer=request.POST.get("answer"))
        messages.success(request, f"Ticket resolved: {decision}.")
    except ServiceError as exc:
        messages.error(request, exc.detail)
        return redirect("ticket_detail", ticket_id=ticket_id)
    return redirect("console")


MAX_MEDIA_PATH = 255


def media_file(request: HttpRequest, path: str) -> HttpResponse:
    """A file under MEDIA_ROOT, by the rules of what it belongs to.

    A step's screenshot follows its task (the owner and operators; others get a 404, as
    for the task itself); any other file is for admins only. A session or the API's
    Bearer token. In the full stack a web server may sit in front, but must ask this view
    (e.g. nginx ``auth_request``) rather than serve the directory.
    """
    from django.views.static import serve

    from frontend.api import bearer_user

    user = request.user if request.user.is_authenticated else bearer_user(request)
    if user is None:
        return JsonResponse({"detail": "authentication required"}, status=401)
    if len(path) > MAX_MEDIA_PATH or text_problem(path) or ".." in path.split("/"):
        raise Http404("no such file")
    step = Step.objects.filter(screenshot=path).select_related("task").first()
    if step is not None:
        try:
            access.access_task(user, step.task_id)
        except ServiceError:
            raise Http404("no such file") from None
    elif not is_admin(user):
        raise Http404("no such file")
    response = serve(request, path, document_root=settings.MEDIA_ROOT)
    response["Cache-Control"] = "private, max-age=3600"
    return response
