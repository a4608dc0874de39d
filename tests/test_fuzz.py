"""Fuzzing every API operation and every socket message shape (issue 11.10).

Hypothesis draws requests from the OpenAPI document's operations (real or garbage ids,
query values, JSON bodies built from the documented fields with hostile values: NUL
bytes, lone surrogates, "inf", "1e400", 400 nines, huge and deep values; raw bodies that
are not JSON) and frames for the three sockets (binary, empty, malformed, every message
type with hostile fields). Whatever comes in: no 5xx, no traceback in the log, a socket
answers instead of dropping. Fixed budget for CI: ``KAIROS_FUZZ_EXAMPLES`` (default 300
HTTP requests and 120 socket frames), derandomised so a failure reproduces; set
``KAIROS_FUZZ_SEED`` for a different stream. Runs on PostgreSQL where DATABASE_URL names it.
"""
from __future__ import annotations

import functools
import json
import logging
import os
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from frontend.models import ApiToken
from tests.world import build_world

EXAMPLES = int(os.environ.get("KAIROS_FUZZ_EXAMPLES", "300"))
SEED = int(os.environ.get("KAIROS_FUZZ_SEED", "20261123"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize="KAIROS_FUZZ_SEED" not in os.environ,
                suppress_health_check=list(HealthCheck), database=None)
FUZZ_SOCKETS = settings(FUZZ, max_examples=max(10, EXAMPLES * 2 // 5))

HOSTILE_TEXT = ["\x00", "a\x00b", "\ud800", "x\udfffy", "inf", "-Infinity", "NaN", "1e400",
                "9" * 400, "", " ", "../../../../etc/passwd", "<script>alert(1)</script>",
                "x" * 5000, "'; DROP TABLE agents_task; --", "\u202e", "🙂", "%00", "null"]
DANGEROUS_TEXT = ["\x00", "a\x00b", "\ud800", "x\udfffy", "inf", "1e400", "9" * 400, "x" * 5000]
HOSTILE_NUMBERS = [0, -1, 2**63, -(2**63) - 1, 10**400, 1e308, -1e308, 0.5, True]

text = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=40))
scalar = st.one_of(st.none(), st.booleans(), text, st.sampled_from(HOSTILE_NUMBERS),
                   st.integers(), st.floats(allow_nan=False, allow_infinity=False))
json_value = st.recursive(scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)), max_leaves=12)
action = st.one_of(json_value, st.fixed_dictionaries(
    {"type": st.one_of(st.sampled_from(["CLICK", "LONG_CLICK", "TYPE", "SCROLL", "OPENAPP",
                                        "PRESS_BACK", "tap", "SWIPE", "COMPLETE"]), text)},
    optional={"x": scalar, "y": scalar, "text": scalar, "direction": scalar, "app": scalar,
              "element": scalar}))


@functools.cache
def _document() -> dict[str, Any]:
    from frontend.api import api

    return api.get_openapi_schema()


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    document = _document()
    return [(method.upper(), path, spec) for path, item in document["paths"].items()
            for method, spec in item.items()]


def _body_schema(spec: dict[str, Any]) -> dict[str, Any]:
    ref = (spec.get("requestBody", {}).get("content", {}).get("application/json", {})
           .get("schema", {}).get("$ref", ""))
    return _document()["components"]["schemas"][ref.rsplit("/", 1)[-1]] if ref else {}


# A valid value per body field: a request starts valid, then some fields turn hostile,
# so the hostile value reaches the code behind the first check.
VALID = {"instruction": "Turn on Wi-Fi", "device": "sim-1", "text": "hello",
         "action": {"type": "CLICK", "x": 10, "y": 10}, "decision": "edit", "answer": "yes",
         "threshold": 4, "backend": "heuristic", "suite": "toggles", "suite_task": "wifi_on",
         "right": False, "note": "not what I asked",
         "question": "Which size?", "options": ["Small", "Large"]}


def field_value(name: str) -> st.SearchStrategy:
    known = {"decision": st.sampled_from(["approve", "edit", "takeover", "answer", "abort"]),
             "device": st.sampled_from(["sim-1", "sim-2"]), "action": action,
             "suite": st.sampled_from(["toggles", "nope", "../../../../etc/passwd", "/etc/passwd"]),
             "backend": st.sampled_from(["heuristic", "oracle", "nope"])}
    return st.one_of(st.sampled_from(DANGEROUS_TEXT), st.sampled_from(HOSTILE_TEXT),
                     known.get(name, text), scalar, json_value)


