"""One scrcpy session per phone: the server pushed and started over adb, its video decoded
once, its control socket used for input. Reconnects when the server dies.

Frames are decoded as they arrive (:class:`devices.adb.scrcpy.VideoDecoder`) and the
newest one is kept as a JPEG :class:`~devices.protocol.Frame`; the device host publishes
it to every viewer once. The video size is read from each decoded frame, so a rotation
(the server restarts its encoder with a new size) changes the touch coordinates with it.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any, Callable

from devices.adb import scrcpy
from devices.protocol import Frame

logger = logging.getLogger(__name__)


class ScrcpySession:
    def __init__(self, device: Any, *, max_size: int = 800, max_fps: int = 60,
                 connect_timeout: float = 5.0, on_state: Callable[[bool], None] | None = None):
        self.device = device  # an adbutils AdbDevice
        self.max_size = max_size
        self.max_fps = max_fps
        self.connect_timeout = connect_timeout
        self.on_state = on_state
        self._frame_ready = threading.Condition()
        self._frame: Frame | None = None
        self.frame_pts: int | None = None  # the server's pts of the newest frame
        self.video_size: tuple[int, int] = (0, 0)
        self._control: Any = None
        self._control_lock = threading.Lock()
        self._shell: Any = None
        self._video: Any = None
        self._stop = threading.Event()
        self.up = threading.Event()
        self.restarts = 0
        self._thread: threading.Thread | None = None
        self.on_frame: Callable[[Frame, int | None], None] | None = None
        self.floor = 0  # the highest frame number handed out without the video

    # --- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"scrcpy-{self.device.serial}")
        self._thread.start()

    def wait_up(self, timeout: float) -> bool:
        return self.up.wait(timeout)

    def close(self) -> None:
        self._stop.set()
        self._teardown()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        backoff = 0.2
        while not self._stop.is_set():
            try:
                self._connect()
                backoff = 0.2
                self._read_video()
            except Exception as exc:  # the server died, the phone went away, a bad packet
                if not self._stop.is_set():
                    logger.warning("scrcpy on %s: %s; reconnecting", self.device.serial, exc)
            finally:
                was_up = self.up.is_set()
                self.up.clear()
                self._teardown()
                if was_up and self.on_state:
                    self.on_state(False)
            if self._stop.wait(backoff):
                return
            backoff = min(backoff * 2, 5.0)
            self.restarts += 1

    def _connect(self) -> None:
        from adbutils import Network

        jar = scrcpy.verified_server_jar()
        info = self.device.sync.stat(scrcpy.SERVER_DEVICE_PATH)
        if info.size != len(jar):
            self.device.sync.push(jar, scrcpy.SERVER_DEVICE_PATH)
        scid = random.getrandbits(31)
        self._shell = self.device.shell(scrcpy.server_command(scid, self.max_size, self.max_fps),
                                        stream=True)
        name = scrcpy.socket_name(scid)
        deadline = time.monotonic() + self.connect_timeout
        while True:  # the server needs a moment before it listens
            try:
                video = self.device.create_connection(Network.LOCAL_ABSTRACT, name)
                video.settimeout(self.connect_timeout)
                if video.recv(1) == b"\x00":  # the dummy byte: the server is there
                    break
                video.close()
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise scrcpy.ScrcpyError("the scrcpy server did not start")
            time.sleep(0.1)
        self._video = video
        self._control = self.device.create_connection(Network.LOCAL_ABSTRACT, name)
        recv = video.recv
        scrcpy.read_exactly(recv, scrcpy.DEVICE_NAME_LENGTH)
        codec, width, height = (int.from_bytes(scrcpy.read_exactly(recv, 4), "big")
                                for _ in range(3))
        if codec != scrcpy.CODEC_H264:
            raise scrcpy.ScrcpyError(f"unexpected video codec 0x{codec:08x}")
        self.video_size = (width, height)
        threading.Thread(target=self._drain_control, args=(self._control,), daemon=True,
                         name=f"scrcpy-control-{self.device.serial}").start()

    def _read_video(self) -> None:
        video = self._video
        video.settimeout(None)  # an idle screen sends nothing for a long time
        decoder = scrcpy.VideoDecoder()
        recv = video.recv
        number = 0
        while not self._stop.is_set():
            packet = scrcpy.read_packet(recv)
            for decoded in decoder.decode(packet):
                jpeg = decoder.to_jpeg(decoded)
                number += 1
                frame = Frame(number=number, jpeg=jpeg, width=decoded.width,
                              height=decoded.height)
                with self._frame_ready:
                    # numbers only grow, across reconnects and past the screencap frames
                    # shown before the video was up (viewers drop a frame that goes back)
                    frame.number = max(self._frame.number if self._frame else 0,
                                       self.floor) + 1
                    self._frame = frame
                    self.frame_pts = decoded.pts
                    self.video_size = (decoded.width, decoded.height)
                    self._frame_ready.notify_all()
                if not self.up.is_set():
                    self.up.set()
                    if self.on_state:
                        self.on_state(True)
                if self.on_frame:
                    self.on_frame(frame, decoded.pts)

    def _drain_control(self, control: Any) -> None:
        # device messages (clipboard, acks) are not used; reading keeps the socket flowing
        try:
            while control.recv(4096):
                pass
        except Exception:
            pass

    def _teardown(self) -> None:
        for conn in (self._control, self._video, self._shell):
            try:
                if conn is not None:
                    conn.close()
            except Exception:
                pass
        self._control = self._video = self._shell = None

    # --- frames and control --------------------------------------------------------------
    def latest_frame(self) -> Frame | None:
        with self._frame_ready:
            return self._frame

    def wait_for_frame(self, after: int, timeout: float) -> Frame | None:
        with self._frame_ready:
            if not self._frame_ready.wait_for(
                    lambda: self._frame is not None and self._frame.number > after, timeout):
                return None
            return self._frame

    def send(self, *messages: bytes) -> None:
        with self._control_lock:
            control = self._control
            if control is None or not self.up.is_set():
                raise scrcpy.ScrcpyError("no scrcpy session")
            control.sendall(b"".join(messages))
