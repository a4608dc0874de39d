"""A fake phone's ``adbd``: the adb transport protocol over TCP (what ``adb connect`` reaches).

Messages are a 24-byte little-endian header (command, arg0, arg1, data length, data
checksum, command ^ 0xffffffff) and a payload (AOSP ``packages/modules/adb/protocol.txt``).
The host's CNXN is answered with our own (no AUTH: a phone with auth off); each OPEN of a
service becomes a stream with ids on both sides; WRTE is acknowledged by OKAY and a side
may send its next WRTE only after the OKAY for the previous one.
"""
from __future__ import annotations

import logging
import socket
import struct
import threading
from typing import Callable

logger = logging.getLogger(__name__)

A_SYNC, A_CNXN, A_OPEN, A_OKAY = 0x434E5953, 0x4E584E43, 0x4E45504F, 0x59414B4F
A_CLSE, A_WRTE, A_AUTH, A_STLS = 0x45534C43, 0x45545257, 0x48545541, 0x534C5453
A_VERSION = 0x01000001
MAX_PAYLOAD = 256 * 1024
HEADER = struct.Struct("<6I")


class Stream:
    """One open service on the fake phone: bytes in from the host, bytes out to it."""

    def __init__(self, conn: "_Connection", local_id: int, remote_id: int):
        self.conn = conn
        self.local_id = local_id
        self.remote_id = remote_id
        self._okay = threading.Event()
        self._okay.set()
        self._incoming = bytearray()
        self._cond = threading.Condition()
        self.closed = False
        self.on_data: Callable[[bytes], None] | None = None

    # host -> phone
    def _deliver(self, data: bytes) -> None:
        if self.on_data is not None:
            self.on_data(data)
            return
        with self._cond:
            self._incoming += data
            self._cond.notify_all()

    def recv(self, size: int, timeout: float | None = None) -> bytes:
        """Up to ``size`` bytes from the host; b"" once the stream is closed."""
        with self._cond:
            self._cond.wait_for(lambda: self._incoming or self.closed, timeout)
            out = bytes(self._incoming[:size])
            del self._incoming[:size]
            return out

    def recv_exactly(self, size: int) -> bytes:
        out = bytearray()
        while len(out) < size:
            chunk = self.recv(size - len(out))
            if not chunk:
                raise EOFError("stream closed")
            out += chunk
        return bytes(out)

    # phone -> host
    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self.closed:
            chunk = bytes(view[:self.conn.max_payload])
            view = view[len(chunk):]
            # flow control: one WRTE in flight per stream, until the host's OKAY
            while not self._okay.wait(0.5):
                if self.closed:
                    raise EOFError("stream closed")
            self._okay.clear()
            self.conn.send_message(A_WRTE, self.local_id, self.remote_id, chunk)
        if self.closed:
            raise EOFError("stream closed")

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.conn.send_message(A_CLSE, self.local_id, self.remote_id)
            self.conn.forget(self)
        with self._cond:
            self._cond.notify_all()
        self._okay.set()

    def _closed_by_host(self) -> None:
        self.closed = True
        with self._cond:
            self._cond.notify_all()
        self._okay.set()


ServiceHandler = Callable[[str, Stream], bool]


