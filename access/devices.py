"""Which phones a user may run tasks on."""
from __future__ import annotations

from typing import Any

from django.db.models import Q

from access.errors import Forbidden, NotFound
from access.roles import is_operator
from devices.actions import text_problem
from devices.models import Device


def usable_devices(user: Any):
    """The phones ``user`` may run tasks on: all for operators; for end users the phones
    open to everyone (no users listed) and those listing them."""
    devices = Device.objects.order_by("name")
    if is_operator(user):
        return devices
    return devices.filter(Q(users=None) | Q(users=user)).distinct()


def access_device(user: Any, ref: Any) -> Device:
    """A device by id or name that ``user`` may run tasks on."""
    if not isinstance(ref, str) or text_problem(ref) or len(ref) > 200:
        raise NotFound("unknown device")
    device = None
    try:
        device = Device.objects.filter(id=ref).first()
    except Exception:  # not a UUID
        device = None
    if device is None:
        device = Device.objects.filter(name=ref).first()
    if device is None:
        raise NotFound(f"unknown device '{str(ref)[:64]}'")
    if not usable_devices(user).filter(id=device.id).exists():
        raise Forbidden(f"you may not use device '{device.name}'")
    return device
