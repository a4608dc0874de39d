"""The audit trail: one line per admin change to γ, a device, a user's roles or the
experience memory — who, what, before and after.

The model's table belongs to the front end's app (``frontend_auditentry``, its migrations
are ``frontend``'s); it is defined here, below the apps, so the runtime (refits, the
experience memory) and the admin pages write it the same way. ``frontend.models`` imports
it so Django registers it with that app.
"""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class AuditEntry(models.Model):
    """One admin change to γ, a device or a user's roles: who, what, before and after."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=150, blank=True)  # kept if the user goes
    action = models.CharField(max_length=64)  # "gamma.default", "device.change", …
    target = models.CharField(max_length=255, blank=True)  # "device sim-1", "user bob"
    changes = models.JSONField(default=dict, blank=True)  # {field: [before, after]}
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        # The table, its migrations and its admin page stay the front end's app's
        # (frontend_auditentry): only the code moved below the apps that write to it.
        app_label = "frontend"
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "audit trail"

    def __str__(self) -> str:
        return f"{self.actor_name or 'system'}: {self.action} {self.target}"


def _plain(value: Any) -> Any:
    """A JSON-safe form of a field value for the trail."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, set)):
        return sorted(_plain(v) for v in value)
    return str(value)


def record_audit(actor: Any, action: str, target: str,
                 changes: dict[str, tuple[Any, Any]] | None = None, *,
                 actor_name: str = "") -> AuditEntry | None:
    """One line of the trail; ``changes`` maps a field to (before, after). Nothing is
    recorded when ``changes`` were given and none of them is a change."""
    given = changes is not None
    changes = {k: [_plain(b), _plain(a)] for k, (b, a) in (changes or {}).items()
               if _plain(b) != _plain(a)}
    if given and not changes:
        return None
    user = actor if getattr(actor, "is_authenticated", False) else None
    return AuditEntry.objects.create(
        actor=user, actor_name=user.get_username() if user else actor_name, action=action,
        target=target[:255], changes=changes)