# The budget is shared by the operations, each fuzzed on its own so every one gets tried.
PER_OPERATION = max(10, EXAMPLES // len(_operations()))
FUZZ_PER_OPERATION = settings(FUZZ, max_examples=PER_OPERATION)


def _quote(value: str) -> str:
    """Percent-encoded as a client would send it (a lone surrogate as its UTF-8 bytes)."""
    from urllib.parse import quote

    return quote(value.encode("utf-8", "surrogatepass"), safe="")


@st.composite
def requests(draw: Any, world: Any, operation: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    method, path, spec = operation
    params = {"task_id": draw(st.one_of(st.just(world.params["task_id"]), text)),
              "ticket_id": draw(st.one_of(st.just(world.params["ticket_id"]), text)),
              "device_id": draw(st.one_of(st.just(world.params["device_id"]),
                                          st.just("sim-2"), text))}
    url = path.format(**{k: _quote(v) for k, v in params.items()})
    query = {}
    for parameter in spec.get("parameters", []):
        if parameter["in"] == "query" and draw(st.booleans()):
            query[parameter["name"]] = draw(st.one_of(st.sampled_from(
                ["open", "running", "resolved", "bogus"]), text))
    schema = _body_schema(spec)
    fields = list(schema.get("properties", {}))
    body: Any = None
    if method != "GET":
        kind = draw(st.sampled_from(["some", "some", "all", "all", "json", "raw"]))
        if kind in ("some", "all"):
            data = {f: VALID[f] for f in schema.get("required", [])}
            if kind == "all":  # one dangerous string in every field at once
                value = draw(st.sampled_from(DANGEROUS_TEXT))
                data.update({name: value for name in fields})
            elif fields:
                for name in draw(st.lists(st.sampled_from(fields), min_size=1, max_size=2,
                                          unique=True)):
                    data[name] = draw(field_value(name))
            body = json.dumps(data, ensure_ascii=True)
        elif kind == "json":
            body = json.dumps(draw(json_value))
        else:
            body = draw(st.sampled_from([b"", b"{", b"\xff\xfe\x00binary", b"[" * 5000,
                                         b'{"instruction": 1e400, "device": "sim-1"}',
                                         b'{"text": "\\ud800"}', b"null"]))
    return {"method": method, "url": url, "query": query, "body": body,
            "role": draw(st.sampled_from(["anonymous", "owner", "other", "operator", "admin"]))}


class Tracebacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def error_log():
    handler = Tracebacks()
    logging.getLogger().addHandler(handler)
    yield handler.records
    logging.getLogger().removeHandler(handler)


@pytest.mark.django_db
@pytest.mark.parametrize("operation", _operations(), ids=lambda o: f"{o[0]} {o[1]}")
def test_fuzzed_api_requests_never_get_a_5xx_or_a_traceback(operation, phones, error_log):
    from django.test import Client

    world = build_world()
    tokens = {role: ApiToken.issue(user)[1] for role, user in world.users.items()}
    client = Client(raise_request_exception=False)
    answers: list[tuple[int, str]] = []

    @FUZZ_PER_OPERATION
    @seed(SEED)
    @given(request=requests(world, operation))
    def fuzz(request: dict[str, Any]) -> None:
        headers = {}
        if request["role"] != "anonymous":
            headers["HTTP_AUTHORIZATION"] = f"Bearer {tokens[request['role']]}"
        url = request["url"]
        if request["query"]:
            url += "?" + "&".join(f"{_quote(k)}={_quote(v)}" for k, v in request["query"].items())
        response = client.generic(request["method"], url, request["body"] or b"",
                                  content_type="application/json", **headers)
        answers.append((response.status_code, f"{request['method']} {url[:120]}"))
        assert response.status_code < 500, (response.status_code, request, response.content[:500])
        if response.content:
            assert "detail" in response.json() or response.status_code < 400, response.content

    fuzz()
    server_errors = [a for a in answers if a[0] >= 500]
    print(f"fuzz: {operation[0]} {operation[1]}: {len(answers)} requests, "
          f"{len(server_errors)} answered 5xx, "
          f"{len(error_log)} errors logged")
    assert len(answers) >= PER_OPERATION // 2, "the fuzzer tried too few requests"
    assert not server_errors and not error_log, [r.getMessage() for r in error_log[:5]]


SOCKET_TYPES = ["input", "chat.message", "ping", "nope", "", None]
frames = st.one_of(
    st.fixed_dictionaries({"bytes": st.binary(max_size=64)}),
    st.fixed_dictionaries({"text": st.sampled_from(["", " ", "{", "[" * 20000, "null", "1e400",
                                                    '"\\ud800"', '{"type": "\\u0000"}'])}),
    st.builds(lambda content: {"text": json.dumps(content)}, st.fixed_dictionaries(
        {"type": st.one_of(st.sampled_from(SOCKET_TYPES), text)},
        optional={"action": action, "text": scalar, "ticket": scalar})),
    st.builds(lambda content: {"text": json.dumps(content)}, json_value),
)


@pytest.mark.django_db(transaction=True)
def test_fuzzed_socket_frames_are_answered_and_never_drop_the_socket(phones, error_log):
    from agents.runtime.models import Ticket
    from agents.runtime.services import tickets
    from tests.websockets import connect

    world = build_world()
    # The operator holds a take-over, so "input" frames reach the phone.
    tickets.resolve_ticket(Ticket.objects.get(), world.users["operator"], "takeover")
    sockets = [("/ws/operator/", "operator"),
               (f"/ws/devices/{world.params['device_id']}/screen/", "operator"),
               (f"/ws/devices/{world.params['device_id']}/screen/", "owner"),
               (f"/ws/tasks/{world.params['task_id']}/", "owner"),
               (f"/ws/tasks/{world.params['task_id']}/", "operator")]
    sent: list[str] = []

    async def one(path: str, role: str, frame: dict[str, Any]) -> None:
        socket, ok = await connect(path, world.users[role])
        assert ok is True
        try:
            await socket.send_input({"type": "websocket.receive", **frame})
            while True:  # events and frames may come first; an answer to the frame must come
                output = await socket.receive_output(timeout=10)
                assert output["type"] == "websocket.send", (path, frame, output)
                text_out = output.get("text") or ""
                if any(f'"type": "{t}"' in text_out for t in ("error", "pong", "input.done")) \
                        or (frame.get("text") and '"chat.message"' in text_out):
                    break
        finally:
            await socket.disconnect()

    @FUZZ_SOCKETS
    @seed(SEED)
    @given(target=st.sampled_from(sockets), frame=frames)
    def fuzz(target: tuple[str, str], frame: dict[str, Any]) -> None:
        sent.append(target[0])
        async_to_sync(one)(*target, frame)

    fuzz()
    print(f"fuzz: {len(sent)} socket frames, {len(error_log)} errors logged")
    assert not error_log, [r.getMessage() for r in error_log[:5]]
