"""What admins change at run time — γ, devices, roles, API tokens — and its audit trail.

Each change and its :class:`AuditEntry` are written in one transaction, so the trail never
misses a change nor records one that did not happen.
"""
from __future__ import annotations

import math
from typing import Any

from django.db import transaction

from agents.runtime.models import InstallationSettings
from access.audit import record_audit
from access.errors import ServiceError
from devices.models import Device
from frontend.models import ApiToken


def check_gamma(value: Any) -> float | None:
    """γ from a form: empty → None (inherit), else a number in [0, 5]."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        gamma = float(value)
    except (TypeError, ValueError):
        raise ServiceError(f"γ must be a number between 0 and 5, not '{str(value)[:20]}'") \
            from None
    if math.isnan(gamma) or not 0 <= gamma <= 5:
        raise ServiceError(f"γ must be between 0 and 5, not {value}")
    return gamma


def set_default_threshold(actor: Any, value: Any) -> float | None:
    """The installation's γ for new tasks; None goes back to KAIROS_DEFAULT_THRESHOLD."""
    gamma = check_gamma(value)
    with transaction.atomic():
        row, _ = InstallationSettings.objects.select_for_update().get_or_create(pk=1)
        before = row.default_threshold
        row.default_threshold, row.updated_by = gamma, actor
        row.save()
        record_audit(actor, "gamma.default", "installation",
                     {"default_threshold": (before, gamma)})
    return gamma


def set_device_threshold(actor: Any, device: Device, value: Any) -> float | None:
    gamma = check_gamma(value)
    with transaction.atomic():
        before = Device.objects.filter(pk=device.pk).values_list("threshold", flat=True).first()
        Device.objects.filter(pk=device.pk).update(threshold=gamma)
        record_audit(actor, "gamma.device", f"device {device.name}",
                     {"threshold": (before, gamma)})
    device.threshold = gamma
    return gamma


def check_share(value: Any) -> float | None:
    """A spot-check share from a form: empty → None (KAIROS_SPOT_CHECK), else 0–1."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        share = float(value)
    except (TypeError, ValueError):
        raise ServiceError(f"the spot-check share must be a number between 0 and 1, not "
                           f"'{str(value)[:20]}'") from None
    if math.isnan(share) or not 0 <= share <= 1:
        raise ServiceError(f"the spot-check share must be between 0 and 1, not {value}")
    return share


def set_device_spot_check(actor: Any, device: Device, value: Any) -> float | None:
    """The share of a phone's would-be autonomous steps asked anyway (issue 24)."""
    share = check_share(value)
    with transaction.atomic():
        before = Device.objects.filter(pk=device.pk).values_list("spot_check", flat=True).first()
        Device.objects.filter(pk=device.pk).update(spot_check=share)
        record_audit(actor, "spot_check.device", f"device {device.name}",
                     {"spot_check": (before, share)})
    device.spot_check = share
    return share


def set_devices_enabled(actor: Any, devices: Any, enabled: bool) -> int:
    """Enable or disable phones; only those whose switch flips are changed and audited."""
    changed = 0
    with transaction.atomic():
        for device in devices.select_for_update().exclude(enabled=enabled):
            Device.objects.filter(pk=device.pk, enabled=not enabled).update(enabled=enabled)
            record_audit(actor, "device.enable" if enabled else "device.disable",
                         f"device {device.name}", {"enabled": (not enabled, enabled)})
            changed += 1
    return changed


def admin_hand_back(actor: Any, task: Any) -> Any:
    """An admin hands back another operator's take-over (issue 26, item 1), audited."""
    from agents.runtime.services import takeover

    with transaction.atomic():
        holder = task.tickets.filter(decision="takeover").order_by("-resolved_at").first()
        held_by = holder.resolved_by.get_username() if holder and holder.resolved_by else ""
        task = takeover.hand_back(task, actor, as_admin=True)
        record_audit(actor, "takeover.hand_back", f"task {task.id}",
                     {"taken_over_by": (held_by, None)})
    return task


def issue_token(actor: Any, user: Any, *, via: str = "") -> tuple[ApiToken, str]:
    """A new API token for ``user``; the plain token is returned once and never stored.
    ``via`` names who issued it when no person is logged in (``manage.py create_token``)."""
    with transaction.atomic():
        row, token = ApiToken.issue(user)
        record_audit(actor, "token.issue", f"user {user.get_username()}",
                     {"token": (None, row.prefix + "…")}, actor_name=via)
    return row, token


def revoke_tokens(actor: Any, tokens: Any) -> int:
    count = 0
    with transaction.atomic():
        for row in tokens.select_related("user"):
            record_audit(actor, "token.revoke", f"user {row.user.get_username()}",
                         {"token": (row.prefix + "…", None)})
            row.delete()
            count += 1
    return count
