from __future__ import annotations

import uuid

from django.db import models

from devices.occupancy import occupancy


class DeviceKind(models.TextChoices):
    SIM = "sim", "Simulated phone"
    ADB = "adb", "Android phone (adb)"


class DeviceStatus(models.TextChoices):
    ONLINE = "online", "Online"
    OFFLINE = "offline", "Offline"


# What /api/devices reports: the stored status, or "busy" while a task drives the phone.
LIVE_DEVICE_STATUSES = ("online", "busy", "offline")


class Device(models.Model):
    """A phone known to Kairos. The live connection lives in the device host, not here."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=64, unique=True)
    kind = models.CharField(max_length=8, choices=DeviceKind.choices, default=DeviceKind.SIM)
    status = models.CharField(
        max_length=10, choices=DeviceStatus.choices, default=DeviceStatus.ONLINE
    )
    width = models.PositiveIntegerField(default=1080)
    height = models.PositiveIntegerField(default=2400)
    serial = models.CharField(max_length=128, blank=True, help_text="adb serial for real phones")
    apps = models.JSONField(default=list, blank=True, help_text="installed apps: name, package")
    enabled = models.BooleanField(
        default=True, help_text="A disabled phone takes no new tasks (an admin's switch).")
    threshold = models.FloatField(
        null=True, blank=True,
        help_text="γ for new tasks on this phone, 0–5 (empty: the installation's default).")
    spot_check = models.FloatField(
        null=True, blank=True,
        help_text="Share of the steps that would act alone asked anyway as spot checks, "
                  "0–1 (empty: KAIROS_SPOT_CHECK).")
    users = models.ManyToManyField(
        "auth.User", blank=True, related_name="devices",
        help_text="End users who may run tasks on this device (empty: everyone).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def current_task(self):
        """The task driving this phone now (one at a time; others queue), or None.

        The screen socket's access check asks this: only that task's owner (and operators)
        may watch the phone.
        """
        return occupancy().driving(self)

    @property
    def live_status(self) -> str:
        """``online``, ``busy`` (a task drives it) or ``offline`` (CONTRACT, second build)."""
        if self.status == DeviceStatus.ONLINE and self.current_task is not None:
            return "busy"
        return self.status

    def to_json(self) -> dict:
        return {
            "id": str(self.id), "name": self.name, "kind": self.kind, "status": self.live_status,
            "width": self.width, "height": self.height,
        }
