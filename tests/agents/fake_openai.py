"""A small, real OpenAI-compatible HTTP server for tests (never the internet).

``FakeOpenAI`` listens on 127.0.0.1 on a free port in a thread and implements
``POST /v1/chat/completions``. Each request body is recorded; each answer comes from a
queue of scripted :class:`Reply` objects (or a callable that builds one from the request),
falling back to ``default``. Replies cover normal completions (several choices, logprobs,
with or without ``usage``), HTTP errors (429, 500 …), non-JSON bodies, and hangs longer
than a client's timeout. A hang waits on an event that :meth:`FakeOpenAI.close` sets, so
tearing the server down never waits for it.

Use the ``fake_openai`` fixture from ``tests/agents/conftest.py``.
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

_TOKEN_RE = re.compile(r"\w+|\s+|[^\w\s]")


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict → JSON; bytes/str sent as is
    headers: dict[str, str] = field(default_factory=dict)
    hang: float = 0.0  # seconds to stall before answering (or until the server closes)
    trickle: float = 0.0  # send the whole answer one byte every this many seconds

    @classmethod
    def completion(
        cls,
        *contents: str,
        logprobs: list[list[dict[str, Any]] | None] | None = None,
        usage: dict[str, int] | None | bool = True,
        model: str = "fake-model",
    ) -> "Reply":
        """A chat completion with one choice per content string."""
        choices = []
        for i, content in enumerate(contents):
            choice: dict[str, Any] = {
                "index": i,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
                "logprobs": None,
            }
            if logprobs is not None and i < len(logprobs) and logprobs[i] is not None:
                choice["logprobs"] = {"content": logprobs[i], "refusal": None}
            choices.append(choice)
        body: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
        }
        if usage is True:
            body["usage"] = {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020}
        elif isinstance(usage, dict):
            body["usage"] = dict(usage, total_tokens=sum(usage.values()))
        return cls(body=body)

    @classmethod
    def error(cls, status: int, message: str = "error", headers: dict[str, str] | None = None) -> "Reply":
        return cls(status=status, headers=dict(headers or {}),
                   body={"error": {"message": message, "type": "fake", "code": status}})

    @classmethod
    def malformed(cls) -> "Reply":
        """A 200 whose body is not JSON at all."""
        return cls(status=200, body=b"<html>gateway says hi</html>",
                   headers={"Content-Type": "application/json"})

    @classmethod
    def hanging(cls, seconds: float = 30.0) -> "Reply":
        """Stall longer than the client's timeout, then answer (if anyone still listens)."""
        return cls(hang=seconds, body=Reply.completion("COMPLETE\nscore: 5").body)


def trickling(every: float = 1.0) -> Reply:
    """A good answer, status line and headers included, one byte every ``every`` seconds:
    each read of a client's gets a byte long before a per-read timeout, so only a total
    deadline ends it."""
    return Reply(trickle=every, body=Reply.completion("Action: COMPLETE\nScore: 5").body)


def logprob_tokens(content: str, alternatives: dict[str, float], at: str | None = None) -> list[dict[str, Any]]:
    """``logprobs.content`` for ``content``: one entry per word/space/punctuation token.

    The token equal to ``at`` (default: the last digit token) gets ``alternatives``
    ({token: logprob}) as its ``top_logprobs``; every other token is certain.
    """
    tokens = _TOKEN_RE.findall(content)
    target = None
    for i, token in enumerate(tokens):
        if (at is not None and token == at) or (at is None and token.isdigit()):
            target = i
    entries = []
    for i, token in enumerate(tokens):
        if i == target:
            top = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in alternatives.items()]
            logprob = alternatives.get(token, max(alternatives.values()))
        else:
            top = [{"token": token, "logprob": 0.0, "bytes": list(token.encode())}]
            logprob = 0.0
        entries.append({"token": token, "logprob": logprob, "bytes": list(token.encode()),
                        "top_logprobs": top})
    return entries


Responder = Callable[[dict[str, Any]], Reply]


class FakeOpenAI:
    """The server. ``base_url`` ends in ``/v1`` as the openai client expects."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.default: Reply | Responder = Reply.completion("Action: COMPLETE\nScore: 5")
        self._queue: deque[Reply | Responder] = deque()
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Reply | Responder) -> None:
        """Queue replies for the next requests, in order."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return list(self.requests)

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FakeOpenAI":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            item = self._queue.popleft() if self._queue else self.default
        return item(body) if callable(item) else item

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 — http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(Reply.error(404, f"no route {self.path}"))
                    return
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._send(Reply.error(400, "request body is not JSON"))
                    return
                with fake._lock:
                    fake.requests.append(body)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                reply = fake._next(body)
                if reply.hang and fake._closing.wait(reply.hang):
                    return  # server closing: drop the connection
                self._send(reply)

            def _send(self, reply: Reply) -> None:
                if isinstance(reply.body, (dict, list)):
                    payload = json.dumps(reply.body).encode()
                elif isinstance(reply.body, str):
                    payload = reply.body.encode()
                else:
                    payload = reply.body or b""
                if reply.trickle:
                    self._trickle(reply, payload)
                    return
                try:
                    self.send_response(reply.status)
                    headers = {"Content-Type": "application/json", **reply.headers}
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _trickle(self, reply: Reply, payload: bytes) -> None:
                head = (f"HTTP/1.1 {reply.status} OK\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(payload)}\r\n\r\n").encode()
                try:
                    for byte in head + payload:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        if fake._closing.wait(reply.trickle):
                            return
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass  # the client gave up: what a deadline is for

        return Handler
