"""Clarification questions (RecAgent §3.6): asked once, answered in the chat, escalated.

The Coffee order needs a size, a temperature and a sweetness; "Order a medium hot latte"
leaves the sweetness open, so the agent must ask, and the answer must reach every later
step (RecAgent Eq. 6: the refined goal) and the training record.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from access.errors import Conflict, Forbidden, ServiceError
from agents.brain.backends.base import Clarification, Proposal
from agents.runtime.models import Message, StepStatus, Task, TaskStatus, Ticket, TicketStatus
from agents.runtime import task_names
from agents.runtime.services import chat, lifecycle, tickets
from devices.models import Device

pytestmark = pytest.mark.django_db(transaction=True)

LATTE = "Order a medium hot latte"


def suite_task_for(instruction: str):
    """The bundled ``complex`` suite's task with this instruction (judged by its predicate)."""
    from devices.sim import find_suite

    suite = find_suite("complex")
    matches = [t for t in suite.tasks if t.instruction.strip().lower() == instruction.lower()]
    assert matches, f"the complex suite has no task '{instruction}'"
    return matches[0]


def order_latte(user: User, instruction: str = LATTE, *, suite: bool = True) -> Task:
    device = Device.objects.get(name="sim-1")
    if suite:
        task = suite_task_for(instruction)
        return lifecycle.create_task(user, device, task.instruction, threshold=0,
                                     suite="complex", suite_task=task.id)
    return lifecycle.create_task(user, device, instruction, threshold=0)


def open_question(task: Task) -> Ticket:
    return Ticket.objects.get(task=task, kind="clarification", status=TicketStatus.OPEN)


def other_end_user() -> User:
    other = User.objects.create_user("mallory", password="pw-for-tests-2")
    other.groups.add(Group.objects.get(name="end_users"))
    return other


def asks(question: str, options=("Small", "Large")):
    """One scripted proposal: the model asks ``question``."""
    return [Proposal(action=None, confidence=2.0,
                     clarification=Clarification(question, list(options)))]


# --- the Coffee order ----------------------------------------------------------------

def test_an_open_sweetness_is_asked_once_and_the_chat_answer_completes_the_order(
        demo, inline_steps, phones):
    task = order_latte(demo["user"])
    inline_steps.drain()

    task.refresh_from_db()
    assert task.status == TaskStatus.WAITING_USER
    ticket = open_question(task)
    assert "sweet" in ticket.question.lower()
    assert [o.lower() for o in ticket.options] == ["no sugar", "less sweet", "regular"]
    question = task.messages.get(sender=Message.Sender.AGENT)
    assert question.ticket_id == ticket.id and question.options == ticket.options
    assert not inline_steps.pending  # no worker waits for the user

    chat.post_message(task, demo["user"], "Less sweet")
    inline_steps.drain()

    task.refresh_from_db()
    ticket.refresh_from_db()
    assert (ticket.status, ticket.decision, ticket.answer) == ("resolved", "answer", "Less sweet")
    assert task.answers == ["Less sweet"]
    # Placing the order spends money: a person approves it whatever the confidence.
    assert task.status == TaskStatus.WAITING_OPERATOR
    order = task.tickets.get(status=TicketStatus.OPEN)
    assert order.reason == "sensitive_action" and "Place order" in order.note
    tickets.resolve_ticket(order, demo["operator"], "approve")
    inline_steps.drain()
    task.refresh_from_db()
    assert task.status == TaskStatus.SUCCEEDED and task.success is True
    assert task.clarifications == 1 and Ticket.objects.filter(task=task).count() == 2
    assert phones.device("sim-1").state_vars["coffee.sweetness"] == "less"
    record = ticket.training
    assert (record.question, record.answer) == (ticket.question, "Less sweet")
    assert record.decision == "answer" and record.score_label is None


def test_the_order_with_the_sweetness_named_asks_no_question(demo, inline_steps, phones):
    task = order_latte(demo["user"], "Order a medium hot latte, less sweet", suite=False)
    inline_steps.drain()

    task.refresh_from_db()
    # No question for the user; only the money step goes to a person.
    [ticket] = task.tickets.all()
    assert ticket.reason == "sensitive_action" and task.clarifications == 0
    tickets.resolve_ticket(ticket, demo["operator"], "approve")
    inline_steps.drain()
    task.refresh_from_db()
    assert task.status == TaskStatus.SUCCEEDED
    state = phones.device("sim-1").state_vars
    assert state["coffee.ordered"] is True
    assert (state["coffee.drink"], state["coffee.size"], state["coffee.temp"],
            state["coffee.sweetness"]) == ("latte", "medium", "hot", "less")


