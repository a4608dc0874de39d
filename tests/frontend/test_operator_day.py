"""Issue 26: the defects a new team hit in an operator's day, over the API."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from agents.brain.backends.base import Proposal
from agents.runtime.models import Task, TaskStatus
from agents.runtime.recovery import sweep_stalled_tasks
from devices.actions import Action
from access.audit import AuditEntry

pytestmark = pytest.mark.django_db(transaction=True)


def low_confidence_click(ctx):
    return Proposal(Action("CLICK", x=100, y=100), confidence=1.0)


# --- item 6: a backend that is not configured is refused at creation -------------------

def test_a_task_on_an_unconfigured_model_backend_is_refused_naming_the_setting(
        api, phones, inline_steps, monkeypatch):
    for name in ("KAIROS_LLM_BASE_URL", "KAIROS_LLM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    status, body = api("post", "/api/tasks", user="user", body={
        "instruction": "Turn on Wi-Fi", "device": "sim-1", "backend": "openai"})
    assert status == 409
    assert "KAIROS_LLM_BASE_URL" in body["detail"]
    assert not Task.objects.exists()  # nothing became a model_error ticket

    monkeypatch.setenv("KAIROS_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    status, body = api("post", "/api/tasks", user="user", body={
        "instruction": "Turn on Wi-Fi", "device": "sim-1", "backend": "openai"})
    assert status == 201, body


# --- item 1: an unused take-over lapses; admins hand back anyone's ---------------------

def _taken_over(api, inline_steps, scripted, holder="operator"):
    scripted([low_confidence_click, low_confidence_click, low_confidence_click])
    _, task = api("post", "/api/tasks", body={"instruction": "Tap the corner",
                                              "device": "sim-1", "backend": "scripted"})
    inline_steps.drain()
    _, tickets = api("get", "/api/tickets?status=open", user=holder)
    assert api("post", f"/api/tickets/{tickets[0]['id']}/resolve", user=holder,
               body={"decision": "takeover"})[0] == 200
    return task


def test_an_unused_take_over_lapses_back_to_the_queue_as_a_ticket_that_says_why(
        api, demo, phones, inline_steps, scripted, settings):
    settings.KAIROS_TAKEOVER_TIMEOUT = 5
    task = _taken_over(api, inline_steps, scripted)
    # Queued behind it on the same phone: waits while the take-over holds the phone.
    _, queued = api("post", "/api/tasks", user="user",
                    body={"instruction": "Turn on Wi-Fi", "device": "sim-1"})
    assert queued["queue_position"] == 1

    assert sweep_stalled_tasks() == {}  # within the timeout: nothing happens
    later = timezone.now() + timedelta(seconds=6)
    assert sweep_stalled_tasks(now=later, stall_after=3600) == {
        task["id"]: "take-over lapsed: back in the queue"}

    _, shown = api("get", f"/api/tasks/{task['id']}")
    assert shown["status"] == "waiting_operator"
    _, tickets = api("get", "/api/tickets?status=open", user="admin")
    lapsed = [t for t in tickets if t["task"] == task["id"]]
    assert len(lapsed) == 1 and lapsed[0]["reason"] == "takeover_lapsed"
    assert "operator" in lapsed[0]["note"] and "no input for 5 s" in lapsed[0]["note"]
    # The former holder no longer controls the phone.
    status, body = api("post", f"/api/tasks/{task['id']}/input",
                       body={"action": {"type": "PRESS_HOME"}})
    assert status == 403
    # Approving it lets the agent go on from the phone's screen; nothing to edit.
    status, body = api("post", f"/api/tickets/{lapsed[0]['id']}/resolve", user="admin",
                       body={"decision": "edit", "action": {"type": "PRESS_HOME"}})
    assert status == 409 and "take over" in body["detail"]
    assert api("post", f"/api/tickets/{lapsed[0]['id']}/resolve", user="admin",
               body={"decision": "approve"})[0] == 200
    assert Task.objects.get(id=task["id"]).status == TaskStatus.RUNNING
    assert inline_steps.pending  # the agent's next step is scheduled


def test_an_input_keeps_the_take_over_alive(api, demo, phones, inline_steps, scripted,
                                           settings):
    settings.KAIROS_TAKEOVER_TIMEOUT = 300
    task = _taken_over(api, inline_steps, scripted)
    Task.objects.filter(id=task["id"]).update(
        progressed_at=timezone.now() - timedelta(seconds=290))
    assert api("post", f"/api/tasks/{task['id']}/input",
               body={"action": {"type": "PRESS_HOME"}})[0] == 200
    assert sweep_stalled_tasks(now=timezone.now() + timedelta(seconds=20)) == {}
    assert Task.objects.get(id=task["id"]).status == TaskStatus.TAKEN_OVER


def test_an_admin_hands_back_another_operators_take_over_and_it_is_audited(
        api, demo, phones, inline_steps, scripted):
    task = _taken_over(api, inline_steps, scripted)
    second = User.objects.create_user("operator2", password="x" * 12)
    second.groups.add(Group.objects.get(name="operators"))
    demo["operator2"] = second

    status, body = api("post", f"/api/tasks/{task['id']}/hand_back", user="operator2")
    assert status == 403  # another operator may not
    status, body = api("post", f"/api/tasks/{task['id']}/hand_back", user="admin")
    assert status == 200 and body["status"] == "running"
    entry = AuditEntry.objects.get(action="takeover.hand_back")
    assert entry.actor_name == "admin" and entry.changes["taken_over_by"][0] == "operator"
    status, body = api("post", f"/api/tasks/{task['id']}/hand_back", user="admin")
    assert status == 409  # not taken over any more


# --- item 4: going round in circles asks a person at any γ ----------------------------

@pytest.fixture
def caution_0_phone(demo):
    """An admin lets sim-1 run at caution 0: an end user may not go below the phone's γ
    (issue 23, item 6)."""
    from devices.models import Device

    Device.objects.filter(name="sim-1").update(threshold=0)


def test_at_caution_0_an_agent_going_round_in_circles_asks_a_person_within_12_steps(
        api, phones, inline_steps, caution_0_phone):
    status, task = api("post", "/api/tasks", user="user", body={
        "instruction": "Send a message to mom", "device": "sim-1", "threshold": 0})
    assert status == 201
    inline_steps.drain(limit=40)
    _, shown = api("get", f"/api/tasks/{task['id']}", user="user")
    assert shown["status"] == "waiting_operator", [s["action"] for s in shown["steps"]]
    ticket = shown["tickets"][-1]
    assert ticket["reason"] == "no_progress" and "this screen" in ticket["note"]
    assert ticket["step"] < 12


def test_the_no_progress_guard_lets_the_agent_finish_or_wait():
    from agents.brain import loop
    from devices.actions import Action

    assert loop.no_progress(Action("SCROLL", direction="UP"), 2)
    assert not loop.no_progress(Action("SCROLL", direction="UP"), 1)
    assert not loop.no_progress(Action("COMPLETE"), 5)
    assert not loop.no_progress(Action("WAIT"), 5)


# --- item 5: ambiguity goes to the user, and a free-text reply is read -------------------

def test_order_a_coffee_asks_the_user_which_drink_and_reads_their_free_text_reply(
        api, phones, inline_steps):
    _, task = api("post", "/api/tasks", user="user", body={
        "instruction": "Order a coffee", "device": "sim-1", "threshold": 4})
    inline_steps.drain(limit=10)
    _, shown = api("get", f"/api/tasks/{task['id']}", user="user")
    assert shown["status"] == "waiting_user"  # the user is asked, not an operator
    question = shown["tickets"][-1]
    assert question["kind"] == "clarification" and "Latte" in question["options"]
    assert api("post", f"/api/tasks/{task['id']}/messages", user="user",
               body={"text": "A latte please, medium"})[0] == 201
    inline_steps.drain(limit=10)
    _, shown = api("get", f"/api/tasks/{task['id']}", user="user")
    assert any((s["action"] or {}).get("element") == "Latte" for s in shown["steps"])
    asked = [t["question"] for t in shown["tickets"] if t["kind"] == "clarification"]
    assert not any("size" in q.lower() for q in asked), asked  # "medium" was said already
    assert not any(t["kind"] == "intervention" for t in shown["tickets"])


def test_a_chat_reply_to_an_operators_question_settles_the_agents_guess(
        api, phones, inline_steps, scripted):
    """The agent guessed Americano on the drinks list; an operator asked in the chat; the
    user's answer there answers the ticket, and the agent reads it at its next step."""
    seen = []

    def open_coffee(ctx):
        return Proposal(Action("OPENAPP", app="Coffee"), confidence=5.0)

    def guess(ctx):
        return Proposal(Action("CLICK", x=540, y=800), confidence=1.0)

    def look_again(ctx):
        seen.append(list(ctx.answers))
        return Proposal(Action("WAIT"), confidence=1.0)

    scripted([open_coffee, guess, look_again])
    _, task = api("post", "/api/tasks", user="user", body={
        "instruction": "Get me something to drink", "device": "sim-1", "backend": "scripted",
        "threshold": 4})
    inline_steps.drain(limit=5)
    _, shown = api("get", f"/api/tasks/{task['id']}", user="user")
    ticket = shown["tickets"][-1]
    assert ticket["reason"] == "low_confidence" and ticket["status"] == "open"
    assert api("post", f"/api/tasks/{task['id']}/messages", user="operator",
               body={"text": "Which drink would you like?"})[0] == 201
    status, message = api("post", f"/api/tasks/{task['id']}/messages", user="user",
                          body={"text": "A latte please, medium"})
    assert status == 201
    inline_steps.drain(limit=5)
    _, shown = api("get", f"/api/tasks/{task['id']}", user="user")
    answered = next(t for t in shown["tickets"] if t["id"] == ticket["id"])
    assert answered["decision"] == "answer" and answered["answered_by_user"]
    assert seen == [["A latte please, medium"]]


