"""Which phones the local adb server sees, and which came or went since the last look.

Pure Python. ``connect`` addresses (Wi-Fi adb, ``host:port``) are re-``adb connect``-ed
each round while they are missing, so a phone that dropped off the network comes back
on its own once it is reachable again.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)


@dataclass
class PhoneChanges:
    appeared: list[str] = field(default_factory=list)  # now in state "device"
    gone: list[str] = field(default_factory=list)  # unplugged, offline, unauthorized…
    states: dict[str, str] = field(default_factory=dict)


class AdbWatcher:
    def __init__(self, client: Any, connect: tuple[str, ...] = ()):
        self.client = client
        self.connect = connect
        self.ready: set[str] = set()
        self.server_error: str | None = None

    def poll(self) -> PhoneChanges:
        try:
            states = {info.serial: info.state for info in self.client.list()}
            for address in self.connect:
                if states.get(address) != "device":
                    try:
                        self.client.connect(address, timeout=2)
                    except Exception as exc:
                        logger.info("adb connect %s: %s", address, exc)
            self.server_error = None
        except Exception as exc:  # no adb server: every phone is gone
            if self.server_error is None:
                logger.warning("no adb server answers: %s", exc)
            self.server_error = str(exc)
            states = {}
        now = {serial for serial, state in states.items() if state == "device"}
        changes = PhoneChanges(appeared=sorted(now - self.ready),
                               gone=sorted(self.ready - now), states=states)
        self.ready = now
        return changes

    def forget(self, serial: str) -> None:
        """Treat ``serial`` as new next time (its driver failed to start)."""
        self.ready.discard(serial)
