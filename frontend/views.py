"""Server-rendered pages for the three surfaces: operators, end users, admins."""
from __future__ import annotations

from functools import wraps
from typing import Any, Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from agents import services
from agents.models import Ticket, TicketStatus
from devices.actions import Action, validate_action
from devices.models import Device
from frontend.api import healthz_status


def operator_required(view: Callable) -> Callable:
    @wraps(view)
    @login_required
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not services.is_operator(request.user):
            return render(request, "frontend/forbidden.html", status=403)
        return view(request, *args, **kwargs)
    return wrapper


def admin_required(view: Callable) -> Callable:
    @wraps(view)
    @login_required
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not services.is_admin(request.user):
            return render(request, "frontend/forbidden.html", status=403)
        return view(request, *args, **kwargs)
    return wrapper


def healthz(request: HttpRequest) -> JsonResponse:
    status, ok = healthz_status()
    return JsonResponse(status, status=200 if ok else 503)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    if services.is_operator(request.user):
        return redirect("console")
    return redirect("task_list")


def _usable_devices(user: Any):
    """The phones ``user`` may start tasks on (the same rule as services.access_device)."""
    from django.db.models import Q

    devices = Device.objects.filter(enabled=True).order_by("name")
    if services.is_operator(user):
        return devices
    return devices.filter(Q(users=None) | Q(users=user)).distinct()


@login_required
def task_list(request: HttpRequest) -> HttpResponse:
    devices = _usable_devices(request.user)
    if request.method == "POST":
        try:
            device = services.access_device(request.user, request.POST.get("device", ""))
            task = services.create_task(request.user, device, request.POST.get("instruction"),
                                        threshold=request.POST.get("threshold") or None)
        except services.ServiceError as exc:
            messages.error(request, exc.detail)
            return render(request, "frontend/task_list.html", {
                "tasks": services.visible_tasks(request.user).filter(owner=request.user)[:50],
                "devices": devices, "form": request.POST,
                "default_threshold": services.default_threshold()}, status=exc.status)
        return redirect("task_detail", task_id=task.id)
    tasks = services.visible_tasks(request.user).filter(owner=request.user)[:50]
    return render(request, "frontend/task_list.html", {"tasks": tasks, "devices": devices,
                                                       "form": {}, "default_threshold":
                                                       services.default_threshold()})


@login_required
def task_detail(request: HttpRequest, task_id: Any) -> HttpResponse:
    try:
        task = services.access_task(request.user, task_id)
    except services.ServiceError:
        return render(request, "frontend/not_found.html", status=404)
    if request.method == "POST":
        try:
            if request.POST.get("abort"):
                services.abort_task(task, request.user)
            else:
                services.post_message(task, request.user, request.POST.get("text"),
                                      ticket_id=request.POST.get("ticket") or None)
        except services.ServiceError as exc:
            messages.error(request, exc.detail)
        return redirect("task_detail", task_id=task.id)
    return render(request, "frontend/task_detail.html", {
        "task": task, "steps": task.steps.order_by("index"),
        "chat": task.messages.select_related("author"),
        "is_operator": services.is_operator(request.user),
        "open_question": task.tickets.filter(kind="clarification", status__in=(
            TicketStatus.OPEN, TicketStatus.CLAIMED)).first(),
    })


@operator_required
def console(request: HttpRequest) -> HttpResponse:
    tickets = Ticket.objects.select_related("task", "task__device", "step", "assignee").filter(
        status__in=(TicketStatus.OPEN, TicketStatus.CLAIMED)).order_by("created_at")
    return render(request, "frontend/console.html", {"tickets": tickets,
                                                     "devices": Device.objects.all()})


@operator_required
def ticket_detail(request: HttpRequest, ticket_id: Any) -> HttpResponse:
    try:
        ticket = services.access_ticket(request.user, ticket_id)
    except services.ServiceError:
        return render(request, "frontend/not_found.html", status=404)
    step = ticket.step
    proposed = validate_action(step.proposed_action) if step and step.proposed_action else None
    return render(request, "frontend/ticket_detail.html", {
        "ticket": ticket, "task": ticket.task, "step": step,
        "proposal_text": proposed.describe() if isinstance(proposed, Action) else "none",
        "history": ticket.task.steps.filter(status="done").order_by("index"),
        "chat": ticket.task.messages.select_related("author"),
        "candidates": _candidates(step),
    })


def _candidates(step: Any) -> list[dict[str, Any]]:
    if step is None:
        return []
    from devices.uitree import nodes_from_json

    keys = set(step.candidates or [])
    nodes = nodes_from_json(step.ui_nodes or [])
    chosen = [n for n in nodes if n.key in keys] or [
        n for n in nodes if (n.clickable or n.checkable) and n.label]
    return [{"key": n.key, "label": n.label, "cls": n.short_class, "x": n.center[0],
             "y": n.center[1], "left": n.bounds[0], "top": n.bounds[1],
             "width": n.bounds[2] - n.bounds[0], "height": n.bounds[3] - n.bounds[1]}
            for n in chosen[:30]]


@require_POST
@operator_required
def ticket_action(request: HttpRequest, ticket_id: Any) -> HttpResponse:
    try:
        ticket = services.access_ticket(request.user, ticket_id)
        decision = request.POST.get("decision", "")
        if decision == "claim":
            services.claim_ticket(ticket, request.user)
            return redirect("ticket_detail", ticket_id=ticket.id)
        if decision == "release":
            services.release_ticket(ticket, request.user)
            return redirect("console")
        action = None
        if decision == "edit":
            action = {"type": request.POST.get("type", "CLICK")}
            for field in ("x", "y", "text", "direction", "app"):
                if request.POST.get(field):
                    action[field] = request.POST[field]
        services.resolve_ticket(ticket, request.user, decision, action=action,
                                answer=request.POST.get("answer"))
        messages.success(request, f"Ticket resolved: {decision}.")
    except services.ServiceError as exc:
        messages.error(request, exc.detail)
        return redirect("ticket_detail", ticket_id=ticket_id)
    return redirect("console")
