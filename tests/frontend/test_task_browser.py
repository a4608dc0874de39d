"""The end user's task page in a real Chromium against a real ``manage.py serve``."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import Error as PlaywrightError

from tests.frontend.conftest import free_phone, save_screenshot

pytestmark = pytest.mark.browser

LATTE = "Order a medium hot latte"


def approve_the_order(server, task_id: str) -> None:
    """"Place order" spends money: the sensitive-action policy sends it to an operator
    whatever the confidence (docs/safety.md); an operator approves it over the API."""
    operator = server.token("operator")
    code, queue = server.api("GET", "/api/tickets?status=open", operator)
    ticket = next(t for t in queue if t["task"] == task_id)
    assert code == 200 and ticket["reason"] == "sensitive_action"
    code, _ = server.api("POST", f"/api/tickets/{ticket['id']}/resolve", operator,
                         {"decision": "approve"})
    assert code == 200


def start_task(page, server, device: str) -> str:
    page.goto(server.url + "/tasks/")
    page.fill("textarea[name=instruction]", LATTE)
    page.select_option("select[name=device]", label=device)
    page.fill("input[name=threshold]", "0")
    page.click("button:has-text('Start task')")
    page.wait_for_url(re.compile(r"/tasks/[0-9a-f-]{36}/$"))
    return page.url.rstrip("/").rsplit("/", 1)[-1]


def test_the_user_answers_the_question_with_a_quick_reply_and_sees_the_order_succeed(
        login, kairos_server):
    from playwright.sync_api import expect

    page = login("user")
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    task_id = start_task(page, kairos_server, "sim-1")

    status = page.locator("#task-status")
    question = page.locator("#chat li.from-agent", has_text="sweetness")
    expect(question).to_be_visible(timeout=30_000)
    expect(status).to_have_text("Waiting for your answer")
    expect(page.locator("#steps li").last).to_contain_text("Asking you a question")
    # Frames arrive over the socket; the screen shows only once the first one has.
    expect(page.locator("#live-screen")).to_have_attribute("src", re.compile(r"^blob:"))
    expect(page.locator("#live-screen")).to_be_visible()
    save_screenshot(page, "task-question")

    # The page's catch-up read of the task can be older than the question the socket drew;
    # it must not close that question (it greyed the replies out, now and then). Every
    # read is answered as it was before the question opened, plus a marker message that
    # shows once the page has handled it.
    api = re.compile(rf"/api/tasks/{task_id}$")

    def read_before_the_question(route):
        try:
            response = route.fetch()
            data = response.json()
            data["tickets"] = [t for t in data["tickets"] if t["kind"] != "clarification"]
            marker = dict(data["messages"][-1], id=10**9, sender="system", ticket=None,
                          options=[], text="catch-up handled")
            data["messages"].append(marker)
            route.fulfill(response=response, json=data)
        except PlaywrightError:
            pass  # a read of the page being reloaded, cancelled with it


    page.route(api, read_before_the_question)
    page.reload()
    expect(page.locator("#chat li", has_text="catch-up handled")).to_have_count(1)
    page.unroute(api, read_before_the_question)
    expect(question.get_by_role("button", name="Less sweet")).to_be_enabled()

    question.get_by_role("button", name="Less sweet").click()

    expect(page.locator("#chat li.from-user", has_text="Less sweet")).to_be_visible()
    expect(status).to_have_text("Waiting for an operator", timeout=30_000)
    expect(page.locator("#task-now")).to_have_text("An operator is checking the next step.")
    approve_the_order(kairos_server, task_id)
    expect(status).to_have_text("Succeeded", timeout=30_000)
    expect(page.locator("#task-now")).to_have_text("Finished.")
    expect(page.locator("#steps")).to_contain_text("Place order")
    expect(question.get_by_role("button", name="Regular")).to_be_disabled()
    for control in ("Approve", "Take over", "Hand back"):
        expect(page.get_by_role("button", name=control)).to_have_count(0)
    save_screenshot(page, "task-succeeded")

    # The task is over: the chat is closed, and the agent says how it went.
    expect(page.locator("#chat li.from-system").last).to_contain_text("Done in")
    expect(page.locator("#chat-text")).to_be_disabled()
    assert dialogs == []

    # After a reload the page shows the phone's final screen, and a step's thumbnail
    # opens its full-size screenshot.
    page.reload()
    expect(page.locator("#live-screen-note")).to_contain_text("The screen when the task ended")
    expect(page.locator("#final-screen")).to_be_visible()
    expect(page.locator("#live-screen")).to_be_hidden()
    assert page.evaluate("document.getElementById('final-screen').naturalWidth") > 0
    thumb = page.locator("#steps li a.thumb-link").first
    with page.context.expect_page() as opened:
        thumb.click()
    full = opened.value
    full.wait_for_load_state()
    assert full.evaluate("document.images[0].naturalWidth") >= 4 * 48  # not the thumbnail


def test_an_unanswered_question_goes_to_the_operators_and_their_answer_shows_in_the_chat(
        login, kairos_server):
    from playwright.sync_api import expect

    page = login("user")
    task_id = start_task(page, kairos_server, "sim-2")
    question = page.locator("#chat li.from-agent", has_text="sweetness")
    expect(question).to_be_visible(timeout=30_000)

    # The server's KAIROS_CLARIFICATION_TIMEOUT is 8 s in the tests.
    expect(page.locator("#chat li.from-system")).to_contain_text(
        "an operator has been asked", timeout=30_000)
    operator = kairos_server.token("operator")
    code, queue = kairos_server.api("GET", "/api/tickets?status=open", operator)
    ticket = next(t for t in queue if t["task"] == task_id)
    assert code == 200 and ticket["kind"] == "clarification" and ticket["escalated"]

    # HTML in a message stays text and runs nothing.
    evil = '<img src=x onerror="alert(1)"><b>bold?</b>'
    code, _ = kairos_server.api("POST", f"/api/tickets/{ticket['id']}/resolve", operator,
                                {"decision": "answer", "answer": f"Less sweet {evil}"})
    assert code == 200

    expect(page.locator("#chat li.from-operator")).to_contain_text(
        f"An operator answered for you: Less sweet {evil}")
    expect(page.locator("#chat img, #chat b:has-text('bold?')")).to_have_count(0)
    expect(page.locator("#task-status")).to_have_text("Waiting for an operator",
                                                      timeout=30_000)
    approve_the_order(kairos_server, task_id)
    expect(page.locator("#task-status")).to_have_text("Succeeded", timeout=30_000)
    save_screenshot(page, "task-escalated")


def test_an_end_user_cannot_open_someone_elses_task(login, kairos_server):
    operator = kairos_server.token("operator")
    code, task = kairos_server.api("POST", "/api/tasks", operator,
                                   {"instruction": "Open the clock", "device": "sim-2",
                                    "threshold": 5})
    assert code == 201
    page = login("user")

    response = page.goto(f"{kairos_server.url}/tasks/{task['id']}/")

    assert response.status == 404
    page.goto(kairos_server.url + "/tasks/")
    assert page.locator(f"[data-task-id='{task['id']}']").count() == 0
    kairos_server.api("POST", f"/api/tasks/{task['id']}/abort", operator)


def test_abort_is_offered_only_once_it_asks_first(login, kairos_server):
    """Issue 23.8: the server drew Abort live before task.js had bound it, so on a slow
    machine a click in between posted the form and aborted the task without asking. Here
    the script is held back, as a slow machine does."""
    from playwright.sync_api import expect

    page = login("user")
    task_id = start_task(page, kairos_server, "sim-5")  # left waiting on a question
    held: list = []
    page.route(re.compile(r"/static/frontend/task\.js$"), lambda route: held.append(route))
    page.goto(f"{kairos_server.url}/tasks/{task_id}/", wait_until="commit")
    expect(page.locator("#abort-dialog")).to_be_attached()  # drawn up to the scripts
    abort = page.get_by_role("button", name="Abort", exact=True)
    expect(abort).to_be_disabled()
    assert len(held) == 1, "the script was not asked for"

    held[0].continue_()
    expect(abort).to_be_enabled()
    abort.click()
    expect(page.locator("#abort-dialog")).to_be_visible()
    page.get_by_role("button", name="Keep going").click()
    code, shown = kairos_server.api("GET", f"/api/tasks/{task_id}", kairos_server.token("user"))
    assert code == 200 and shown["status"] not in ("aborted",)
    kairos_server.api("POST", f"/api/tasks/{task_id}/abort", kairos_server.token("user"))


def test_abort_asks_first_and_the_page_then_says_who_stopped_the_task(login, kairos_server):
    """Issue 15, items 4 and 8; issue 26, item 8: asked in the page (the console's
    dialog), never with the browser's own prompt."""
    from playwright.sync_api import expect

    page = login("user")
    native: list[str] = []
    page.on("dialog", lambda d: (native.append(d.message), d.dismiss()))
    task_id = start_task(page, kairos_server, "sim-5")  # left waiting on a question
    expect(page.locator("#task-status")).to_have_text("Waiting for your answer", timeout=30_000)
    dialog = page.locator("#abort-dialog")
    expect(dialog).to_be_hidden()
    page.get_by_role("button", name="Abort", exact=True).click()
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Abort this task?")
    expect(page.locator("#abort-cancel")).to_be_focused()  # Enter keeps the task
    save_screenshot(page, "task-abort-dialog")
    page.get_by_role("button", name="Keep going").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#task-status")).to_have_text("Waiting for your answer")
    code, shown = kairos_server.api("GET", f"/api/tasks/{task_id}",
                                    kairos_server.token("user"))
    assert code == 200 and shown["status"] == "waiting_user"

    # Too long: a clear error and the text is kept for editing.
    page.fill("#chat-text", "x" * 5000)
    page.click("#chat-form button[type=submit]")
    expect(page.locator("#chat-error")).to_contain_text("at most 2000")
    expect(page.locator("#chat-text")).to_have_value("x" * 5000)

    page.get_by_role("button", name="Abort", exact=True).click()
    page.get_by_role("button", name="Abort task").click()
    expect(page.locator("#task-status")).to_have_text("Aborted")
    expect(page.locator("#task-now")).to_contain_text("You stopped this task")
    expect(page.locator("#chat li.from-system").last).to_contain_text("You stopped this task")
    expect(page.locator("#steps li").last).not_to_contain_text("Asking you a question")
    expect(page.locator("#chat-text")).to_be_disabled()
    assert native == []  # the browser's own confirm() never showed


