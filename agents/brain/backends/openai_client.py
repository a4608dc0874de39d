"""The ``openai`` backend's endpoint: the client, one chat completion with bounded retries
within a deadline (:meth:`EndpointMixin._chat`), and what each call cost.

Split out of :mod:`agents.brain.backends.openai`, which re-exports the public names here;
:class:`agents.brain.backends.openai.OpenAIBackend` inherits :class:`EndpointMixin`.
Pure Python (no Django).
"""
from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai

from agents.brain.tokens import TokenUsage, measure_call
from devices.deadline import DeadlinePassed, call_within

# The backend's logger: retries are logged under the name they always had.
log = logging.getLogger("agents.brain.backends.openai")

# Status codes worth another try: rate limits, server errors, and the two transient 4xx
# the openai client itself retries (request timeout, conflict).
RETRY_STATUSES = frozenset({408, 409, 429})


class ModelCallError(Exception):
    """The endpoint failed and retries ran out (or the failure is not worth retrying)."""

    def __init__(self, message: str, attempts: int, usage: TokenUsage | None = None):
        super().__init__(message)
        self.attempts = attempts
        self.usage = usage or TokenUsage()


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff: ``backoff · 2^attempt``, capped, with 10% jitter."""

    max_retries: int = 3
    backoff: float = 0.5
    backoff_max: float = 8.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        base = min(self.backoff_max, self.backoff * (2 ** attempt))
        if retry_after is not None and retry_after > base:
            base = min(self.backoff_max, retry_after)
        return base + random.uniform(0, base * 0.1)


@dataclass
class _Call:
    """One chat completion: the answers and what it cost."""

    contents: list[str]
    logprobs: list[Any]  # per choice: logprobs.content or None
    usage: TokenUsage


@dataclass
class _StepState:
    usage: TokenUsage = field(default_factory=TokenUsage)
    calls: int = 0
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


class EndpointMixin:
    """The endpoint half of :class:`agents.brain.backends.openai.OpenAIBackend`: it reads
    the settings the backend's ``__init__`` sets (``base_url``, ``api_key``, ``model``,
    ``timeout``, ``deadline``, ``retry``, ``temperature``, ``max_tokens``, ``top_logprobs``,
    ``extra_body``, ``_client``)."""

    # --- the endpoint -------------------------------------------------------------------

    @property
    def client(self) -> openai.OpenAI:
        if self._client is None:
            if not self.api_key:
                raise ModelCallError(
                    "no API key: set KAIROS_LLM_API_KEY or OPENAI_API_KEY "
                    "(or KAIROS_LLM_BASE_URL for a local server)", 0)
            # Retries are ours (counted, logged, ending in a model_error ticket), so the
            # client's own are off.
            self._client = openai.OpenAI(
                base_url=self.base_url,
                api_key=self.api_key,
                timeout=httpx.Timeout(self.timeout, connect=min(10.0, self.timeout)),
                max_retries=0,
            )
        return self._client

    def _chat(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        n: int = 1,
        temperature: float | None = None,
        logprobs: bool = False,
        image_sizes: tuple[tuple[int, int], ...] = (),
        max_tokens: int | None = None,
    ) -> _Call:
        """One chat completion with bounded retries; raises :class:`ModelCallError`."""
        kwargs: dict[str, Any] = {
            "model": model or self.model,
            "messages": messages,
            "temperature": self.temperature if temperature is None else temperature,
            "max_tokens": self.max_tokens if max_tokens is None else max_tokens,
        }
        if n > 1:
            kwargs["n"] = n
        if logprobs:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = self.top_logprobs
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        attempts = self.retry.max_retries + 1
        last = ""
        deadline = time.monotonic() + self.deadline
        for attempt in range(attempts):
            retry_after: float | None = None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                last = f"{last}; no answer within the call's deadline of {self.deadline:g} s"
                attempts = attempt
                break
            # The attempt is bounded by the request timeout, or by what is left of the
            # call's deadline. A person reads the limit in a ticket: it names the configured
            # value, never the few microseconds short of it that ``remaining`` is
            # (issue 23, item 8: "within 1.99999 s").
            by_deadline = remaining < self.timeout
            bound = remaining if by_deadline else self.timeout
            try:
                client = self.client
                response = call_within(bound, lambda: client.chat.completions.create(**kwargs),
                                       name="model-call")
            except DeadlinePassed:
                # The abandoned request's thread ends at the server's next byte: its client
                # is closed, and the next attempt opens a fresh one.
                self._client = None
                client.close()
                if by_deadline:
                    last = (f"timed out: no complete answer within {self.deadline:g} s"
                            if attempt == 0 else "timed out: no complete answer within the "
                            f"call's deadline of {self.deadline:g} s")
                    attempts = attempt + 1
                    break  # nothing of the deadline is left for another attempt
                last = f"timed out: no complete answer within {self.timeout:g} s"
            except openai.APIStatusError as exc:
                last = f"HTTP {exc.status_code}: {_error_text(exc)}"
                if logprobs and exc.status_code == 400 and "logprob" in last.lower():
                    # Some servers refuse logprobs; the step still gets an answer and the
                    # estimator falls back to the model's own score.
                    kwargs.pop("logprobs", None)
                    kwargs.pop("top_logprobs", None)
                    logprobs = False
                    continue
                if exc.status_code not in RETRY_STATUSES and exc.status_code < 500:
                    raise ModelCallError(last, attempt + 1) from None
                retry_after = _retry_after(exc.response)
            except openai.APITimeoutError:
                last = f"timed out after {self.timeout:g} s"
            except openai.APIConnectionError as exc:
                last = f"connection failed: {exc.__cause__ or exc}"
            except ModelCallError:
                raise
            except Exception as exc:  # noqa: BLE001 — a malformed body, a client bug
                raise ModelCallError(f"unusable response: {type(exc).__name__}: {exc}", attempt + 1) from None
            else:
                return self._read(response, messages, image_sizes, model or self.model)
            if attempt + 1 < attempts:
                delay = min(self.retry.delay(attempt, retry_after),
                            max(0.0, deadline - time.monotonic()))
                log.warning("model call failed (%s); retry %d/%d in %.2f s",
                            last, attempt + 1, self.retry.max_retries, delay)
                time.sleep(delay)
        raise ModelCallError(f"{last} (gave up after {attempts} attempts)", attempts)

    def _read(self, response: Any, messages: list[dict[str, Any]],
              image_sizes: tuple[tuple[int, int], ...], model: str) -> _Call:
        choices = list(getattr(response, "choices", None) or [])
        if not choices:
            raise ModelCallError("the endpoint returned no choices", 1)
        contents: list[str] = []
        logprobs: list[Any] = []
        for choice in choices:
            message = getattr(choice, "message", None)
            content = getattr(message, "content", None)
            contents.append(content if isinstance(content, str) else "")
            lp = getattr(choice, "logprobs", None)
            logprobs.append(getattr(lp, "content", None) if lp is not None else None)
        usage = measure_call(response, messages, contents, model, image_sizes)
        return _Call(contents, logprobs, usage)

    def _call(self, state: _StepState, messages: list[dict[str, Any]], **kwargs: Any) -> _Call:
        state.calls += 1
        result = self._chat(messages, **kwargs)
        state.usage = state.usage + result.usage
        return result


def _error_text(exc: openai.APIStatusError) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
        return json.dumps(body)[:300]
    return str(exc.message if hasattr(exc, "message") else exc)[:300]


def _retry_after(response: httpx.Response | None) -> float | None:
    if response is None:
        return None
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
