"""Test configuration.

The suite runs against the embedded default (in-memory channel layer and broker, the
device host in-process) on whichever database DATABASE_URL names (SQLite otherwise).
Tests marked ``services`` start the full stack — real Redis, a Celery worker process and a
device-host process — and need DATABASE_URL (PostgreSQL) and REDIS_URL: without them they
are skipped with a message, or fail when KAIROS_REQUIRE_SERVICES=1.
"""
from __future__ import annotations

import json
import os
from typing import Any

import pytest

# kairos_web.test_settings moved REDIS_URL aside: the full-stack tests use it, the rest
# run embedded.
SERVICES_REDIS_URL = os.environ.get("KAIROS_TEST_REDIS_URL", "")
REQUIRE_SERVICES = os.environ.get("KAIROS_REQUIRE_SERVICES") == "1"


def missing_services() -> list[str]:
    return [name for name, value in (("DATABASE_URL", os.environ.get("DATABASE_URL")),
                                     ("REDIS_URL", SERVICES_REDIS_URL)) if not value]


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """SQLite: the test database is a WAL file (kairos_web/settings.py). A run whose threads
    still held connections when the file was dropped leaves its ``-wal`` and ``-shm``
    beside it; they go before the database is created (a stale log must never be replayed
    into a new file of the same name) and after the run."""
    from pathlib import Path

    from django.conf import settings

    database = settings.DATABASES["default"]
    name = (database.get("TEST") or {}).get("NAME")

    def clear() -> None:
        if database["ENGINE"].endswith("sqlite3") and name:
            for suffix in ("-wal", "-shm"):
                Path(f"{name}{suffix}").unlink(missing_ok=True)

    clear()
    yield
    clear()


@pytest.fixture(autouse=True)
def _services_gate(request):
    """Skip (or, with KAIROS_REQUIRE_SERVICES=1, fail) full-stack tests without services."""
    if request.node.get_closest_marker("services") is None:
        return
    missing = missing_services()
    if missing:
        why = f"needs {' and '.join(missing)} (real services); set them or run .ci/run"
        if REQUIRE_SERVICES:
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(autouse=True)
def _media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


# --- the product's own loop, driven inline ------------------------------------------

class InlineSteps:
    """Collects scheduled steps instead of sending them to Celery; ``drain`` runs them."""

    def __init__(self) -> None:
        from collections import deque

        self.pending = deque()

    def __call__(self, task_id: str, index: int) -> None:
        self.pending.append((task_id, index))

    def drain(self, limit: int = 100) -> list[str]:
        from agents.runtime.services import steps

        outcomes = []
        while self.pending and limit:
            limit -= 1
            outcomes.append(steps.run_step(*self.pending.popleft()))
        return outcomes


@pytest.fixture
def phones():
    """An in-process device host with the simulated phones sim-1 and sim-2."""
    from devices.host import LocalDeviceClient, build_sim_host, set_device_client

    host = build_sim_host(["sim-1", "sim-2"])
    set_device_client(LocalDeviceClient(host))
    yield host
    set_device_client(None)


@pytest.fixture
def inline_steps():
    from agents.runtime.services import lifecycle

    runner = InlineSteps()
    lifecycle.set_step_scheduler(runner)
    yield runner
    lifecycle.set_step_scheduler(None)


@pytest.fixture
def demo(db, phones):
    """seed_demo's users and devices."""
    from django.contrib.auth.models import User
    from django.core.management import call_command

    call_command("seed_demo", "--password", "pw-for-tests-1", stdout=open(os.devnull, "w"))
    return {name: User.objects.get(username=name) for name in ("operator", "user", "admin")}


class ScriptedBackend:
    """A backend that proposes what a test scripted, in order (a stand-in model)."""

    name = "scripted"
    script: list = []

    def __init__(self, **_):
        pass

    def propose(self, ctx):
        from agents.brain.backends.base import Proposal

        if not ScriptedBackend.script:
            return Proposal(action=None, error="script exhausted")
        return ScriptedBackend.script.pop(0)(ctx) if callable(ScriptedBackend.script[0]) \
            else ScriptedBackend.script.pop(0)


@pytest.fixture
def scripted():
    """``scripted([proposal, …])`` makes tasks with backend 'scripted' propose those."""
    from agents.brain.backends import register_backend

    register_backend("scripted", ScriptedBackend)

    def _set(proposals):
        ScriptedBackend.script = list(proposals)

    yield _set
    ScriptedBackend.script = []


@pytest.fixture(scope="session", autouse=True)
def _close_connections_of_the_async_thread(django_db_setup):
    """Consumers' ORM calls in async tests run on asgiref's single shared thread, which
    keeps its own database connection; close it so the test database can be dropped."""
    yield
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


# --- the JSON API through Django's test client -----------------------------------------

@pytest.fixture
def api(client, demo):
    """``api(method, path, user="operator", body=None)`` → (status, JSON body or None).

    Authenticates with a Bearer token of the demo ``user`` (anonymous when None).
    """
    from frontend.models import ApiToken

    def call(method: str, path: str, user: str | None = "operator", body: Any = None):
        headers = {}
        if user:
            _, token = ApiToken.issue(demo[user])
            headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
        response = getattr(client, method)(path, data=json.dumps(body) if body is not None
                                           else None, content_type="application/json",
                                           **headers)
        return response.status_code, response.json() if response.content else None
    return call