def test_a_reply_that_names_nothing_on_screen_leaves_the_ticket_to_operators(
        api, phones, inline_steps, scripted):
    scripted([lambda ctx: Proposal(Action("OPENAPP", app="Coffee"), confidence=5.0),
              lambda ctx: Proposal(Action("CLICK", x=540, y=800), confidence=1.0)])
    _, task = api("post", "/api/tasks", user="user", body={
        "instruction": "Get me something to drink", "device": "sim-1", "backend": "scripted",
        "threshold": 4})
    inline_steps.drain(limit=5)
    api("post", f"/api/tasks/{task['id']}/messages", user="user", body={"text": "Thanks!"})
    _, shown = api("get", f"/api/tasks/{task['id']}", user="user")
    assert shown["tickets"][-1]["status"] == "open"
    assert Task.objects.get(id=task["id"]).answers == ["Thanks!"]


# --- item 8: the smaller defects -------------------------------------------------------

def test_a_finished_tasks_result_says_what_was_done_and_what_the_agent_saw(
        api, phones, inline_steps, caution_0_phone):
    def run(text):
        _, task = api("post", "/api/tasks", user="user", body={
            "instruction": text, "device": "sim-1", "threshold": 0})
        inline_steps.drain(limit=40)
        _, shown = api("get", f"/api/tasks/{task['id']}", user="user")
        assert shown["status"] == "succeeded", shown["status"]
        return shown["messages"][-1]["text"]

    first = run("Turn on Wi-Fi")
    assert first.startswith("Done in ") and "OPENAPP Settings" in first, first
    again = run("Turn on Wi-Fi")
    assert "already on" in again.lower(), again


