"""/ws/operator/ through the real ASGI application."""
from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from agents.brain.backends.base import Proposal
from agents.runtime.services import lifecycle
from devices.actions import Action
from devices.models import Device
from tests.websockets import connect

pytestmark = pytest.mark.django_db(transaction=True)


async def test_an_operator_receives_ticket_opened_after_a_low_confidence_step(
        demo, scripted, inline_steps):
    scripted([lambda ctx: Proposal(Action("CLICK", x=540, y=1200), confidence=1.5)])
    communicator, connected = await connect("/ws/operator/", demo["operator"])
    assert connected is True

    def start_and_step():
        device = Device.objects.get(name="sim-1")
        task = lifecycle.create_task(demo["user"], device, "Do the thing", backend="scripted")
        inline_steps.drain()
        return task

    task = await database_sync_to_async(start_and_step)()
    seen = []
    while True:
        event = await communicator.receive_json_from(timeout=5)
        seen.append(event["type"])
        if event["type"] == "ticket.opened":
            break
    ticket = event["ticket"]
    assert ticket["task"] == str(task.id)
    assert ticket["reason"] == "low_confidence" and ticket["confidence"] == 1.5
    assert ticket["proposed_action"] == {"type": "CLICK", "x": 540, "y": 1200}
    assert "task.updated" in seen
    await communicator.disconnect()


async def test_an_end_user_is_refused_with_4403(demo):
    _, refused = await connect("/ws/operator/", demo["user"], refused=True)
    assert refused == 4403


async def test_an_anonymous_socket_is_refused_with_4401(demo):
    _, refused = await connect("/ws/operator/", None, refused=True)
    assert refused == 4401
