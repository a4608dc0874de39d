"""The Django admin for what admins manage: phones and who may use them, users and roles,
API tokens, γ, and read-only views of tasks, tickets, training records and the audit trail.

Every admin change to γ, devices, roles or tokens lands in the audit trail
(``frontend.services.record_audit``). Tasks and tickets are read-only here: their state
changes only through ``agents.runtime.services`` (STYLE.md), and old ones go with ``purge``.
"""
from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from agents.runtime.models import InstallationSettings, Task, Ticket, TrainingRecord
from devices.models import Device
from frontend import services
from access.audit import AuditEntry
from frontend.models import ApiToken


class AuditedAdmin(admin.ModelAdmin):
    """Records who changed which of ``audit_fields`` from what to what (m2m included)."""

    audit_fields: tuple[str, ...] = ()
    audit_kind = ""

    def _snapshot(self, obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.audit_fields:
            value = getattr(obj, name)
            if hasattr(value, "all"):  # a many-to-many manager
                value = sorted(str(v) for v in value.all())
            out[name] = value
        return out

    def _target(self, obj: Any) -> str:
        return f"{self.audit_kind} {obj}"

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        before = (self._snapshot(type(obj).objects.get(pk=obj.pk)) if change
                  else dict.fromkeys(self.audit_fields))
        request._kairos_audit_before = before  # read back in save_related, after the m2m
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        before = getattr(request, "_kairos_audit_before", {})
        after = self._snapshot(form.instance)
        services.record_audit(request.user,
                              f"{self.audit_kind}.{'change' if change else 'add'}",
                              self._target(form.instance),
                              {k: (before.get(k), after[k]) for k in self.audit_fields})

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        with transaction.atomic():
            services.record_audit(request.user, f"{self.audit_kind}.delete", self._target(obj))
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        with transaction.atomic():
            for obj in queryset:
                services.record_audit(request.user, f"{self.audit_kind}.delete",
                                      self._target(obj))
            super().delete_queryset(request, queryset)


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _replay_link(task_id: Any, step: int | None = None) -> str:
    url = reverse("review_replay", args=[task_id])
    return format_html('<a href="{}{}">replay</a>', url, f"?step={step + 1}" if step is not None
                       else "")


# --- devices ---------------------------------------------------------------------------

@admin.register(Device)
class DeviceAdmin(AuditedAdmin):
    audit_fields = ("name", "kind", "serial", "enabled", "threshold", "users")
    audit_kind = "device"
    list_display = ("name", "kind", "status", "enabled", "gamma", "who_may_use")
    list_filter = ("kind", "enabled", "status")
    search_fields = ("name", "serial")
    filter_horizontal = ("users",)
    fields = ("name", "kind", "serial", "enabled", "threshold", "users", "width", "height",
              "status", "apps")
    readonly_fields = ("status",)
    actions = ("enable", "disable")

    @admin.display(description="γ")
    def gamma(self, obj: Device) -> str:
        return "installation default" if obj.threshold is None else f"{obj.threshold:g}"

    @admin.display(description="who may use it")
    def who_may_use(self, obj: Device) -> str:
        names = [u.username for u in obj.users.all()]
        return ", ".join(names) if names else "everyone"

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).prefetch_related("users")

    @admin.action(description="Enable the selected phones (they take new tasks)")
    def enable(self, request: HttpRequest, queryset: Any) -> None:
        n = services.set_devices_enabled(request.user, queryset, True)
        self.message_user(request, f"{n} phone(s) enabled.", messages.SUCCESS)

    @admin.action(description="Disable the selected phones (no new tasks)")
    def disable(self, request: HttpRequest, queryset: Any) -> None:
        n = services.set_devices_enabled(request.user, queryset, False)
        self.message_user(request, f"{n} phone(s) disabled.", messages.SUCCESS)


# --- users and roles -------------------------------------------------------------------

class PhoneAccessInline(admin.TabularInline):
    model = Device.users.through
    extra = 1
    verbose_name = "phone this user may use"
    verbose_name_plural = ("Phones this user may use (a phone with nobody listed is open to "
                           "everyone)")


admin.site.unregister(User)


@admin.register(User)
class KairosUserAdmin(AuditedAdmin, UserAdmin):
    """Roles are the groups ``operators``, ``end_users`` and ``admins`` (seed_demo)."""

    audit_fields = ("username", "is_active", "is_staff", "is_superuser", "groups", "devices")
    audit_kind = "user"
    inlines = (PhoneAccessInline,)
    list_display = ("username", "email", "roles", "is_active", "is_staff", "last_login")
    list_filter = ("groups", "is_active", "is_staff", "is_superuser")

    @admin.display(description="roles")
    def roles(self, obj: User) -> str:
        return ", ".join(g.name for g in obj.groups.all()) or "–"

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).prefetch_related("groups")


