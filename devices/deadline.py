"""A total deadline for a blocking call (issue 11, item 9). Pure Python.

Socket timeouts are per read: a peer that sends a byte now and then never trips them.
``call_within`` runs the call on a thread of its own and gives up on it after its whole
time; the caller then drops the connection the abandoned thread holds, so that thread
ends at the peer's next byte or close, and the next call starts on a fresh one.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")


class DeadlinePassed(Exception):
    """The call did not finish within its deadline; it may still be running."""


def call_within(seconds: float, call: Callable[[], T], name: str = "bounded-call") -> T:
    """``call()``, or :class:`DeadlinePassed` after ``seconds``; its own errors pass through."""
    box: dict[str, Any] = {}
    finished = threading.Event()

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 — handed back to the caller
            box["error"] = exc
        finally:
            finished.set()

    threading.Thread(target=run, daemon=True, name=name).start()
    if not finished.wait(max(0.0, seconds)):
        raise DeadlinePassed(f"no answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]