def test_on_a_phone_the_pages_fit_and_the_task_list_is_live(browser, kairos_server):
    """Issue 15, item 10, at 390 px wide."""
    from playwright.sync_api import expect

    from tests.frontend.conftest import PASSWORD

    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        page = context.new_page()
        # A wrong password keeps the username for the second try.
        page.goto(kairos_server.url + "/login/")
        page.fill("input[name=username]", "user")
        page.fill("input[name=password]", "wrong")
        page.click("button[type=submit]")
        expect(page.locator("p.error")).to_be_visible()
        expect(page.locator("input[name=username]")).to_have_value("user")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/tasks/$"))

        # The instruction's limit is shown as you type, not enforced by silent cutting.
        box = page.locator("textarea[name=instruction]")
        sentence = "Book me a flight to Paris. "  # no app fits: the agent asks a person
        box.fill(sentence * 80)
        expect(page.locator("#instruction-count")).to_contain_text(
            f"{len(sentence) * 80 - 2000} too many")
        expect(page.get_by_role("button", name="Start task")).to_be_disabled()
        long = (sentence * (2000 // len(sentence))).strip()
        box.fill(long)
        expect(page.locator("#instruction-count")).to_contain_text(f"{len(long)} / 2000")
        page.select_option("select[name=device]", label="sim-2")
        page.fill("input[name=threshold]", "5")
        page.get_by_role("button", name="Start task").click()
        page.wait_for_url(re.compile(r"/tasks/[0-9a-f-]{36}/$"))
        task_id = page.url.rstrip("/").rsplit("/", 1)[-1]

        # The task page fits the phone: no sideways scrolling, the instruction is not a
        # giant heading, and the chat comes before the list of steps.
        expect(page.locator("#task-instruction")).to_contain_text(sentence.strip())
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        size = page.locator("#task-instruction").evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
        assert size <= 17, size
        assert page.locator("#task-instruction").bounding_box()["height"] <= 200
        chat_top = page.locator("#chat-form").bounding_box()["y"]
        steps_top = page.locator("#steps").bounding_box()["y"]
        assert chat_top < steps_top and chat_top < 844 * 1.2, (chat_top, steps_top)
        save_screenshot(page, "task-390px")

        # The task list fits too, says when in real words, and follows the task live.
        page.goto(kairos_server.url + "/tasks/")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        row = page.locator(f"tr[data-task-id='{task_id}']")
        expect(row.locator(".age")).to_have_text(re.compile(r"^(just now|\d+ s ago|1 min ago)$"))
        expect(row.locator(".status")).not_to_have_text("Aborted")
        operator = kairos_server.token("operator")
        code, _ = kairos_server.api("POST", f"/api/tasks/{task_id}/abort", operator)
        assert code == 200
        expect(row.locator(".status")).to_have_text("Aborted")
    finally:
        context.close()


def test_the_step_list_says_only_true_things(login, kairos_server):
    """Issue 15, item 9: approved steps, a step replaced by a take-over, a TYPE that
    failed and an abort each read as what happened."""
    from playwright.sync_api import expect

    import uuid

    from devices.actions import Action

    user, operator = kairos_server.token("user"), kairos_server.token("operator")
    free_phone(kairos_server, "sim-1")
    console = login("operator")
    console.goto(kairos_server.url + "/console/")
    instruction = f"Set an alarm for 6:50 in Clock [{uuid.uuid4().hex[:6]}]"
    code, task = kairos_server.api("POST", "/api/tasks", user, {
        "instruction": instruction, "device": "sim-1", "threshold": 5})
    assert code == 201, task
    tid = task["id"]

    def open_ticket(after: str = "") -> dict:
        """The task's next ticket, awaited in the operator's live queue."""
        rows = console.locator("#queue tbody tr[data-ticket-id]", has_text=instruction)
        if after:
            rows = rows.locator(f"xpath=self::*[not(@data-ticket-id='{after}')]")
        expect(rows.first).to_be_visible(timeout=30_000)
        ticket_id = rows.first.get_attribute("data-ticket-id")
        return kairos_server.api("GET", f"/api/tickets/{ticket_id}", operator)[1]

    try:
        first = open_ticket()
        assert kairos_server.api("POST", f"/api/tickets/{first['id']}/resolve", operator,
                                 {"decision": "approve"})[0] == 200
        second = open_ticket(after=first["id"])
        assert kairos_server.api("POST", f"/api/tickets/{second['id']}/resolve", operator,
                                 {"decision": "takeover"})[0] == 200
        # A row named only by its id ("thread_mom") is tapped: it reads by its caption.
        from devices.host import LocalDeviceClient, build_sim_host

        offline = LocalDeviceClient(build_sim_host(["offline"]))
        offline.perform("offline", Action("OPENAPP", app="Messages"))
        row = next(n for n in offline.observe("offline").nodes
                   if n.resource_id.endswith("thread_mom"))
        mom = {"type": "CLICK", "x": row.center[0], "y": row.center[1]}
        for action in ({"type": "OPENAPP", "app": "Messages"}, mom, {"type": "PRESS_HOME"},
                       {"type": "TYPE", "text": "hello there"}):
            code, body = kairos_server.api("POST", f"/api/tasks/{tid}/input", operator,
                                           {"action": action})
            assert code == 200, body
        assert kairos_server.api("POST", f"/api/tasks/{tid}/abort", operator)[0] == 200

        page = login("user")
        page.goto(f"{kairos_server.url}/tasks/{tid}/")
        steps = page.locator("#steps li")
        expect(steps.nth(first["step"])).to_contain_text("by the agent, approved by an operator")
        expect(steps.nth(second["step"])).to_contain_text("Handed to an operator")
        expect(steps.nth(second["step"])).not_to_contain_text("stopped")
        expect(page.locator("#steps")).to_contain_text("Went to the home screen by an operator")
        expect(page.locator("#steps")).to_contain_text("Tapped “Mom” by an operator")
        expect(page.locator("#steps")).not_to_contain_text("thread mom")
        expect(steps.last).to_contain_text("Tried: typed “hello there” — it did not work")
        expect(page.locator("#steps")).not_to_contain_text("Waiting for a person")
        expect(page.locator("#task-now")).to_have_text("An operator (operator) stopped this task.")
    finally:
        kairos_server.api("POST", f"/api/tasks/{tid}/abort", operator)


def start_a_task_no_app_fits(page, kairos_server):
    """Starts "Book me a flight to Paris" from the form on sim-4 (at the home screen), at
    γ 0; returns the agent's question "Which app should I use…" in the chat."""
    page.goto(kairos_server.url + "/tasks/")
    page.fill("textarea[name=instruction]", "Book me a flight to Paris")
    page.select_option("select[name=device]", label="sim-4")  # at the home screen
    page.fill("input[name=threshold]", "0")
    page.click("button:has-text('Start task')")
    return page.locator("#chat li.from-agent", has_text="Which app should I use")


def test_a_failed_task_says_why(login, kairos_server):
    """Issue 15, item 8: the agent's reason, not only "Could not finish."."""
    from playwright.sync_api import expect

    page = login("user")
    # No app fits: the user is asked which app, with the phone's apps as quick replies
    # (issue 27); an answer that names none leaves nothing to do.
    question = start_a_task_no_app_fits(page, kairos_server)
    expect(question).to_be_visible(timeout=30_000)
    expect(question.get_by_role("button", name="Maps")).to_be_visible()
    page.fill("#chat-text", "I don't have a travel app")
    page.click("#chat-form button[type=submit]")
    expect(page.locator("#task-status")).to_have_text("Failed", timeout=30_000)
    expect(page.locator("#task-now")).to_contain_text("No installed app fits the goal")
    expect(page.locator("#chat li.from-system").last).to_contain_text(
        "Could not finish after 1 step: the agent believes this cannot be done")
    expect(page.locator("#steps li").last).to_contain_text("Gave up")
    page.reload()
    expect(page.locator("#task-now")).to_contain_text("No installed app fits the goal")
    expect(page.locator("#final-screen")).to_be_visible()
    expect(page.locator("#live-screen-note")).to_contain_text("The screen when the task ended")
    expect(page.locator("#task-now")).not_to_contain_text("..")
    save_screenshot(page, "task-failed")


def test_an_answer_sent_before_the_page_is_connected_goes_once_it_is(login, kairos_server):
    """Issue 23.8: the page can show the question (drawn by the server) before its socket
    is open; an answer sent then was refused ("Not connected; reconnecting … try again")
    and never went. Here the page's socket connects only once the answer has been sent."""
    import asyncio

    from playwright.sync_api import expect

    free_phone(kairos_server, "sim-4")
    page = login("user")
    question = start_a_task_no_app_fits(page, kairos_server)
    expect(question).to_be_visible(timeout=30_000)

    # Playwright runs the handler on its own loop: awaiting holds the page's socket in
    # CONNECTING until the test sets the event.
    may_connect = asyncio.Event()

    async def connect_when_told(ws):
        await may_connect.wait()
        ws.connect_to_server()

    page.route_web_socket(re.compile(r"/ws/tasks/"), connect_when_told)
    page.reload()
    # task.js has bound the chat (it turns the drawn quick replies into its own buttons).
    expect(question.get_by_role("button", name="Maps")).to_have_attribute("type", "button")
    page.fill("#chat-text", "I don't have a travel app")
    page.click("#chat-form button[type=submit]")
    expect(page.locator("#chat li.from-user")).to_have_count(0)

    may_connect.set()
    expect(page.locator("#chat li.from-user")).to_contain_text("I don't have a travel app")
    expect(page.locator("#chat-text")).to_have_value("")
    expect(page.locator("#chat-error")).to_be_hidden()
    expect(page.locator("#task-status")).to_have_text("Failed", timeout=30_000)


def test_a_finished_task_stays_finished_when_an_older_update_arrives_late(login, kairos_server):
    """Issue 23.8, found by a loaded run: the page said "Could not finish…" and offered the
    verdict, but its badge said "Running" — a "running" update sent before the failure
    reached the page after it (updates come from the worker and from the answer's
    request, and nothing orders them across the two). A finished task never runs again,
    so a late update of an earlier state must not change the page. Here every update to
    "failed" is followed by such a late copy."""
    import json

    from playwright.sync_api import expect

    def relay_with_a_late_copy(ws):
        server = ws.connect_to_server()

        def to_page(message):
            ws.send(message)
            try:
                data = json.loads(message)
            except (TypeError, ValueError):
                return
            if data.get("type") == "task.updated" and (data.get("task") or {}).get(
                    "status") == "failed":
                data["task"]["status"] = "running"
                ws.send(json.dumps(data))

        server.on_message(to_page)

    free_phone(kairos_server, "sim-4")
    page = login("user")
    page.route_web_socket(re.compile(r"/ws/tasks/"), relay_with_a_late_copy)
    question = start_a_task_no_app_fits(page, kairos_server)
    expect(question.get_by_role("button", name="Maps")).to_have_attribute("type", "button",
                                                                          timeout=30_000)
    page.fill("#chat-text", "I don't have a travel app")
    page.click("#chat-form button[type=submit]")
    expect(page.locator("#task-now")).to_contain_text("Could not finish", timeout=30_000)
    expect(page.locator("#verdict-form")).to_be_visible()
    expect(page.locator("#task-status")).to_have_text("Failed")


def test_a_task_from_the_form_runs_at_the_phones_gamma_an_admin_set(login, kairos_server):
    """Issue 26.3: the form sent the installation default whatever the phone's γ; issue
    23.6: an end user may not go below it."""
    from playwright.sync_api import expect

    free_phone(kairos_server, "sim-5")
    admin = login("admin")
    admin.goto(kairos_server.url + "/review/calibration/")
    row = admin.locator("tr[data-device='sim-5']")
    row.locator("input[name=gamma]").fill("5")
    row.get_by_role("button", name="Set").click()
    expect(admin.locator("tr[data-device='sim-5'] td").nth(1)).to_have_text("5")
    user_token = kairos_server.token("user")
    task_id = None
    try:
        page = login("user")
        page.goto(kairos_server.url + "/tasks/")
        page.select_option("select[name=device]", label="sim-5")
        caution = page.locator("input[name=threshold]")
        expect(caution).to_have_value("")
        expect(caution).to_have_attribute("placeholder", "phone's γ: 5")
        expect(page.locator("#threshold-note")).to_have_text(
            "Caution: sim-5's γ, 5, unless you change it (you may raise it, not lower it).")

        # Lower than the admin's γ: refused, with the reason, and nothing starts.
        page.fill("textarea[name=instruction]", "Turn on Wi-Fi")
        caution.fill("0")
        page.click("button:has-text('Start task')")
        expect(page.locator(".flash li.error")).to_contain_text(
            "threshold 0 is below the γ of 5 set for 'sim-5'")

        # Left alone: the task runs at the phone's γ.
        page.goto(kairos_server.url + "/tasks/")
        page.select_option("select[name=device]", label="sim-5")
        page.fill("textarea[name=instruction]", "Turn on Wi-Fi")
        page.click("button:has-text('Start task')")
        page.wait_for_url(re.compile(r"/tasks/[0-9a-f-]{36}/$"))
        task_id = page.url.rstrip("/").rsplit("/", 1)[-1]
        code, task = kairos_server.api("GET", f"/api/tasks/{task_id}", user_token)
        assert code == 200 and task["threshold"] == 5.0
    finally:
        if task_id:
            kairos_server.api("POST", f"/api/tasks/{task_id}/abort", user_token)
        admin.goto(kairos_server.url + "/review/calibration/")
        row = admin.locator("tr[data-device='sim-5']")
        row.locator("input[name=gamma]").fill("")
        row.get_by_role("button", name="Set").click()
        expect(admin.locator("tr[data-device='sim-5'] td").nth(1)).to_have_text("default")