def test_a_name_two_contacts_share_is_asked_and_the_answer_picks_the_contact(
        demo, inline_steps, phones):
    task = order_latte(demo["user"], "Text Sam that I'm running late")
    inline_steps.drain()

    task.refresh_from_db()
    assert task.status == TaskStatus.WAITING_USER
    ticket = open_question(task)
    assert ticket.options == ["Sam Patel", "Sam Rivera"]
    assert "Sam Patel or Sam Rivera" in ticket.question

    chat.post_message(task, demo["user"], "Sam Rivera, my flatmate")
    inline_steps.drain()

    # The message is written to the contact the user named; Send still waits for a person
    # (the sensitive-action guard asks whatever the confidence).
    task.refresh_from_db()
    state = phones.device("sim-1").state_vars
    assert state["messages.to"] == "Sam Rivera"
    assert "running late" in state["messages.body"].lower()
    assert task.status == TaskStatus.WAITING_OPERATOR
    assert task.tickets.get(status=TicketStatus.OPEN).reason == "sensitive_action"
    assert task.clarifications == 1


def test_the_same_question_is_never_asked_twice(demo, scripted, inline_steps):
    question = "Which size would you like: small or large?"
    scripted(asks(question) + asks(question))
    task = lifecycle.create_task(demo["user"], Device.objects.get(name="sim-1"),
                                 "Open the settings", threshold=0, backend="scripted")
    inline_steps.drain()
    chat.post_message(task, demo["user"], "Large")
    inline_steps.drain()

    task.refresh_from_db()
    assert task.asked == [question] and task.answers == ["Large"]
    assert task.clarifications == 1
    assert task.messages.filter(sender=Message.Sender.AGENT).count() == 1
    # The model repeated itself: a person decides, the user is not asked again.
    second = task.tickets.exclude(kind="clarification").get()
    assert (second.kind, second.reason) == ("intervention", "ambiguous_intent")
    assert task.status == TaskStatus.WAITING_OPERATOR


# --- escalation ----------------------------------------------------------------------

def test_an_unanswered_question_escalates_to_the_operators_once(demo, inline_steps,
                                                                 django_capture_on_commit_callbacks):
    task = order_latte(demo["user"])
    inline_steps.drain()
    ticket = open_question(task)

    with django_capture_on_commit_callbacks(execute=True):
        assert chat.escalate_clarification(ticket.id) is True
    assert chat.escalate_clarification(ticket.id) is False  # the timer fired twice

    ticket.refresh_from_db()
    assert ticket.escalated and ticket.status == TicketStatus.OPEN
    notes = task.messages.filter(sender=Message.Sender.SYSTEM)
    assert notes.count() == 1 and "operator" in notes.get().text
    # Operators see it in their open queue.
    client = Client()
    client.force_login(demo["operator"])
    queue = client.get("/api/tickets?status=open").json()
    assert [(t["id"], t["escalated"]) for t in queue] == [(str(ticket.id), True)]


def test_the_stall_sweep_escalates_a_question_left_overdue_once(demo, inline_steps, settings):
    """The delayed hand-off died with its worker (issue 23, item 2): the sweep finds the
    question overdue in the database; a late hand-off after it changes nothing."""
    from datetime import timedelta

    from agents.runtime.recovery import sweep_stalled_tasks

    settings.KAIROS_CLARIFICATION_TIMEOUT = 20
    task = order_latte(demo["user"])
    inline_steps.drain()
    ticket = open_question(task)

    assert sweep_stalled_tasks(now=ticket.created_at + timedelta(seconds=19)) == {}
    assert not Ticket.objects.get(id=ticket.id).escalated  # not yet due: the user's to answer

    assert sweep_stalled_tasks(now=ticket.created_at + timedelta(seconds=21)) == {
        str(ticket.id): "escalated its overdue question to operators"}
    assert chat.escalate_clarification(ticket.id) is False  # the hand-off, come back late
    assert sweep_stalled_tasks(now=ticket.created_at + timedelta(seconds=40)) == {}
    ticket.refresh_from_db()
    assert ticket.escalated and ticket.status == TicketStatus.OPEN
    assert task.messages.filter(sender=Message.Sender.SYSTEM,
                                text__startswith="No answer yet").count() == 1


def test_escalation_is_scheduled_with_the_configured_timeout(demo, inline_steps, settings,
                                                             monkeypatch):
    settings.KAIROS_CLARIFICATION_TIMEOUT = 7
    calls = []
    # The hand-off is enqueued by the task's registered name, through the Celery app that
    # task_names.enqueue looks up when the question opens.
    monkeypatch.setattr(task_names, "current_app", SimpleNamespace(
        send_task=lambda name, args, countdown, **options: calls.append(
            (name, args, countdown))))
    task = order_latte(demo["user"])
    inline_steps.drain()

    assert calls == [("agents.escalate_clarification", (str(open_question(task).id),), 7.0)]


