"""Who may do what: every route × {anonymous, owner, other end user, operator, admin}.

The routes come from the URL conf (pages, files), the OpenAPI document (every API
operation) and the WebSocket routes; ``TABLE`` writes down, once, what each role gets.
``test_every_route_has_a_row`` fails for a route without a row (and for a row whose route
is gone), so a new page or endpoint cannot ship without its access rule.

To add a route: add ``TABLE[route] = {METHOD: Row((anonymous, owner, other, operator,
admin))}`` with ``route`` spelled as the failing test prints it (Django's pattern, or
``/api/...`` as in the OpenAPI document). Path parameters are filled from
``World.params`` by name (``task_id``, ``ticket_id``, ``device_id``, …); add one there if
your route needs a new kind of object, or give the row a concrete ``url``. A POST row may
carry a ``body`` (JSON for the API, form fields for pages). Answers are HTTP statuses;
for sockets ``OPEN`` or the close code.

The owner is the end user whose task (on sim-1, waiting for an operator, with one step,
its screenshot and an open ticket) the parameters name; "other" is a second end user.
The API is called with each role's Bearer token, pages with a session.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from frontend.models import ApiToken
from tests.world import build_world

ROLES = ("anonymous", "owner", "other", "operator", "admin")
OPEN = "open"


@dataclass(frozen=True)
class Row:
    expect: tuple[Any, Any, Any, Any, Any]  # in ROLES order
    body: dict[str, Any] | None = None
    url: str | None = None


E403 = (401, 403, 403, 200, 200)  # the API, operators only
PAGE_LOGIN = 302  # a page redirects anonymous visitors to /login/

TABLE: dict[str, dict[str, Row]] = {
    # --- pages (frontend/urls.py) ---
    "": {"GET": Row((302, 302, 302, 302, 302))},
    "login/": {"GET": Row((200, 200, 200, 200, 200))},
    "logout/": {"POST": Row((302, 302, 302, 302, 302))},
    "healthz": {"GET": Row((200, 200, 200, 200, 200))},
    "tasks/": {"GET": Row((302, 200, 200, 200, 200)),
               "POST": Row((302, 302, 302, 302, 302),
                           body={"instruction": "Turn on Wi-Fi", "device": "sim-2"})},
    "tasks/<uuid:task_id>/": {"GET": Row((302, 200, 404, 200, 200)),
                              "POST": Row((302, 302, 404, 302, 302), body={"text": "hello"})},
    "console/": {"GET": Row((302, 403, 403, 200, 200))},
    "console/tickets/<uuid:ticket_id>/": {"GET": Row((302, 403, 403, 200, 200))},
    "console/tickets/<uuid:ticket_id>/act": {
        "POST": Row((302, 403, 403, 302, 302), body={"decision": "claim"})},
    "review/": {"GET": Row((302, 403, 403, 403, 200))},
    "review/facets": {"GET": Row((302, 403, 403, 403, 200))},
    # The replay is for admins and the operators who work the tickets (issue 13).
    "review/tasks/<uuid:task_id>/": {"GET": Row((302, 403, 403, 200, 200))},
    "review/metrics/": {"GET": Row((302, 403, 403, 403, 200))},
    "review/calibration/": {"GET": Row((302, 403, 403, 403, 200)),
                            "POST": Row((302, 403, 403, 403, 302),
                                         body={"scope": "default", "gamma": "4"})},
    "review/calibration/versions/<int:version_id>/rollback": {
        "POST": Row((302, 403, 403, 403, 302))},
    "review/export.zip": {"GET": Row((302, 403, 403, 403, 200))},
    "review/audit/": {"GET": Row((302, 403, 403, 403, 200))},
    # The experience memory (issue 25): admins only; the import without a file is a 400.
    "review/experience/": {"GET": Row((302, 403, 403, 403, 200))},
    "review/experience/forget": {"POST": Row((302, 403, 403, 403, 302),
                                             body={"app": "com.kairos.settings"})},
    "review/experience/export.json": {
        "GET": Row((302, 403, 403, 403, 200),
                   url="/review/experience/export.json?app=com.kairos.settings")},
    "review/experience/import": {"POST": Row((302, 403, 403, 403, 400))},
    "favicon.ico": {"GET": Row((301, 301, 301, 301, 301))},
    "^media/(?P<path>.*)$": {"GET": Row((401, 200, 404, 200, 200), url="{screenshot_url}")},
    "admin/": {"GET": Row((302, 302, 302, 302, 200))},  # Django admin: staff only
    # --- the API: unknown routes, the document, and every operation in it ---
    "^api/$": {"GET": Row((404, 404, 404, 404, 404), url="/api/")},
    "^api(?:/(?P<rest>.*))?$": {"GET": Row((404, 404, 404, 404, 404), url="/api/nope")},
    "/api/openapi.json": {"GET": Row((200, 200, 200, 200, 200))},
    "/api/docs": {"GET": Row((200, 200, 200, 200, 200))},
    "/api/devices": {"GET": Row((401, 200, 200, 200, 200))},
    # Operators send an idle phone home (issue 26); sim-2 is idle in the world.
    "/api/devices/{device_id}/home": {"POST": Row((401, 403, 403, 200, 200), url="/api/devices/sim-2/home")},
    "/api/tasks": {"GET": Row((401, 200, 200, 200, 200)),
                   "POST": Row((401, 201, 201, 201, 201),
                               body={"instruction": "Turn on Wi-Fi", "device": "sim-2"})},
    "/api/tasks/{task_id}": {"GET": Row((401, 200, 404, 200, 200))},
    "/api/tasks/{task_id}/abort": {"POST": Row((401, 200, 404, 200, 200))},
    "/api/tasks/{task_id}/messages": {"POST": Row((401, 201, 404, 201, 201),
                                                  body={"text": "hello"})},
    # Only the operator holding the take-over; nobody holds one here.
    "/api/tasks/{task_id}/input": {"POST": Row((401, 403, 404, 403, 403),
                                               body={"action": {"type": "PRESS_HOME"}})},
    # An admin may hand back anyone's take-over (issue 26): here none is on, so 409.
    "/api/tasks/{task_id}/hand_back": {"POST": Row((401, 403, 404, 403, 409))},
    # The owner's verdict: only the owner (an operator who may see the task is refused);
    # the owner's own is 409 here because the task is still running (issue 24).
    "/api/tasks/{task_id}/verdict": {"POST": Row((401, 409, 404, 403, 403),
                                                 body={"right": False, "note": "wrong alarm"})},
    "/api/tickets": {"GET": Row(E403)},
    "/api/tickets/{ticket_id}": {"GET": Row(E403)},
    "/api/tickets/{ticket_id}/claim": {"POST": Row(E403)},
    "/api/tickets/{ticket_id}/release": {"POST": Row((401, 403, 403, 409, 409))},
    "/api/tickets/{ticket_id}/resolve": {"POST": Row(E403, body={"decision": "abort"})},
    "/api/tickets/{ticket_id}/ask": {"POST": Row((401, 403, 403, 201, 201), body={
        "question": "Which size?", "options": ["Small", "Large"]})},
    # --- WebSockets (kairos_web/asgi.py) ---
    "ws/operator/": {"WS": Row((4401, 4403, 4403, OPEN, OPEN))},
    "ws/devices/<uuid:device_id>/screen/": {"WS": Row((4401, OPEN, 4403, OPEN, OPEN))},
    "ws/tasks/<uuid:task_id>/": {"WS": Row((4401, OPEN, 4403, OPEN, OPEN))},
    # Any other socket path: closed with 4404 for everyone, never an HTTP 500 (issue 23.5).
    "^.*$": {"WS": Row((4404, 4404, 4404, 4404, 4404), url="/ws/nope/")},
}


# --- the routes, as the code declares them ---------------------------------------------

def page_routes() -> set[str]:
    """Every route of the URL conf; the admin and the API count as one route each (the
    admin checks staff itself; the API's operations come from its OpenAPI document)."""
    routes: set[str] = set()

    def walk(patterns: list, prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                if pattern.namespace == "admin":
                    routes.add(route)
                elif pattern.namespace != "api":
                    walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                routes.add(route)

    walk(get_resolver().url_patterns, "")
    return routes


def api_operations() -> set[tuple[str, str]]:
    from frontend.api import api

    document = api.get_openapi_schema()
    operations = {(path, method.upper()) for path, item in document["paths"].items()
                  for method in item}
    return operations | {("/api/openapi.json", "GET"), ("/api/docs", "GET")}


def socket_routes() -> set[str]:
    from kairos_web.asgi import websocket_urlpatterns

    return {str(p.pattern) for p in websocket_urlpatterns}


def declared() -> set[tuple[str, str]]:
    """(route, method) pairs the code has; pages and sockets by route only."""
    return api_operations() | {(r, "*") for r in page_routes() | socket_routes()}


def tabled() -> set[tuple[str, str]]:
    return {(route, method if route.startswith("/api/") else "*")
            for route, methods in TABLE.items() for method in methods}


def test_every_route_has_a_row():
    missing = sorted(declared() - tabled())
    stale = sorted(tabled() - declared())
    assert not missing, f"routes without a row in TABLE: {missing}"
    assert not stale, f"rows in TABLE for routes that do not exist: {stale}"


def http_cells() -> list[Any]:
    return [pytest.param(route, method, role, id=f"{method} {route} as {role}")
            for route, methods in TABLE.items() for method in methods if method != "WS"
            for role in ROLES]


@pytest.mark.django_db
@pytest.mark.parametrize("route, method, role", http_cells())
def test_http_route_answers_each_role_as_written(route, method, role):
    world = build_world()
    row = TABLE[route][method]
    user = world.users.get(role)
    client = Client()
    headers: dict[str, str] = {}
    url = world.url(route, row)
    if url.startswith("/api/"):
        if user is not None:
            headers["HTTP_AUTHORIZATION"] = f"Bearer {ApiToken.issue(user)[1]}"
        data = json.dumps(row.body) if row.body is not None else None
        response = client.generic(method, url, data or "", content_type="application/json",
                                  **headers)
    else:
        if user is not None:
            client.force_login(user)
        response = client.get(url) if method == "GET" else client.post(url, row.body or {})
    expected = row.expect[ROLES.index(role)]
    assert response.status_code == expected, (
        f"{method} {url} as {role}: {response.status_code}, TABLE says {expected}: "
        f"{response.content[:300]!r}")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("route", [r for r, m in TABLE.items() if "WS" in m])
async def test_socket_route_answers_each_role_as_written(route, phones):
    from tests.websockets import connect

    world = await database_sync_to_async(build_world)()
    row = TABLE[route]["WS"]
    answers = []
    for role in ROLES:
        socket, answer = await connect(world.url(route, row), world.users.get(role),
                                       refused=row.expect[ROLES.index(role)] != OPEN)
        answers.append(OPEN if answer is True else answer)
        if answer is True:
            await socket.disconnect()
    assert tuple(answers) == row.expect, f"{route}: {answers}"
