"""The smaller holes of issue 23.7, each as a user or an operator of Kairos meets it."""
from __future__ import annotations

import json
import logging
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from agents.brain.backends.base import Proposal
from agents.runtime.models import Task, TaskStatus
from agents.runtime.services import lifecycle
from devices.actions import Action
from devices.models import Device

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


# --- a per-user limit on queued tasks -------------------------------------------------

def test_one_user_may_queue_only_so_many_tasks(api, demo, inline_steps, settings):
    settings.KAIROS_MAX_QUEUED_PER_USER = 2
    lifecycle.create_task(demo["operator"], Device.objects.get(name="sim-1"), "Keep it busy")
    queued = []
    for n in range(2):
        status, body = api("post", "/api/tasks", user="user", body={
            "instruction": f"Turn on Wi-Fi {n}", "device": "sim-1"})
        assert status == 201 and body["status"] == "queued"
        queued.append(body["id"])
    status, body = api("post", "/api/tasks", user="user", body={
        "instruction": "One too many", "device": "sim-1"})
    assert status == 429
    assert "you already have 2 tasks waiting for a phone" in body["detail"]
    assert "KAIROS_MAX_QUEUED_PER_USER" in body["detail"]
    assert not Task.objects.filter(instruction="One too many").exists()

    client = Client()
    client.force_login(demo["user"])
    response = client.post("/tasks/", {"instruction": "One too many", "device": "sim-2"})
    assert response.status_code == 429 and b"waiting for a phone" in response.content

    # Another user is not held back, operators queue batches at will, and aborting one
    # frees a place.
    other = User.objects.create_user("bob", password="x" * 12)
    lifecycle.create_task(other, Device.objects.get(name="sim-1"), "Bob's own")
    for n in range(3):
        status, _ = api("post", "/api/tasks", user="operator", body={
            "instruction": f"Suite task {n}", "device": "sim-1"})
        assert status == 201
    api("post", f"/api/tasks/{queued[0]}/abort", user="user")
    status, body = api("post", "/api/tasks", user="user", body={
        "instruction": "Now there is room", "device": "sim-1"})
    assert status == 201 and body["status"] == TaskStatus.QUEUED


# --- /healthz tells anonymous callers no addresses or roles ----------------------------

def test_healthz_hides_why_a_backend_is_down_from_anonymous_callers(demo, settings, caplog):
    settings.REDIS_URL = "redis://kairos-user@127.0.0.1:9/0"  # nothing listens on port 9
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"db": "ok", "broker": "error", "channel_layer": "ok"}
    assert b"127.0.0.1" not in response.content
    assert any("broker error: " in r.getMessage() and ":9" in r.getMessage()
               for r in caplog.records)  # the reason is in the log

    staff = Client()
    staff.force_login(demo["admin"])
    detail = staff.get("/healthz").json()["broker"]
    assert detail.startswith("error: ") and len(detail) > len("error: ")


# --- check --deploy ---------------------------------------------------------------------

