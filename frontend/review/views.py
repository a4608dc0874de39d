"""The review pages. Access: admins only, except the replay (admins and operators)."""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone

from agents import services
from agents.models import Decision, TaskStatus, TicketKind, TicketReason
from frontend.review.log import PENDING, SORT_LABELS, LogFilter, log_page
from frontend.review.replay import build_replay
from frontend.views import admin_required, operator_required


@admin_required
def log(request: HttpRequest) -> HttpResponse:
    f = LogFilter.from_query(request.GET)
    page = log_page(f)
    params = f.as_params()
    choices = {
        "kind": [(c.value, c.label) for c in TicketKind],
        "reason": [(c.value, c.label) for c in TicketReason],
        "decision": [(c.value, c.label) for c in Decision] + [(PENDING, "Not decided yet")],
        "status": [(c.value, c.label) for c in TaskStatus],
    }
    return render(request, "frontend/review/log.html", {
        "page": page, "f": f, "choices": choices, "sorts": SORT_LABELS,
        "facets": page.facets,
        "query": urlencode(params),
        "prev_query": urlencode(f.as_params(page=page.page - 1)) if page.page > 1 else None,
        "next_query": urlencode(f.as_params(page=page.page + 1))
        if page.page < page.pages else None,
        "active": bool(params),
    }, status=400 if f.errors else 200)


@operator_required
def replay(request: HttpRequest, task_id: Any) -> HttpResponse:
    try:
        task = services.access_task(request.user, task_id)
    except services.ServiceError:
        return render(request, "frontend/not_found.html", status=404)
    raw = request.GET.get("step", "")
    try:
        step = int(raw) if raw else None
    except ValueError:
        step = None
    data = build_replay(task, step)
    if raw and (step is None or not data.has(step)):
        numbers = [s.number for s in data.steps]
        span = f"{numbers[0]} to {numbers[-1]}" if numbers else "none: the task has no steps"
        return render(request, "frontend/review/replay.html", {
            "replay": data, "task": task,
            "error": f"there is no step '{raw[:20]}' in this episode (steps {span})",
        }, status=400)
    return render(request, "frontend/review/replay.html", {"replay": data, "task": task})


# Filled in by the following commits; listed here so the URL table is complete.
@admin_required
def metrics(request: HttpRequest) -> HttpResponse:
    return render(request, "frontend/not_found.html", status=404)


@admin_required
def calibration(request: HttpRequest) -> HttpResponse:
    return render(request, "frontend/not_found.html", status=404)


@admin_required
def export(request: HttpRequest) -> HttpResponse:
    """The log's current filter as a training-data zip, streamed while it is written."""
    from agents.training.export import FORMATS, ExportFilter, stream_zip

    f = LogFilter.from_query(request.GET)
    fmt = request.GET.get("format", "llamafactory")
    problems = list(f.errors)
    if fmt not in FORMATS:
        problems.append(f"format: '{fmt[:40]}' is not one of {', '.join(FORMATS)}")
    episodes = request.GET.get("episodes", "") in ("1", "true", "on")
    if problems:
        return JsonResponse({"detail": "; ".join(problems)}, status=400)
    stamp = timezone.now().strftime("%Y%m%d-%H%M")
    name = f"kairos-{'episodes' if episodes else 'handoffs'}-{fmt}-{stamp}.zip"
    response = StreamingHttpResponse(
        stream_zip(fmt, ExportFilter(tickets=f.conditions()), episodes=episodes),
        content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@admin_required
def audit(request: HttpRequest) -> HttpResponse:
    return render(request, "frontend/not_found.html", status=404)