def test_create_token_is_in_the_audit_trail(demo):
    from django.core.management import call_command
    from io import StringIO

    out = StringIO()
    call_command("create_token", "operator", stdout=out)
    entry = AuditEntry.objects.get(action="token.issue")
    assert entry.target == "user operator" and entry.actor_name == "manage.py create_token"
    assert entry.changes["token"][1] == out.getvalue().strip()[:8] + "…"


def test_a_logged_in_person_is_not_offered_log_in_on_the_404_page_nor_users_an_api_link(
        client, demo):
    client.force_login(demo["user"])
    page = client.get("/no-such-page/")
    assert page.status_code == 404
    assert b"Page not found" in page.content and b"Log in" not in page.content
    assert b'href="/api/docs"' not in client.get("/tasks/").content
    client.force_login(demo["operator"])
    assert b'href="/api/docs"' in client.get("/tasks/").content
    client.logout()
    assert b"Log in" in client.get("/no-such-page/").content


# --- queue features: an idle phone back to its home screen ----------------------------

def test_an_operator_sends_an_idle_phone_home_but_not_a_busy_one(api, phones, inline_steps):
    phone = phones.device("sim-1")
    phone.perform(Action("OPENAPP", app="Settings"))
    assert "launcher" not in phone.observe().app
    status, body = api("post", "/api/devices/sim-1/home")
    assert status == 200 and body["name"] == "sim-1"
    assert "launcher" in phone.observe().app  # the next task starts on the home screen

    assert api("post", "/api/devices/sim-1/home", user="user")[0] == 403
    status, body = api("post", "/api/devices/no-such-phone/home")
    assert status == 404 and body["detail"]
    api("post", "/api/tasks", body={"instruction": "Turn on Wi-Fi", "device": "sim-2",
                                    "threshold": 5})
    inline_steps.drain(limit=2)
    status, body = api("post", "/api/devices/sim-2/home")
    assert status == 409 and "idle" in body["detail"]