class _Connection:
    def __init__(self, sock: socket.socket, device: "FakeAdbDevice"):
        self.sock = sock
        self.device = device
        self.max_payload = MAX_PAYLOAD
        self.streams: dict[int, Stream] = {}
        self._send_lock = threading.Lock()
        self._next_id = 1
        self.alive = True

    def send_message(self, command: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        header = HEADER.pack(command, arg0, arg1, len(data), sum(data) & 0xFFFFFFFF,
                             command ^ 0xFFFFFFFF)
        with self._send_lock:
            try:
                self.sock.sendall(header + data)
            except OSError:
                self.alive = False

    def forget(self, stream: Stream) -> None:
        self.streams.pop(stream.local_id, None)

    def _read(self, size: int) -> bytes:
        out = bytearray()
        while len(out) < size:
            chunk = self.sock.recv(size - len(out))
            if not chunk:
                raise EOFError
            out += chunk
        return bytes(out)

    def serve(self) -> None:
        try:
            while True:
                command, arg0, arg1, length, _check, magic = HEADER.unpack(self._read(24))
                if magic != command ^ 0xFFFFFFFF:
                    raise EOFError("bad adb message magic")
                data = self._read(length) if length else b""
                self._dispatch(command, arg0, arg1, data)
        except (EOFError, OSError):
            pass
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        self.alive = False
        for stream in list(self.streams.values()):
            stream._closed_by_host()
        self.streams.clear()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def _dispatch(self, command: int, arg0: int, arg1: int, data: bytes) -> None:
        if command == A_CNXN:
            self.max_payload = min(MAX_PAYLOAD, arg1 or MAX_PAYLOAD)
            self.send_message(A_CNXN, A_VERSION, MAX_PAYLOAD, self.device.banner().encode())
        elif command == A_OPEN:
            service = data.rstrip(b"\x00").decode("utf-8", "replace")
            local_id = self._next_id
            self._next_id += 1
            stream = Stream(self, local_id, arg0)
            self.streams[local_id] = stream
            handler = self.device.open_service(service, stream)
            if handler is None:
                self.streams.pop(local_id, None)
                self.send_message(A_CLSE, 0, arg0)
                return
            self.send_message(A_OKAY, local_id, arg0)
            threading.Thread(target=self._run_service, args=(handler, stream), daemon=True,
                             name=f"fake-adbd-{service[:20]}").start()
        elif command == A_OKAY:
            stream = self.streams.get(arg1)
            if stream is not None:
                stream.remote_id = arg0
                stream._okay.set()
        elif command == A_WRTE:
            stream = self.streams.get(arg1)
            if stream is not None:
                self.send_message(A_OKAY, stream.local_id, arg0)
                stream._deliver(data)
        elif command == A_CLSE:
            stream = self.streams.pop(arg1, None)
            if stream is not None:
                stream._closed_by_host()

    @staticmethod
    def _run_service(handler: Callable[[Stream], None], stream: Stream) -> None:
        try:
            handler(stream)
        except EOFError:
            pass
        except Exception:
            logger.exception("fake adbd: a service failed")
        finally:
            stream.close()


class FakeAdbDevice:
    """Listens on 127.0.0.1:``port`` for the adb server (``adb connect 127.0.0.1:port``).

    ``services`` maps an OPEN's service string to a handler run in its own thread, or
    None to refuse it. :meth:`unplug` drops every connection and refuses new ones (a
    pulled cable); :meth:`plug` accepts again.
    """

    def __init__(self, open_service: Callable[[str, Stream], Callable[[Stream], None] | None],
                 *, model: str = "Kairos_Fake", port: int = 0):
        self.open_service = open_service
        self.model = model
        self._listener = socket.create_server(("127.0.0.1", port))
        self.port = self._listener.getsockname()[1]
        self._connections: list[_Connection] = []
        self._plugged = threading.Event()
        self._plugged.set()
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True, name="fake-adbd-accept").start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def banner(self) -> str:
        return (f"device::ro.product.name=kairos_fake;ro.product.model={self.model};"
                "ro.product.device=kairos_fake;features=shell_v2,cmd")

    def _accept(self) -> None:
        while not self._stopped:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            if not self._plugged.is_set():
                sock.close()
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Connection(sock, self)
            self._connections.append(conn)
            threading.Thread(target=conn.serve, daemon=True, name="fake-adbd-conn").start()

    def unplug(self) -> None:
        self._plugged.clear()
        for conn in self._connections:
            conn.shutdown()
        self._connections.clear()

    def plug(self) -> None:
        self._plugged.set()

    def close(self) -> None:
        self._stopped = True
        self.unplug()
        self._listener.close()


def shell_v2_packet(kind: int, data: bytes) -> bytes:
    """A ``shell,v2`` packet: id (1 stdout, 2 stderr, 3 exit) and a u32 LE length."""
    return struct.pack("<BI", kind, len(data)) + data


def parse_service(service: str) -> tuple[str, list[str], str]:
    """``"shell,v2,raw:ls"`` -> ("shell", ["v2", "raw"], "ls")."""
    head, _, rest = service.partition(":")
    name, *args = head.split(",")
    return name, args, rest

