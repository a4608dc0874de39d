"""``/ws/tasks/<id>/`` through the real ASGI application: the owner's live page and chat."""
from __future__ import annotations

from typing import Callable

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, User

from agents.runtime.models import Message, Task, TaskStatus, Ticket, TicketStatus
from agents.runtime.services import access, chat as chat_service, lifecycle, tickets
from devices.models import Device
from tests.websockets import connect

pytestmark = pytest.mark.django_db(transaction=True)

LATTE = "Order a medium hot latte"


async def until(communicator: WebsocketCommunicator, wanted: Callable[[dict], bool],
                timeout: float = 10) -> tuple[dict, list[dict]]:
    """Receive events until one is ``wanted``; returns it and everything seen before it."""
    seen: list[dict] = []
    while True:
        event = await communicator.receive_json_from(timeout=timeout)
        if wanted(event):
            return event, seen
        seen.append(event)


def is_status(status: str) -> Callable[[dict], bool]:
    return lambda e: e["type"] == "task.updated" and e["task"]["status"] == status


def from_sender(sender: str) -> Callable[[dict], bool]:
    return lambda e: e["type"] == "chat.message" and e["message"]["sender"] == sender


def latte_task(user: User) -> Task:
    from devices.sim import find_suite

    suite_task = next(t for t in find_suite("complex").tasks if t.instruction == LATTE)
    return lifecycle.create_task(user, Device.objects.get(name="sim-1"), LATTE, threshold=0,
                                 suite="complex", suite_task=suite_task.id)


@pytest.fixture
def latte(demo, inline_steps) -> Task:
    return latte_task(demo["user"])


async def test_the_question_reaches_the_owner_and_the_chat_answer_finishes_the_order(
        demo, latte, inline_steps):
    chat, ok = await connect(f"/ws/tasks/{latte.id}/", demo["user"])
    assert ok is True
    first = await chat.receive_json_from(timeout=5)
    assert first["type"] == "task.updated" and first["task"]["id"] == str(latte.id)

    await database_sync_to_async(inline_steps.drain)()
    question, _ = await until(chat, from_sender("agent"))
    assert "sweet" in question["message"]["text"].lower()
    assert [o.lower() for o in question["message"]["options"]] == ["no sugar", "less sweet",
                                                                   "regular"]
    assert question["message"]["ticket"]

    await chat.send_json_to({"type": "chat.message", "text": "Less sweet",
                             "ticket": question["message"]["ticket"]})
    answer, _ = await until(chat, from_sender("user"))
    assert answer["message"]["text"] == "Less sweet" and answer["message"]["author"] == "user"
    await until(chat, is_status("running"))

    await database_sync_to_async(inline_steps.drain)()
    # "Place order" spends money: the owner sees the task wait for an operator, who
    # approves it (docs/safety.md), and then the order goes through.
    await until(chat, is_status("waiting_operator"))
    ticket = await database_sync_to_async(
        lambda: latte.tickets.get(status="open", reason="sensitive_action"))()
    await database_sync_to_async(tickets.resolve_ticket)(ticket, demo["operator"], "approve")
    await database_sync_to_async(inline_steps.drain)()
    done, _ = await until(chat, is_status("succeeded"))
    assert done["task"]["success"] is True and done["task"]["clarifications"] == 1
    task = await database_sync_to_async(Task.objects.get)(id=latte.id)
    assert task.answers == ["Less sweet"]
    await chat.disconnect()


async def test_the_owner_sees_the_escalation_in_the_chat(demo, latte, inline_steps):
    await database_sync_to_async(inline_steps.drain)()
    ticket = await database_sync_to_async(Ticket.objects.get)(task=latte)
    chat, _ = await connect(f"/ws/tasks/{latte.id}/", demo["user"])
    await chat.receive_json_from(timeout=5)

    assert await database_sync_to_async(chat_service.escalate_clarification)(ticket.id)

    note, _ = await until(chat, from_sender("system"))
    assert "operator" in note["message"]["text"]
    await chat.disconnect()


async def test_another_end_user_is_refused_with_4403(demo, latte):
    def mallory() -> User:
        user = User.objects.create_user("mallory", password="pw-for-tests-2")
        user.groups.add(Group.objects.get(name="end_users"))
        return user

    other = await database_sync_to_async(mallory)()
    chat, result = await connect(f"/ws/tasks/{latte.id}/", other, refused=True)
    assert result == 4403
    screen, result = await connect(f"/ws/devices/{latte.device_id}/screen/", other, refused=True)
    assert result == 4403


async def test_an_anonymous_socket_is_refused_with_4401(latte):
    _, result = await connect(f"/ws/tasks/{latte.id}/", None, refused=True)
    assert result == 4401


async def test_the_owner_of_an_active_task_sees_the_live_screen(demo, latte):
    screen, ok = await connect(f"/ws/devices/{latte.device_id}/screen/", demo["user"])
    assert ok is True
    meta = await screen.receive_json_from(timeout=5)
    assert (meta["type"], meta["width"], meta["height"]) == ("screen.meta", 1080, 2400)
    frame = await screen.receive_from(timeout=5)
    assert isinstance(frame, bytes) and frame[:3] == b"\xff\xd8\xff"  # a JPEG
    await screen.disconnect()