# --- queue features: "Ask the user" from a ticket ---------------------------------------

def test_an_operator_asks_the_user_from_a_ticket_and_the_reply_answers_it(
        api, phones, inline_steps, scripted):
    seen = []

    def look_again(ctx):
        seen.append(list(ctx.answers))
        return Proposal(Action("WAIT"), confidence=1.0)

    scripted([lambda ctx: Proposal(Action("CLICK", x=540, y=800), confidence=1.0), look_again])
    _, task = api("post", "/api/tasks", user="user", body={
        "instruction": "Get me something", "device": "sim-1", "backend": "scripted",
        "threshold": 4})
    inline_steps.drain(limit=3)
    ticket = api("get", f"/api/tasks/{task['id']}", user="user")[1]["tickets"][-1]
    ask = f"/api/tickets/{ticket['id']}/ask"

    for body, status, fragment in [
            ({"question": "  "}, 400, "question"),
            ({"question": "Which?", "options": ["a"] * 7}, 400, "options"),
            ({"question": "Which?", "options": [""]}, 400, "option")]:
        code, answer = api("post", ask, body=body)
        assert code == status and fragment in answer["detail"], (body, answer)
    assert api("post", ask, user="user", body={"question": "Which?"})[0] == 403

    status, message = api("post", ask, body={"question": "Which size would you like?",
                                             "options": ["Small", "Large"]})
    assert status == 201 and message["sender"] == "operator"
    assert message["options"] == ["Small", "Large"] and message["ticket"] == ticket["id"]
    # The user's reply (a quick reply or any text) answers the ticket.
    assert api("post", f"/api/tasks/{task['id']}/messages", user="user",
               body={"text": "Large"})[0] == 201
    inline_steps.drain(limit=3)
    shown = api("get", f"/api/tasks/{task['id']}", user="user")[1]
    answered = next(t for t in shown["tickets"] if t["id"] == ticket["id"])
    assert answered["decision"] == "answer" and answered["answer"] == "Large"
    assert answered["answered_by_user"] and seen == [["Large"]]
    code, body = api("post", ask, body={"question": "Still there?"})
    assert code == 409 and "no longer open" in body["detail"]