def _check_deploy(**env: str) -> str:
    base = {k: v for k, v in os.environ.items()
            if k not in ("DEBUG", "KAIROS_HTTPS", "DJANGO_SETTINGS_MODULE", "SECRET_KEY")}
    base.update({"DJANGO_SETTINGS_MODULE": "kairos_web.settings", "DEBUG": "0",
                 "KAIROS_HTTPS": "1", "SECURE_HSTS_PRELOAD": "1",
                 "ALLOWED_HOSTS": "kairos.example.org"})
    base.update(env)
    out = subprocess.run([sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT,
                         env=base, capture_output=True, text=True, timeout=120)
    return out.stdout + out.stderr


def test_check_deploy_warns_of_the_fallback_key_and_any_host():
    fallback = _check_deploy()
    assert "kairos.W001" in fallback and "development fallback" in fallback
    anywhere = _check_deploy(SECRET_KEY="k" + "x9Qz!7@pL#2" * 6, ALLOWED_HOSTS="*")
    assert "kairos.W002" in anywhere and "kairos.W001" not in anywhere
    trusting = _check_deploy(SECRET_KEY="k" + "x9Qz!7@pL#2" * 6, KAIROS_TRUSTED_PROXIES="*")
    assert "kairos.W003" in trusting


# --- an oversized body to the API ----------------------------------------------------

def test_an_11_mb_body_gets_a_json_413_and_no_error_line(demo, caplog):
    from frontend.models import ApiToken

    _, token = ApiToken.issue(demo["user"])
    body = json.dumps({"instruction": "x" * (11 * 1024 * 1024), "device": "sim-1"})
    with caplog.at_level(logging.INFO):
        response = Client().post("/api/tasks", body, content_type="application/json",
                                 HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert "the request body is over" in response.json()["detail"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


# --- 403s are one line, not a traceback ------------------------------------------------

def test_a_staff_member_without_permissions_is_refused_without_a_traceback(demo, caplog):
    clerk = User.objects.create_user("clerk", password="x" * 12, is_staff=True)
    client = Client()
    client.force_login(clerk)
    with caplog.at_level(logging.WARNING):
        response = client.get("/admin/agents/task/")
    assert response.status_code == 403
    refusals = [r for r in caplog.records if getattr(r, "status_code", None) == 403]
    assert refusals and all(r.exc_info is None for r in refusals)
    assert "Traceback" not in caplog.text


# --- typed text on disk is private -------------------------------------------------------

def test_the_action_log_and_phone_states_are_readable_by_their_owner_only(tmp_path):
    from devices.host import attach_journal, build_sim_host

    previous = os.umask(0o022)
    journal = tmp_path / "devices"
    host = build_sim_host(["p1"])
    attach_journal(host, journal)
    host.handle("p1", "perform", {"action": {"type": "OPENAPP", "app": "Messages"},
                                  "origin": {"task": "t1", "step": 0}})
    assert stat.S_IMODE(journal.stat().st_mode) == 0o700
    assert stat.S_IMODE((journal / "actions.jsonl").stat().st_mode) == 0o600
    assert stat.S_IMODE((journal / "p1.state.json").stat().st_mode) == 0o600
    os.umask(previous)


def test_step_screenshots_are_readable_by_their_owner_only(
        demo, scripted, inline_steps, django_capture_on_commit_callbacks):
    previous = os.umask(0o022)
    scripted([lambda ctx: Proposal(Action("PRESS_HOME"), confidence=5)])
    with django_capture_on_commit_callbacks(execute=True):
        task = lifecycle.create_task(demo["user"], Device.objects.get(name="sim-1"),
                                     "Go home", threshold=0, backend="scripted")
    with django_capture_on_commit_callbacks(execute=True):
        inline_steps.drain(limit=1)
    step = task.steps.exclude(screenshot="").first()
    path = Path(step.screenshot.path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    os.umask(previous)


# --- the document declares clean strings ----------------------------------------------

def _request_strings(document):
    """Every string schema a request may carry: parameters and bodies."""
    components = document["components"]["schemas"]
    found = []

    def walk(schema, where):
        if isinstance(schema, list):
            for item in schema:
                walk(item, where)
        elif isinstance(schema, dict):
            if "$ref" in schema:
                walk(components[schema["$ref"].rsplit("/", 1)[-1]], where)
            types = schema.get("type")
            if (types == "string" or isinstance(types, list) and "string" in types) \
                    and "enum" not in schema and "const" not in schema:
                found.append((where, schema))
            for key, value in schema.items():
                if key == "properties":
                    for name, sub in value.items():
                        walk(sub, f"{where}.{name}")
                elif isinstance(value, (dict, list)) and key not in ("enum", "required"):
                    walk(value, where)

    for path, item in document["paths"].items():
        for method, operation in item.items():
            for parameter in operation.get("parameters", []):
                walk(parameter["schema"], f"{method} {path} {parameter['name']}")
            for media in operation.get("requestBody", {}).get("content", {}).values():
                walk(media["schema"], f"{method} {path} body")
    return found


def test_every_request_string_in_the_document_excludes_nul(client):
    document = client.get("/api/openapi.json").json()
    strings = _request_strings(document)
    assert len(strings) > 10
    for where, schema in strings:
        pattern = schema.get("pattern")
        assert pattern, f"{where}: a string without a pattern"
        assert not re.search(pattern, "a\x00b"), f"{where} allows NUL"
    instruction = document["components"]["schemas"]["TaskIn"]["properties"]["instruction"]
    assert re.search(instruction["pattern"], "Text Sam 🙂")
    assert re.search(instruction["pattern"], "  \ufeff ")
    for blank in ("   ", "\t\n", "\u3000\xa0"):
        assert not re.search(instruction["pattern"], blank)


# --- X-Forwarded-For is believed only from trusted proxies --------------------------------

def _right_password_after_failures_from_claimed_addresses(url: str) -> int:
    """Five wrong passwords, each claiming another client address in X-Forwarded-For
    (as a local proxy passing the client's header on would), then the right one."""
    import httpx

    from tests.frontend.conftest import PASSWORD

    with httpx.Client(base_url=url, timeout=30) as client:
        client.get("/login/")
        token = client.cookies["csrftoken"]
        for n in range(5):
            client.post("/login/", data={"username": "operator", "password": "wrong",
                                         "csrfmiddlewaretoken": token},
                        headers={"X-Forwarded-For": f"198.51.100.{n}"})
        return client.post("/login/", data={"username": "operator", "password": PASSWORD,
                                            "csrfmiddlewaretoken": token},
                           headers={"X-Forwarded-For": "198.51.100.99"}).status_code


@pytest.mark.django_db(transaction=False)
def test_serve_trusts_no_forwarded_address_unless_told(tmp_path):
    from tests.frontend.conftest import running_server

    with running_server(tmp_path / "default") as server:
        assert _right_password_after_failures_from_claimed_addresses(server.url) == 429
    with running_server(tmp_path / "proxied", KAIROS_TRUSTED_PROXIES="127.0.0.1") as server:
        # Behind a proxy named in KAIROS_TRUSTED_PROXIES each client is its own address.
        assert _right_password_after_failures_from_claimed_addresses(server.url) == 302
