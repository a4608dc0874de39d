"""The review pages. Access: admins only, except the replay (admins and operators)."""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils import timezone

from access.errors import NotFound, ServiceError
from agents.runtime.models import (
    Decision, InstallationSettings, TaskStatus, TicketKind, TicketReason,
)
from agents.runtime.services import access, validation, verdicts
from devices.models import Device
from frontend.review.log import PENDING, SORT_LABELS, LogFilter, facet_counts, log_page
from frontend.review.replay import build_replay
from frontend.views import admin_required, operator_required


def _filter_choices() -> dict[str, list[tuple[str, str]]]:
    from django.contrib.auth import get_user_model
    from django.db.models import Q

    from agents.brain.backends import backend_names

    people = get_user_model().objects.filter(
        Q(is_superuser=True) | Q(groups__name__in=("operators", "admins"))).distinct()
    return {
        "kind": [(c.value, c.label) for c in TicketKind],
        "reason": [(c.value, c.label) for c in TicketReason],
        "decision": [(c.value, c.label) for c in Decision] + [(PENDING, "Not decided yet")],
        "status": [(c.value, c.label) for c in TaskStatus],
        "verdict": [("right", "Owner said yes"), ("wrong", "Owner said no"),
                    ("none", "Not answered")],
        "device": [(n, n) for n in Device.objects.order_by("name").values_list("name",
                                                                                flat=True)],
        "backend": [(n, n) for n in sorted(backend_names())],
        "operator": [(u, u) for u in people.order_by("username").values_list("username",
                                                                              flat=True)],
    }


@admin_required
def log(request: HttpRequest) -> HttpResponse:
    f = LogFilter.from_query(request.GET)
    page = log_page(f)
    params = f.as_params()
    return render(request, "frontend/review/log.html", {
        "page": page, "said_no": verdicts.said_no_episodes(), "f": f, "choices": _filter_choices(), "sorts": SORT_LABELS,
        "query": urlencode(params),
        "prev_query": urlencode(f.as_params(page=page.page - 1)) if page.page > 1 else None,
        "next_query": urlencode(f.as_params(page=page.page + 1))
        if page.page < page.pages else None,
        "active": bool(params),
    }, status=400 if f.errors else 200)


@admin_required
def facets(request: HttpRequest) -> JsonResponse:
    """Counts per facet under the log's filter (each facet without its own condition)."""
    f = LogFilter.from_query(request.GET)
    if f.errors:
        return JsonResponse({"detail": "; ".join(f.errors)}, status=400)
    return JsonResponse({"facets": facet_counts(f)})


@operator_required
def replay(request: HttpRequest, task_id: Any) -> HttpResponse:
    try:
        task = access.access_task(request.user, task_id)
    except ServiceError:
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


@admin_required
def metrics(request: HttpRequest) -> HttpResponse:
    from frontend.review.metrics import GROUPINGS, metrics_page

    from agents.runtime.learning import drifted_apps
    from frontend.review.metrics import measured_precision

    page = metrics_page(request.GET)
    return render(request, "frontend/review/metrics.html", {
        "page": page, "groupings": GROUPINGS,
        "measured": measured_precision(page.since, page.until, page.by),
        "drifted": drifted_apps(),
    }, status=400 if page.errors else 200)


