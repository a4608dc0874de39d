"""The API contract for callers that get things wrong: anonymous, forbidden, malformed.

CONTRACT "HTTP" and its second-build additions: an anonymous request gets 401, every error
under ``/api/`` is JSON ``{"detail": …}`` (unknown routes and server errors too, with
DEBUG off), and bad input (NUL bytes, lone surrogates, unknown suites, paths outside the
bundled suites) is a 4xx, never a 500. Run on PostgreSQL where DATABASE_URL names it,
which is where NUL bytes used to fail.
"""
from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User

from agents.runtime.models import Task
from devices.host import DeviceError, LocalDeviceClient, set_device_client
from devices.models import Device

pytestmark = pytest.mark.django_db


def test_an_anonymous_post_gets_401_not_a_csrf_failure(demo):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    response = client.post("/api/tasks", data=json.dumps({"instruction": "x", "device": "sim-1"}),
                           content_type="application/json")
    assert response.status_code == 401
    assert response.json() == {"detail": "authentication required"}


def test_a_logged_in_browser_post_without_its_csrf_token_is_still_refused(demo):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(demo["user"])
    response = browser.post("/api/tasks", data=json.dumps({"instruction": "x", "device": "sim-1"}),
                            content_type="application/json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]


def test_an_unknown_api_route_is_a_json_404_with_debug_off(client, settings, api):
    settings.DEBUG = False
    for path in ("/api/nope", "/api/tasks/x/y/z", "/api/"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert response["Content-Type"] == "application/json"
        assert response.json()["detail"]


class BrokenDeviceClient(LocalDeviceClient):
    """A device host with a bug in it: anything but a DeviceError escapes."""

    def call(self, name, op, **args):
        if op == "observe":
            raise RuntimeError("a bug in the device host")
        return super().call(name, op, **args)


class UnreachableDeviceClient(LocalDeviceClient):
    def call(self, name, op, **args):
        if op == "observe":
            raise DeviceError(f"device '{name}' did not answer within 10 s")
        return super().call(name, op, **args)


def _taken_over_task(api, phones, inline_steps, scripted):
    from agents.brain.backends.base import Proposal
    from devices.actions import Action

    scripted([lambda ctx: Proposal(Action("CLICK", x=100, y=100), confidence=1.0)])
    _, task = api("post", "/api/tasks", body={"instruction": "Tap the corner", "device": "sim-1",
                                              "backend": "scripted"})
    inline_steps.drain()
    _, tickets = api("get", "/api/tickets?status=open")
    status, _ = api("post", f"/api/tickets/{tickets[0]['id']}/resolve",
                    body={"decision": "takeover"})
    assert status == 200
    return task["id"]


@pytest.mark.django_db(transaction=True)
def test_a_server_error_under_api_is_json_with_debug_off(settings, api, phones, inline_steps,
                                                         scripted, client):
    task_id = _taken_over_task(api, phones, inline_steps, scripted)
    settings.DEBUG = False
    client.raise_request_exception = False
    set_device_client(BrokenDeviceClient(phones))
    status, body = api("post", f"/api/tasks/{task_id}/input",
                       body={"action": {"type": "PRESS_HOME"}})
    assert status == 500
    assert body == {"detail": "internal server error"}  # no traceback, no internals


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_device_is_a_503_with_the_reason(api, phones, inline_steps, scripted):
    task_id = _taken_over_task(api, phones, inline_steps, scripted)
    set_device_client(UnreachableDeviceClient(phones))
    status, body = api("post", f"/api/tasks/{task_id}/input",
                       body={"action": {"type": "PRESS_HOME"}})
    assert status == 503 and "did not answer" in body["detail"]


def test_devices_lists_only_the_phones_the_user_may_use(api, demo):
    private = Device.objects.create(name="alices-phone")
    private.users.add(User.objects.create_user("alice", password="x" * 12))
    _, as_user = api("get", "/api/devices", user="user")
    _, as_operator = api("get", "/api/devices", user="operator")
    assert {d["name"] for d in as_user} == {"sim-1", "sim-2"}
    assert {d["name"] for d in as_operator} == {"sim-1", "sim-2", "alices-phone"}


@pytest.mark.parametrize("path", ["/api/tasks?status=bogus", "/api/tickets?status=bogus"])
def test_an_unknown_status_filter_is_a_400_naming_the_choices(api, path):
    status, body = api("get", path)
    assert status == 400 and ("running" in body["detail"] or "resolved" in body["detail"])


def test_aborting_a_finished_task_says_so_in_english(api, phones, inline_steps):
    _, task = api("post", "/api/tasks", user="user",
                  body={"instruction": "Turn on Wi-Fi", "device": "sim-1"})
    assert api("post", f"/api/tasks/{task['id']}/abort", user="user")[0] == 200
    status, body = api("post", f"/api/tasks/{task['id']}/abort", user="user")
    assert status == 409 and body["detail"] == "the task has already ended (aborted)"


NUL, SURROGATE = "\x00", "\ud800"


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
@pytest.mark.parametrize("method, path, body", [
    ("post", "/api/tasks", {"instruction": "Turn on Wi-Fi{}", "device": "sim-1"}),
    ("post", "/api/tasks", {"instruction": "Turn on Wi-Fi", "device": "sim-1{}"}),
    ("post", "/api/tasks", {"instruction": "Turn on Wi-Fi", "device": "sim-1",
                            "backend": "heuristic{}"}),
    ("get", "/api/tasks?status=running{}", None),
    ("get", "/api/tickets?status=open{}", None),
    ("get", "/api/tasks/{}", None),
])
def test_a_nul_byte_or_lone_surrogate_anywhere_is_a_400(api, phones, inline_steps, bad,
                                                        method, path, body):
    if body is not None:
        body = {k: v.replace("{}", bad) for k, v in body.items()}
    # In a URL the character travels percent-encoded (a surrogate as its UTF-8 bytes).
    status, answer = api(method, path.replace("{}", {NUL: "%00", SURROGATE: "%ED%A0%80"}[bad]),
                         body=body)
    assert status in (400, 404), answer
    assert answer["detail"]
    assert not Task.objects.exists()


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
def test_a_nul_byte_in_a_chat_message_or_answer_is_a_400_and_the_task_goes_on(
        api, phones, inline_steps, bad):
    _, task = api("post", "/api/tasks", user="user",
                  body={"instruction": "Turn on Wi-Fi", "device": "sim-1"})
    status, body = api("post", f"/api/tasks/{task['id']}/messages", user="user",
                       body={"text": f"hello{bad}"})
    assert status == 400 and body["detail"]
    status, body = api("post", f"/api/tasks/{task['id']}/messages", user="user",
                       body={"text": "hello"})
    assert status == 201


@pytest.mark.parametrize("suite, task_id, fragment", [
    ("nope", "wifi_on", "no suite 'nope'"),
    ("../../../../etc/passwd", "x", "no suite"),
    ("/etc/passwd", "x", "no suite"),
    ("toggles", "no_such_task", "has no task 'no_such_task'"),
    ("toggles", None, "suite_task"),
])
def test_a_suite_over_the_api_must_be_bundled_and_have_the_task(api, phones, inline_steps,
                                                               suite, task_id, fragment):
    status, body = api("post", "/api/tasks", body={
        "instruction": "x", "device": "sim-1", "suite": suite, "suite_task": task_id})
    assert status == 404 and fragment in body["detail"], body
    assert not Task.objects.exists()


def test_a_suite_from_the_configured_directory_is_accepted(api, phones, inline_steps, settings,
                                                          tmp_path):
    from devices.sim.suite import BUNDLED_SUITES_DIR

    (tmp_path / "mine.yaml").write_text((BUNDLED_SUITES_DIR / "toggles.yaml").read_text())
    settings.KAIROS_SUITES_DIR = tmp_path
    status, body = api("post", "/api/tasks", body={
        "instruction": "x", "device": "sim-1", "suite": "mine", "suite_task": "wifi_on"})
    assert status == 201, body
    status, body = api("post", "/api/tasks", body={
        "instruction": "x", "device": "sim-1", "suite": "toggles", "suite_task": "wifi_on"})
    assert status == 201, body


@pytest.mark.parametrize("raw, content_type", [
    (b"", "application/json"), (b"{", "application/json"), (b"\xff\xfe\x00", "application/json"),
    (b"[1, 2]", "application/json"), (b'"text"', "application/json"),
    (b"instruction=x", "application/x-www-form-urlencoded"),
])
def test_a_body_that_is_not_a_json_object_is_a_400(client, demo, raw, content_type):
    from frontend.models import ApiToken

    _, token = ApiToken.issue(demo["operator"])
    response = client.generic("POST", "/api/tasks", raw, content_type=content_type,
                              HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 400 and response.json()["detail"]


def test_fields_added_to_the_shared_summaries_reach_the_api(api, phones, inline_steps):
    """The response schemas name the documented fields and pass the others through."""
    from agents.runtime import events

    _, task = api("post", "/api/tasks", user="user",
                  body={"instruction": "Turn on Wi-Fi", "device": "sim-1"})
    summary = events.task_summary(Task.objects.get(id=task["id"]))
    assert set(summary) <= set(task)
    _, listed = api("get", "/api/tasks", user="user")
    assert set(summary) <= set(listed[0])
