"""The pages' forms take the same hostile input as the API and answer with a message,
never a 500 (issue 11.10: the console's edit form, the task and chat forms)."""
from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from agents.runtime.models import Message, Task
from tests.world import build_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return build_world()


def _as(user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.mark.parametrize("x", ["inf", "1e400", "-Infinity", "9" * 400, "nan"])
def test_an_edit_with_an_impossible_coordinate_is_explained_on_the_ticket_page(world, x):
    client = _as(world.users["operator"])
    response = client.post(f"/console/tickets/{world.params['ticket_id']}/act",
                           {"decision": "edit", "type": "CLICK", "x": x, "y": "5"})
    assert response.status_code == 302 and "/console/tickets/" in response["Location"]
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert any("needs an integer 'x'" in m for m in shown), shown


def test_a_nul_byte_in_the_task_and_chat_forms_is_refused_with_a_message(world):
    # (A browser's form cannot carry a lone surrogate: it is sent as UTF-8.)
    bad = "\x00"
    client = _as(world.users["owner"])
    before = Task.objects.count()
    response = client.post("/tasks/", {"instruction": f"Turn on Wi-Fi{bad}", "device": "sim-2"})
    assert response.status_code == 400 and Task.objects.count() == before
    response = client.post("/tasks/", {"instruction": "Turn on Wi-Fi", "device": f"sim-2{bad}"})
    assert response.status_code == 400 and Task.objects.count() == before
    assert "the form field &#x27;device&#x27; contains a NUL" in response.content.decode()
    response = client.post(f"/tasks/{world.params['task_id']}/", {"text": f"hi{bad}"})
    assert response.status_code == 400 and not Message.objects.filter(text__startswith="hi")


# --- NUL in any query or form field of any page (issue 23.4) -------------------------
# PostgreSQL refuses NUL in text (psycopg.DataError): every page's filters and forms used
# to hand it to the database. Every field any page, the review, the console or the admin
# reads, on every page route of the authorization table, as the admin (who reaches them
# all) and as an operator; each must answer a 4xx, never a 5xx or a dropped response.

QUERY_FIELDS = ("q", "device", "operator", "backend", "status", "kind", "reason", "decision",
                "since", "until", "min_conf", "max_conf", "sort", "page", "step", "format",
                "episodes", "by", "next", "o", "p", "e", "_changelist_filters",
                "groups__id__exact", "status__exact", "scope", "gamma")
FORM_FIELDS = ("decision", "assignee", "answer", "text", "type", "x", "y", "direction",
               "app", "target", "ticket", "step", "instruction", "device", "threshold",
               "backend", "scope", "gamma", "abort", "username", "password", "next",
               "csrfmiddlewaretoken", "name", "status")
ADMIN_PAGES = ("/admin/agents/task/", "/admin/agents/ticket/", "/admin/auth/user/",
               "/admin/devices/device/", "/admin/frontend/apitoken/",
               "/admin/agents/trainingrecord/", "/admin/auth/group/")


def _page_urls(world) -> list[tuple[str, str]]:
    from tests.test_authorization import TABLE

    urls = []
    for route, methods in TABLE.items():
        if route.startswith("/api/") or route.startswith("^api") or "WS" in methods:
            continue
        for method, row in methods.items():
            urls.append((method, world.url(route, row)))
    urls += [("GET", page) for page in ADMIN_PAGES]
    urls += [("POST", "/admin/auth/user/add/"), ("POST", "/admin/agents/task/")]
    # Last: a logout that goes through would leave the rest to an anonymous client.
    return sorted(urls, key=lambda u: u[1] == "/logout/")


@pytest.mark.parametrize("role", ["admin", "operator"])
def test_a_nul_in_any_query_or_form_field_of_any_page_is_a_4xx(world, role):
    client = _as(world.users[role])
    failures, server_errors = [], []
    for method, url in _page_urls(world):
        fields = QUERY_FIELDS if method == "GET" else FORM_FIELDS
        for field in fields:
            for value in ("\x00", "a\x00b"):
                try:
                    if method == "GET":
                        response = client.get(url, {field: value})
                    else:
                        response = client.post(url, {field: value, "decision": "reassign",
                                                     "scope": "device"} | {field: value})
                    body = b"".join(response) if response.streaming else response.content
                except Exception as exc:  # a streamed body that broke off half-way
                    server_errors.append(f"{method} {url} {field}: {exc!r}"[:200])
                    continue
                if response.status_code >= 500:
                    server_errors.append(f"{method} {url} {field}: {response.status_code}")
                if response.status_code != 400 or b"NUL" not in body:
                    failures.append(f"{method} {url} {field}={value!r}: "
                                    f"{response.status_code}")
    assert not server_errors, f"{len(server_errors)} × 5xx: {server_errors[:20]}"
    assert not failures, f"{len(failures)} answers were not a 400 naming the NUL: " \
                         f"{failures[:20]}"


def test_the_issues_nul_cases_are_400_with_the_field_named(world):
    admin = _as(world.users["admin"])
    operator = _as(world.users["operator"])
    for field in ("q", "device", "operator", "backend"):
        response = admin.get("/review/", {field: "\x00"})
        assert response.status_code == 400
        assert f"the query parameter &#x27;{field}&#x27; contains a NUL" in \
            response.content.decode()
    response = admin.get("/review/facets", {"q": "\x00"}, HTTP_ACCEPT="application/json")
    assert response.status_code == 400 and "NUL" in response.json()["detail"]
    assert admin.get("/admin/agents/task/", {"status": "\x00"}).status_code == 400
    assert admin.get("/review/export.zip", {"q": "\x00"}).status_code == 400
    response = admin.post("/review/calibration/", {"scope": "device", "device": "\x00",
                                                   "gamma": "3"})
    assert response.status_code == 400
    response = operator.post(f"/console/tickets/{world.params['ticket_id']}/act",
                             {"decision": "reassign", "assignee": "\x00"})
    assert response.status_code == 400 and "form field &#x27;assignee&#x27;" in \
        response.content.decode()
