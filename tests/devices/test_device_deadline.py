"""Every device call has a total deadline, even when Redis trickles (issue 11, item 9)."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from devices.host import DeviceError, RedisDeviceClient


@pytest.fixture
def trickling_redis():
    """A real TCP server speaking just enough RESP: it answers every command one byte
    every 0.3 s, each byte well inside any socket timeout."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while not stop.is_set():
                try:
                    if not conn.recv(65536):
                        return
                    for byte in b"+OK\r\n":
                        if stop.wait(0.3):
                            return
                        conn.sendall(bytes([byte]))
                except OSError:
                    return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"redis://127.0.0.1:{server.getsockname()[1]}/0"
    stop.set()
    server.close()


def test_a_device_call_through_a_trickling_redis_fails_within_its_deadline(trickling_redis):
    client = RedisDeviceClient(trickling_redis, timeout=1.0)
    started = time.monotonic()
    with pytest.raises(DeviceError, match="did not answer 'observe'"):
        client.observe("sim-1")
    took = time.monotonic() - started
    assert took < 1.0 + 2 + 1.0, f"the call took {took:.1f} s"