def test_an_operator_answers_an_escalated_question_for_the_user(demo, inline_steps, phones):
    task = order_latte(demo["user"])
    inline_steps.drain()
    ticket = open_question(task)
    chat.escalate_clarification(ticket.id)

    client = Client()
    client.force_login(demo["operator"])
    response = client.post(f"/api/tickets/{ticket.id}/resolve",
                           {"decision": "answer", "answer": "Less sweet"},
                           content_type="application/json")
    assert response.status_code == 200
    inline_steps.drain()

    task.refresh_from_db()
    # The answer lets the agent go on to "Place order", a money step a person approves.
    assert task.answers == ["Less sweet"] and task.status == TaskStatus.WAITING_OPERATOR
    assert task.tickets.get(status=TicketStatus.OPEN).reason == "sensitive_action"
    note = task.messages.filter(sender=Message.Sender.OPERATOR).get()
    assert note.text == "An operator answered for you: Less sweet"
    assert Ticket.objects.get(id=ticket.id).training.operator == demo["operator"]


def test_the_user_may_still_answer_after_an_operator_claimed_the_question(demo, inline_steps):
    task = order_latte(demo["user"])
    inline_steps.drain()
    ticket = open_question(task)
    chat.escalate_clarification(ticket.id)
    tickets.claim_ticket(ticket, demo["operator"])

    chat.post_message(task, demo["user"], "Less sweet")

    ticket.refresh_from_db()
    assert (ticket.status, ticket.answer, ticket.resolved_by) == (
        "resolved", "Less sweet", demo["user"])
    with pytest.raises(Conflict, match="no longer open"):
        tickets.resolve_ticket(ticket, demo["operator"], "answer", answer="Regular")
    assert Task.objects.get(id=task.id).answers == ["Less sweet"]


def test_an_operator_may_abort_an_escalated_question(demo, inline_steps):
    task = order_latte(demo["user"])
    inline_steps.drain()
    ticket = open_question(task)
    chat.escalate_clarification(ticket.id)

    tickets.resolve_ticket(ticket, demo["operator"], "abort")

    task.refresh_from_db()
    assert task.status == TaskStatus.ABORTED and not inline_steps.pending


# --- bad input -----------------------------------------------------------------------

@pytest.mark.parametrize("text, error", [
    ("", "empty"), ("   \n ", "empty"), ("x" * 5000, "5000 characters; at most 2000"),
    (None, "empty"), (42, "empty"),
])
def test_a_bad_answer_is_refused_and_the_question_stays_open(demo, inline_steps, text, error):
    task = order_latte(demo["user"])
    inline_steps.drain()

    with pytest.raises(ServiceError, match=error):
        chat.post_message(task, demo["user"], text)

    assert open_question(task).status == TicketStatus.OPEN
    assert not task.messages.filter(sender=Message.Sender.USER).exists()
    assert Task.objects.get(id=task.id).status == TaskStatus.WAITING_USER


def test_html_in_an_answer_is_kept_as_text_and_rendered_escaped(demo, inline_steps):
    task = order_latte(demo["user"])
    inline_steps.drain()
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'

    chat.post_message(task, demo["user"], evil)

    assert Task.objects.get(id=task.id).answers == [evil]  # stored verbatim, never run
    client = Client()
    client.force_login(demo["user"])
    page = client.get(f"/tasks/{task.id}/").content.decode()
    assert evil not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page


def test_an_answer_to_a_closed_question_is_a_conflict(demo, inline_steps):
    task = order_latte(demo["user"])
    inline_steps.drain()
    ticket = open_question(task)
    chat.post_message(task, demo["user"], "Less sweet", ticket_id=str(ticket.id))

    with pytest.raises(Conflict, match="already closed"):
        chat.post_message(task, demo["user"], "Regular", ticket_id=str(ticket.id))
    assert Task.objects.get(id=task.id).answers == ["Less sweet"]

    client = Client()
    client.force_login(demo["operator"])
    response = client.post(f"/api/tickets/{ticket.id}/resolve",
                           {"decision": "answer", "answer": "Regular"},
                           content_type="application/json")
    assert response.status_code == 409 and "no longer open" in response.json()["detail"]


def test_an_end_user_cannot_answer_or_see_someone_elses_task(demo, inline_steps):
    task = order_latte(demo["user"])
    inline_steps.drain()
    mallory = other_end_user()
    client = Client()
    client.force_login(mallory)

    response = client.post(f"/api/tasks/{task.id}/messages", {"text": "Regular"},
                           content_type="application/json")
    assert response.status_code == 404 and response.json()["detail"] == "no such task"
    assert client.get(f"/api/tasks/{task.id}").status_code == 404
    assert client.get(f"/tasks/{task.id}/").status_code == 404
    assert client.post(f"/tasks/{task.id}/", {"text": "Regular"}).status_code == 404
    resolve = client.post(f"/api/tickets/{open_question(task).id}/resolve",
                          {"decision": "answer", "answer": "Regular"},
                          content_type="application/json")
    assert resolve.status_code == 403 and "operators" in resolve.json()["detail"]
    assert client.get("/api/tasks").json() == []
    with pytest.raises(Forbidden):
        chat.post_message(task, mallory, "Regular")
    assert open_question(task).status == TicketStatus.OPEN


