"""A small world of users, phones, a task, a step and a ticket, for tests that try many
requests against the same kinds of objects (tests/test_authorization.py, tests/test_fuzz.py).

The owner (an end user) has a task on sim-1 waiting for an operator, with one step, its
screenshot and an open intervention ticket; "other" is a second end user.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import Group, User
from django.core.files.base import ContentFile

from agents.runtime.models import CalibratorVersion, Step, Task, TaskStatus, TicketKind, TicketReason
from agents.runtime.services import lifecycle, tickets
from devices.models import Device


@dataclass
class World:
    users: dict[str, User]
    params: dict[str, str] = field(default_factory=dict)

    def url(self, route: str, row: Any) -> str:
        if row.url:
            return row.url.format(**self.params)
        filled = re.sub(r"<(?:\w+:)?(\w+)>|\{(\w+)\}",
                        lambda m: self.params[m.group(1) or m.group(2)], route)
        return filled if filled.startswith("/") else "/" + filled


def build_world() -> World:
    groups = {name: Group.objects.get_or_create(name=name)[0]
              for name in ("operators", "end_users", "admins")}
    users = {}
    for role, group in (("owner", "end_users"), ("other", "end_users"),
                        ("operator", "operators"), ("admin", "admins")):
        user = User.objects.create(username=role, is_staff=role == "admin",
                                   is_superuser=role == "admin")
        user.groups.add(groups[group])
        users[role] = user
    phone = Device.objects.create(name="sim-1")
    Device.objects.create(name="sim-2")
    task = lifecycle.create_task(users["owner"], phone, "Turn on Wi-Fi", start=False)
    Task.objects.filter(id=task.id).update(status=TaskStatus.RUNNING)  # as start_task would
    step = Step(task=task, index=0, proposed_action={"type": "PRESS_HOME"}, confidence=1,
                status="waiting")
    step.screenshot.save(f"{task.id}-0.jpg", ContentFile(b"\xff\xd8\xff jpeg"), save=True)
    ticket = tickets.open_ticket(task, step, TicketKind.INTERVENTION, TicketReason.LOW_CONFIDENCE)
    # A kept calibrator version to roll back to: version 0 of a backend without a
    # calibrator (rolling back to it writes no file).
    version = CalibratorVersion.objects.create(backend="world", number=0, taken=True,
                                               reason="the backend's own score")
    # One remembered step, so the experience pages have an app to show, export, forget.
    from agents.runtime.models import ExperienceEntry

    ExperienceEntry.objects.create(
        app="com.kairos.settings", signature="0" * 16, instruction="Turn on Wi-Fi",
        action={"type": "PRESS_BACK"}, action_key="PRESS_BACK", source="approve")
    return World(users, {"task_id": str(task.id), "ticket_id": str(ticket.id),
                         "device_id": str(phone.id), "screenshot_url": step.screenshot.url,
                         "version_id": str(version.pk)})