@pytest.mark.parametrize("sent, detail", [
    ({"type": "chat.message", "text": ""}, "empty"),
    ({"type": "chat.message", "text": "   "}, "empty"),
    ({"type": "chat.message", "text": "z" * 5000}, "5000 characters; at most 2000"),
    ({"type": "chat.message"}, "empty"),
    ({"type": "chat.message", "text": ["Regular"]}, "empty"),
    ({"type": "delete.everything"}, "chat.message"),
    ({"type": "chat.message", "text": "Regular", "ticket": "not-a-ticket"}, "no such question"),
])
async def test_bad_chat_input_is_an_error_and_the_question_stays_open(demo, latte, inline_steps,
                                                                      sent, detail):
    await database_sync_to_async(inline_steps.drain)()
    chat, _ = await connect(f"/ws/tasks/{latte.id}/", demo["user"])
    await chat.receive_json_from(timeout=5)

    await chat.send_json_to(sent)

    error = await chat.receive_json_from(timeout=5)
    assert error["type"] == "error" and detail in error["detail"]
    ticket = await database_sync_to_async(Ticket.objects.get)(task=latte)
    assert ticket.status == TicketStatus.OPEN
    # The socket is still usable afterwards.
    await chat.send_json_to({"type": "chat.message", "text": "Less sweet"})
    answer, _ = await until(chat, from_sender("user"))
    assert answer["message"]["text"] == "Less sweet"
    await chat.disconnect()


async def test_text_that_is_not_json_is_an_error_not_a_closed_chat(demo, latte):
    chat, _ = await connect(f"/ws/tasks/{latte.id}/", demo["user"])
    await chat.receive_json_from(timeout=5)

    await chat.send_to(text_data="{not json")

    error = await chat.receive_json_from(timeout=5)
    assert error == {"type": "error", "detail": "the message is not valid JSON"}
    await chat.send_json_to({"type": "chat.message", "text": "still here"})
    echo, _ = await until(chat, from_sender("user"))
    assert echo["message"]["text"] == "still here"
    await chat.disconnect()


async def test_an_answer_to_a_closed_question_is_refused(demo, latte, inline_steps):
    await database_sync_to_async(inline_steps.drain)()
    ticket = await database_sync_to_async(Ticket.objects.get)(task=latte)
    await database_sync_to_async(chat_service.post_message)(latte, demo["user"], "Less sweet")
    chat, _ = await connect(f"/ws/tasks/{latte.id}/", demo["user"])
    await chat.receive_json_from(timeout=5)

    await chat.send_json_to({"type": "chat.message", "text": "Regular", "ticket": str(ticket.id)})

    error = await chat.receive_json_from(timeout=5)
    assert error["type"] == "error" and "already closed" in error["detail"]
    assert error["text"] == "Regular"  # handed back so the page can keep it
    task = await database_sync_to_async(Task.objects.get)(id=latte.id)
    assert task.answers == ["Less sweet"]
    await chat.disconnect()


async def test_html_in_a_message_travels_as_plain_text(demo, latte):
    chat, _ = await connect(f"/ws/tasks/{latte.id}/", demo["user"])
    await chat.receive_json_from(timeout=5)
    evil = "<img src=x onerror=alert(1)>"

    await chat.send_json_to({"type": "chat.message", "text": evil})

    echo, _ = await until(chat, from_sender("user"))
    assert echo["message"]["text"] == evil  # the page writes it with textContent
    stored = await database_sync_to_async(
        lambda: list(Message.objects.filter(task=latte, sender="user").values_list("text", flat=True)))()
    assert stored == [evil]
    status = await database_sync_to_async(lambda: Task.objects.get(id=latte.id).status)()
    assert status in (TaskStatus.RUNNING, TaskStatus.QUEUED)
    await chat.disconnect()


async def test_a_finished_task_says_how_it_ended_and_its_chat_refuses_messages(
        demo, latte, inline_steps):
    """Issue 15, item 8 and 10: the closing line arrives live; then the chat is closed."""
    chat, ok = await connect(f"/ws/tasks/{latte.id}/", demo["user"])
    assert ok is True
    await database_sync_to_async(inline_steps.drain)()
    await until(chat, from_sender("agent"))
    await database_sync_to_async(lifecycle.abort_task)(latte, demo["user"])
    closing, _ = await until(chat, from_sender("system"))
    assert closing["message"]["text"].startswith("You stopped this task after")

    await chat.send_json_to({"type": "chat.message", "text": "are you there?"})
    refused, _ = await until(chat, lambda e: e["type"] == "error")
    assert "the chat is closed" in refused["detail"] and refused["text"] == "are you there?"
    count = await database_sync_to_async(
        Message.objects.filter(task_id=latte.id, text="are you there?").count)()
    assert count == 0
    await chat.disconnect()


async def test_the_first_update_is_read_after_joining_so_a_change_in_between_is_not_lost(
        demo, latte, monkeypatch):
    """Issue 23.8: the socket read the task, then joined its group. A change between the two
    (here the owner aborts from another tab) sent its event to a group this socket was not in
    yet, and the page's first update showed the old state until the next change, which for a
    finished task never comes."""
    real_access = access.access_task

    def access_then_abort_elsewhere(user, task_id):
        task = real_access(user, task_id)
        lifecycle.abort_task(Task.objects.get(pk=task.pk), demo["user"])
        return task

    monkeypatch.setattr(access, "access_task", access_then_abort_elsewhere)
    chat, ok = await connect(f"/ws/tasks/{latte.id}/", demo["user"])
    assert ok is True
    first = await chat.receive_json_from(timeout=5)
    assert first["type"] == "task.updated"
    assert first["task"]["status"] == TaskStatus.ABORTED
    await chat.disconnect()
