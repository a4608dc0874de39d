"""Admins see what the installation learned per app, forget an app, export and import it
(issue 25 item 1). Every change — and every export — is on the audit trail."""
from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from agents.runtime.experience_store import (
    FORMAT, app_decisions, app_summaries, export_app, forget_app, import_experience,
)
from agents.runtime.models import ExperienceEntry, ExperienceOutcome
from access.audit import record_audit
from frontend.views import admin_required

MAX_UPLOAD = 64 * 1024 * 1024


def _bad(detail: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"detail": detail}, status=status)


def _app_param(value: object) -> str | None:
    """A package name: 1–128 printable characters (a NUL byte cannot reach the database)."""
    if not isinstance(value, str) or not value.strip() or len(value) > 128 or any(
            ord(c) < 32 for c in value):
        return None
    return value.strip()


@admin_required
@require_GET
def page(request: HttpRequest) -> HttpResponse:
    apps = app_summaries()
    chosen = _app_param(request.GET.get("app", ""))
    status, error = 200, ""
    if request.GET.get("app") is not None and chosen is None:
        status, error = 400, "app: give a package name"
    decisions = app_decisions(chosen) if chosen else []
    if chosen and not decisions:
        status, error = 404, f"nothing learned about '{chosen[:60]}'"
    return render(request, "frontend/review/experience.html", {
        "apps": apps, "chosen": chosen, "decisions": decisions, "error": error,
        "outcomes": list(ExperienceOutcome.objects.order_by("kind")),
    }, status=status)


@admin_required
@require_POST
def forget(request: HttpRequest) -> HttpResponse:
    app = _app_param(request.POST.get("app"))
    if app is None:
        return _bad("app: give the package name of the app to forget")
    if not ExperienceEntry.objects.filter(app=app).exists():
        return _bad(f"nothing learned about '{app[:60]}'", 404)
    removed = forget_app(app)
    record_audit(request.user, "experience.forget", f"app {app}", {"entries": (removed, 0)})
    messages.success(request, f"Forgot {removed} remembered step{'s' if removed != 1 else ''} "
                              f"of {app}.")
    return redirect("review_experience")


@admin_required
@require_GET
def export(request: HttpRequest) -> HttpResponse:
    app = _app_param(request.GET.get("app"))
    if app is None:
        return _bad("app: give the package name of the app to export")
    data = export_app(app)
    if not data["entries"]:
        return _bad(f"nothing learned about '{app[:60]}'", 404)
    record_audit(request.user, "experience.export", f"app {app}")
    response = JsonResponse(data)
    stamp = timezone.now().strftime("%Y%m%d-%H%M")
    response["Content-Disposition"] = f'attachment; filename="kairos-experience-{app}-{stamp}.json"'
    return response


@admin_required
@require_POST
def import_(request: HttpRequest) -> HttpResponse:
    upload = request.FILES.get("file")
    if upload is None:
        return _bad(f"file: upload a {FORMAT} JSON export")
    if upload.size > MAX_UPLOAD:
        return _bad(f"file: at most {MAX_UPLOAD // (1024 * 1024)} MiB", 413)
    try:
        data = json.loads(upload.read().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _bad(f"file: not JSON ({str(exc)[:80]})")
    try:
        app, count = import_experience(data, user=request.user)
    except ValueError as exc:
        return _bad(f"file: {str(exc)[:300]}")
    record_audit(request.user, "experience.import", f"app {app}", {"entries": (0, count)})
    messages.success(request,
                     f"Imported {count} remembered step{'s' if count != 1 else ''} of {app}.")
    return redirect("review_experience")
