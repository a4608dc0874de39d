"""A real adb server on a private port with fake phones connected to it (tests, benches).

The adb binary is the one adbutils finds (``adb`` on PATH, else the one its wheel
bundles). The server runs on a free port so it never meets a developer's own adb server
on 5037; :meth:`close` kills it.
"""
from __future__ import annotations

import os
import socket
import subprocess
import time
from typing import Any

from devices.adb.fake.phone import FakePhone


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakeAdbRig:
    def __init__(self, port: int | None = None):
        import adbutils

        self.adb = adbutils.adb_path()
        self.port = port or free_port()
        self.env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(self.port))
        subprocess.run([self.adb, "start-server"], env=self.env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        self.client = adbutils.AdbClient(host="127.0.0.1", port=self.port, socket_timeout=10)
        self.phones: list[FakePhone] = []

    def attach(self, sim: Any, **kwargs: Any) -> FakePhone:
        """A fake phone on ``sim``, connected (``adb connect``) and in state ``device``."""
        phone = FakePhone(sim, **kwargs)
        self.phones.append(phone)
        self.connect(phone)
        return phone

    def connect(self, phone: FakePhone, timeout: float = 10.0) -> None:
        self.client.connect(phone.serial, timeout=timeout)
        self.wait_state(phone.serial, "device", timeout)

    def state(self, serial: str) -> str | None:
        return {i.serial: i.state for i in self.client.list()}.get(serial)

    def wait_state(self, serial: str, state: str | None, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self.state(serial) != state:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{serial} did not reach adb state {state!r} "
                                   f"(now {self.state(serial)!r})")
            time.sleep(0.05)  # the adb server has no change signal for this client

    def close(self) -> None:
        for phone in self.phones:
            phone.close()
        subprocess.run([self.adb, "kill-server"], env=self.env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)