admin.site.unregister(Group)


@admin.register(Group)
class RoleAdmin(AuditedAdmin):
    audit_fields = ("name", "permissions")
    audit_kind = "role"
    search_fields = ("name",)
    filter_horizontal = ("permissions",)


# --- γ ---------------------------------------------------------------------------------

class InstallationSettingsForm(forms.ModelForm):
    class Meta:
        model = InstallationSettings
        fields = ("default_threshold",)
        labels = {"default_threshold": "Default γ for new tasks (0–5; empty: the "
                                       "KAIROS_DEFAULT_THRESHOLD environment variable)"}

    def clean_default_threshold(self) -> float | None:
        try:
            return services.check_gamma(self.cleaned_data.get("default_threshold"))
        except services.ServiceError as exc:
            raise forms.ValidationError(exc.detail) from None


@admin.register(InstallationSettings)
class InstallationSettingsAdmin(admin.ModelAdmin):
    form = InstallationSettingsForm
    list_display = ("__str__", "default_threshold", "updated_by", "updated_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return not InstallationSettings.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        # The service writes the row and its audit entry; the admin then logs this object.
        services.set_default_threshold(request.user, form.cleaned_data["default_threshold"])
        obj.pk = 1
        obj.refresh_from_db()


# --- API tokens --------------------------------------------------------------------------

class IssueTokenForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ("user",)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Issue: "Add API token" and pick the user; the token is shown once. Revoke: delete."""

    list_display = ("prefix", "user", "created_at", "last_used_at")
    search_fields = ("user__username", "prefix")
    actions = ("revoke",)

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs: Any):
        if obj is None:
            kwargs["form"] = IssueTokenForm
        return super().get_form(request, obj, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None):
        return ("user", "prefix", "created_at", "last_used_at") if obj else ()

    def get_fields(self, request: HttpRequest, obj: Any = None):
        return ("user", "prefix", "created_at", "last_used_at") if obj else ("user",)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        row, token = services.issue_token(request.user, form.cleaned_data["user"])
        obj.pk, obj.token_hash, obj.prefix, obj.created_at = (
            row.pk, row.token_hash, row.prefix, row.created_at)
        self.message_user(request, format_html(
            "API token for {}: <code id=\"new-api-token\">{}</code> — copy it now, it is not "
            "shown again. Use it as <code>Authorization: Bearer …</code>.",
            row.user.username, token), messages.WARNING)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        services.revoke_tokens(request.user, ApiToken.objects.filter(pk=obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        services.revoke_tokens(request.user, queryset)

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        n = services.revoke_tokens(request.user, queryset)
        self.message_user(request, f"{n} token(s) revoked.", messages.SUCCESS)


# --- read-only views of the logged work ----------------------------------------------------

@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = ("instruction", "device", "owner", "status", "success", "backend",
                    "threshold", "interventions", "created_at", "replay")
    list_filter = ("status", "backend", "device")
    search_fields = ("instruction", "owner__username")
    date_hierarchy = "created_at"
    list_select_related = ("device", "owner")
    exclude = ("excluded_elements",)

    @admin.display(description="")
    def replay(self, obj: Task) -> str:
        return _replay_link(obj.id)


@admin.register(Ticket)
class TicketAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "kind", "reason", "status", "decision", "resolved_by",
                    "task", "replay")
    list_filter = ("kind", "reason", "status", "decision")
    search_fields = ("task__instruction", "note", "question")
    date_hierarchy = "created_at"
    list_select_related = ("task", "resolved_by", "step")
    raw_id_fields = ("task", "step")

    @admin.display(description="")
    def replay(self, obj: Ticket) -> str:
        return _replay_link(obj.task_id, obj.step.index if obj.step else None)


@admin.register(TrainingRecord)
class TrainingRecordAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "instruction", "decision", "reason", "agent_confidence",
                    "score_label", "operator")
    list_filter = ("decision", "reason", "score_label")
    search_fields = ("instruction",)
    date_hierarchy = "created_at"
    list_select_related = ("operator",)
    raw_id_fields = ("ticket", "task")


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "actor_name", "action", "target", "changes")
    list_filter = ("action",)
    search_fields = ("actor_name", "target")
    date_hierarchy = "created_at"
