"""The runtime's answer to :mod:`devices.occupancy`: phones are used by tasks.

Registered when Django starts (:class:`agents.runtime.apps.AgentsConfig`), so the devices
app learns which task drives a phone, whose task is on its screen, and where take-over
input goes, without importing the agents.
"""
from __future__ import annotations

from typing import Any

from access.errors import Forbidden
from agents.runtime.models import ACTIVE_TASK_STATUSES, Task, TaskStatus
from agents.runtime.services import takeover


class TaskOccupancy:
    def driving(self, device: Any) -> Task | None:
        return Task.objects.driving(device).order_by("started_at").first()

    def on_screen_for(self, user: Any, device_id: Any) -> bool:
        """A queued task waits for the phone and shows nothing of the task on it."""
        return Task.objects.filter(device_id=device_id, owner=user, status__in=[
            s for s in ACTIVE_TASK_STATUSES if s != TaskStatus.QUEUED]).exists()

    def take_over_input(self, device: Any, user: Any, action: Any) -> Any:
        task = Task.objects.select_related("device").filter(
            device=device, status=TaskStatus.TAKEN_OVER).order_by("-updated_at").first()
        if task is None:
            raise Forbidden("no task on this device is taken over")
        return takeover.operator_input(task, user, action)