def test_api_errors_for_bad_answers_are_json_with_a_detail(demo, inline_steps):
    task = order_latte(demo["user"])
    inline_steps.drain()
    client = Client()
    client.force_login(demo["user"])

    for text, status in (("", 400), ("y" * 5000, 400)):
        response = client.post(f"/api/tasks/{task.id}/messages", {"text": text},
                               content_type="application/json")
        assert response.status_code == status and response.json()["detail"]
    assert open_question(task).status == TicketStatus.OPEN


def test_the_task_page_shows_the_question_with_quick_replies_and_no_operator_controls(
        demo, inline_steps):
    task = order_latte(demo["user"])
    inline_steps.drain()
    ticket = open_question(task)
    client = Client()
    client.force_login(demo["user"])

    page = client.get(f"/tasks/{task.id}/").content.decode()

    assert ticket.question in page.replace("&#x27;", "'")
    for option in ticket.options:
        assert f'value="{option}" class="quick-reply"' in page
    for control in ("Approve", "Take over", "Hand back", "data-ticket-id"):
        assert control not in page
    # A quick reply posted by the page's form answers that question.
    response = client.post(f"/tasks/{task.id}/", {"text": "Less sweet", "ticket": str(ticket.id)})
    assert response.status_code == 302
    assert Task.objects.get(id=task.id).answers == ["Less sweet"]
    assert Ticket.objects.get(id=ticket.id).status == TicketStatus.RESOLVED
    assert task.steps.filter(status=StepStatus.ANSWERED).count() == 1


def test_a_question_asked_while_the_task_page_is_drawn_keeps_its_quick_replies(
        demo, inline_steps):
    """Issue 23.8: the worker asks while the server draws the page the user was sent to
    after "Start task". The page read the open tickets, then the chat: the question was
    in the chat, its ticket not among the open ones, so it showed with no quick replies —
    for good, since the socket joined after the question was sent. Here the agent's steps
    run just before the page reads its chat, as a loaded machine ordered them."""
    from django.db import connection

    task = order_latte(demo["user"])
    client = Client()
    client.force_login(demo["user"])
    asked = []

    def the_agent_asks_before_the_chat_is_read(execute, sql, params, many, context):
        if not asked and 'FROM "agents_message"' in sql:
            asked.append(sql)
            inline_steps.drain()
        return execute(sql, params, many, context)

    with connection.execute_wrapper(the_agent_asks_before_the_chat_is_read):
        page = client.get(f"/tasks/{task.id}/").content.decode()

    assert asked, "the page never read its chat"
    ticket = open_question(task)
    assert ticket.question in page.replace("&#x27;", "'")
    for option in ticket.options:
        assert f'value="{option}" class="quick-reply"' in page
    # The rest of the page is no older than the question it shows.
    assert 'placeholder="Your answer"' in page
    assert ">Waiting for your answer</span>" in page


# --- which app (issue 27, item 1) -------------------------------------------------------

def test_when_no_app_fits_the_user_is_asked_which_and_the_app_they_name_is_opened(
        demo, inline_steps, phones):
    """The phone's apps say nothing of the weather: the agent asks which app, with the
    phone's apps as quick replies, and opens the one the user names."""
    phone = phones.device("sim-1")
    task = lifecycle.create_task(demo["user"], Device.objects.get(name="sim-1"),
                                 "Show me the weather in Lisbon", threshold=0,
                                 backend="heuristic", max_steps=2)
    inline_steps.drain()

    task.refresh_from_db()
    assert task.status == TaskStatus.WAITING_USER
    ticket = open_question(task)
    assert ticket.question == "Which app should I use for “Show me the weather in Lisbon”?"
    assert sorted(ticket.options) == sorted(app.name for app in phone.info.apps)
    assert task.messages.get(sender=Message.Sender.AGENT).options == ticket.options

    chat.post_message(task, demo["user"], "Maps")
    inline_steps.drain()

    task.refresh_from_db()
    ticket.refresh_from_db()
    assert (ticket.status, ticket.answer) == ("resolved", "Maps")
    opened = task.steps.exclude(executed_action=None).order_by("index").first()
    assert opened.executed_action == {"type": "OPENAPP", "app": "Maps"}
    assert opened.decided_by == "agent"
    assert phone.observe().app == "com.kairos.maps"