@admin_required
def calibration(request: HttpRequest) -> HttpResponse:
    """GET: reliability and γ per backend. POST: an admin sets the default or a phone's γ."""
    from frontend import services as admin_services
    from frontend.review.calibration import DEFAULT_TARGET

    errors: list[str] = []
    status = 200
    if request.method == "POST":
        try:
            scope = request.POST.get("scope", "")
            if scope == "default":
                gamma = admin_services.set_default_threshold(request.user,
                                                             request.POST.get("gamma"))
                messages.success(request, "Default γ for new tasks: " + (
                    f"{gamma:g}" if gamma is not None else
                    f"back to KAIROS_DEFAULT_THRESHOLD ({settings.KAIROS_DEFAULT_THRESHOLD:g})"))
            elif scope == "device":
                device = Device.objects.filter(name=request.POST.get("device", "")).first()
                if device is None:
                    raise NotFound(
                        f"no phone named '{request.POST.get('device', '')[:64]}'")
                gamma = admin_services.set_device_threshold(request.user, device,
                                                            request.POST.get("gamma"))
                messages.success(request, f"γ for new tasks on {device.name}: " + (
                    f"{gamma:g}" if gamma is not None else "the installation default"))
            elif scope == "spot_check":
                device = Device.objects.filter(name=request.POST.get("device", "")).first()
                if device is None:
                    raise NotFound(
                        f"no phone named '{request.POST.get('device', '')[:64]}'")
                share = admin_services.set_device_spot_check(request.user, device,
                                                             request.POST.get("share"))
                messages.success(request, f"Spot checks on {device.name}: " + (
                    f"{share:g} of the steps that would act alone" if share is not None else
                    f"back to KAIROS_SPOT_CHECK ({settings.KAIROS_SPOT_CHECK:g})"))
            else:
                raise ServiceError("scope must be 'default', 'device' or 'spot_check'")
            return redirect("review_calibration")
        except ServiceError as exc:
            errors.append(exc.detail)
            status = exc.status
    raw_target = request.GET.get("target", "")
    target = DEFAULT_TARGET
    if raw_target:
        try:
            target = float(raw_target)
            if not 0 < target < 1:
                raise ValueError
        except ValueError:
            errors.append(f"target: '{raw_target[:20]}' is not an autonomy precision between "
                          "0 and 1")
            target, status = DEFAULT_TARGET, 400
    return _calibration_response(request, target, errors, status)


def _calibration_response(request: HttpRequest, target: float, errors: list[str],
                          status: int) -> HttpResponse:
    from frontend.review.calibration import calibration_page, calibrator_versions

    page = calibration_page(target)
    page.errors = errors
    return render(request, "frontend/review/calibration.html", {
        "page": page, "devices": Device.objects.order_by("name"),
        "default_gamma": validation.default_threshold(),
        "stored_default": InstallationSettings.objects.filter(pk=1).values_list(
            "default_threshold", flat=True).first(),
        "env_default": settings.KAIROS_DEFAULT_THRESHOLD,
        "versions": calibrator_versions(), "refit_every": settings.KAIROS_REFIT_EVERY,
        "env_spot_check": settings.KAIROS_SPOT_CHECK,
    }, status=status)


@admin_required
def rollback_calibrator(request: HttpRequest, version_id: int) -> HttpResponse:
    """POST: make a kept calibrator version the one the gate reads (audited)."""
    from agents.runtime import learning
    from agents.runtime.models import CalibratorVersion
    from frontend.review.calibration import DEFAULT_TARGET

    if request.method != "POST":
        return JsonResponse({"detail": "POST a rollback from /review/calibration/"},
                            status=405)
    version = CalibratorVersion.objects.filter(pk=version_id).first()
    if version is None:
        return _calibration_response(
            request, DEFAULT_TARGET, [f"there is no calibrator version {version_id}"], 404)
    try:
        learning.rollback(request.user, version)
    except learning.RollbackError as exc:
        return _calibration_response(request, DEFAULT_TARGET, [exc.detail], exc.status)
    messages.success(request, f"The {version.backend} calibrator is now version "
                              f"{version.number}.")
    return redirect("review_calibration")


@admin_required
def export(request: HttpRequest) -> HttpResponse:
    """The log's current filter as a training-data zip, streamed while it is written."""
    from agents.runtime.training.export import FORMATS, ExportFilter, stream_zip

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



AUDIT_PAGE_SIZE = 50


@admin_required
def audit(request: HttpRequest) -> HttpResponse:
    from access.audit import AuditEntry

    raw = request.GET.get("page", "1")
    error = ""
    try:
        number = int(raw)
        if number < 1:
            raise ValueError
    except ValueError:
        number, error = 1, f"page: '{raw[:20]}' is not a page number (1, 2, …)"
    entries = AuditEntry.objects.select_related("actor").order_by("-created_at", "-id")
    total = entries.count()
    pages = max(1, -(-total // AUDIT_PAGE_SIZE))
    number = min(number, pages)
    rows = entries[(number - 1) * AUDIT_PAGE_SIZE: number * AUDIT_PAGE_SIZE]
    return render(request, "frontend/review/audit.html", {
        "entries": rows, "total": total, "page": number, "pages": pages, "error": error},
        status=400 if error else 200)
