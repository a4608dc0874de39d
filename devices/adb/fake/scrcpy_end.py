"""The scrcpy 3.3.4 server's device end, on a simulated phone.

As the real server with ``tunnel_forward=true``: the first connection to
``localabstract:scrcpy_<scid>`` is the video socket and gets one dummy byte, then the
64-byte device name, then the codec meta (codec id, width, height) and the packets; the
second connection is the control socket. Frames are the simulator's, scaled to the
``max_size`` video size and encoded with libx264; a touch whose frame size is not the
current video size is dropped silently, as the server does.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from PIL import Image

from devices.adb import scrcpy
from devices.adb.fake.adbd import Stream
from devices.sim.render import render_ops

logger = logging.getLogger(__name__)


class ScrcpyDeviceEnd:
    def __init__(self, phone: Any, options: dict[str, str], max_fps: int = 60):
        self.phone = phone
        info = phone.sim.info
        self.device_size = (info.width, info.height)
        self.video_size = scrcpy.image_size_for(info.width, info.height,
                                                int(options.get("max_size", "0")))
        self.max_fps = min(max_fps, int(options.get("max_fps", "0")) or max_fps)
        self.dead = threading.Event()
        self._sockets: list[Stream] = []
        self.sent: dict[int, float] = {}  # pts -> perf_counter when its packet was encoded
        self.last_sent_pts: int | None = None
        self.encoded_frame = -1  # the simulator frame number last encoded
        self.dropped_touches = 0
        self._touch_down: tuple[int, int, float] | None = None
        self.landscape = False  # the phone turned a quarter turn left (ROTATE_90)
        self._rotated = threading.Event()

    def rotate(self) -> None:
        """The phone turns to landscape: as the real server does, the encoder restarts at
        the new size and the stream goes on with a new config packet (no new codec meta)."""
        self.landscape = not self.landscape
        self.video_size = (self.video_size[1], self.video_size[0])
        self._rotated.set()

    def accept(self, stream: Stream) -> None:
        self._sockets.append(stream)
        if len(self._sockets) == 1:
            self._video(stream)
        elif len(self._sockets) == 2:
            self._control(stream)

    def kill(self) -> None:
        self.dead.set()
        for stream in self._sockets:
            stream.close()

    # --- video ---------------------------------------------------------------------------
    def _video(self, stream: Stream) -> None:
        width, height = self.video_size
        encoder = scrcpy.VideoEncoder(width, height, fps=self.max_fps)
        stream.send(b"\x00")  # the dummy byte of a forward tunnel
        stream.send(scrcpy.device_meta(self.phone.adbd.model))
        stream.send(scrcpy.codec_meta(width, height))
        stream.send(scrcpy.packet_header(None, len(encoder.config), config=True)
                    + encoder.config)
        sim = self.phone.sim
        started = time.perf_counter()
        last = -1
        min_gap = 1.0 / self.max_fps
        next_at = 0.0
        while not self.dead.is_set() and not stream.closed:
            if self._rotated.is_set():
                self._rotated.clear()
                width, height = self.video_size
                encoder = scrcpy.VideoEncoder(width, height, fps=self.max_fps)
                stream.send(scrcpy.packet_header(None, len(encoder.config), config=True)
                            + encoder.config)
                last = -1  # send the turned screen now
            frame = sim.wait_for_frame(last, 0.2) if last >= 0 else sim.latest_frame()
            if frame is None:
                continue
            wait = next_at - time.perf_counter()
            if wait > 0:  # max_fps: the server never sends faster
                time.sleep(wait)
            number = sim.frame_number  # read first: the image is at least this new
            # the screen as pixels only (observe() would also JPEG-encode it, for nothing)
            image = render_ops(sim.view().ops, self.device_size[0], self.device_size[1],
                               sim.scale)
            last = number
            if self.landscape:
                image = image.transpose(Image.Transpose.ROTATE_90)
            if image.size != (width, height):
                image = image.resize((width, height))
            pts = int((time.perf_counter() - started) * 1_000_000)
            for packet in encoder.encode(image, pts):
                sent_at = time.perf_counter()
                self.sent[pts] = sent_at
                self.last_sent_pts = pts
                if self.phone.on_sent is not None:
                    self.phone.on_sent(pts, sent_at)
                stream.send(scrcpy.packet_header(pts, len(packet.data),
                                                 key_frame=packet.key_frame) + packet.data)
            self.encoded_frame = number
            next_at = time.perf_counter() + min_gap

    # --- control -------------------------------------------------------------------------
    def _control(self, stream: Stream) -> None:
        buf = bytearray()
        while not self.dead.is_set():
            chunk = stream.recv(65536, timeout=0.5)
            if not chunk:
                if stream.closed:
                    return
                continue
            buf += chunk
            while True:
                parsed = scrcpy.parse_control_message(buf)
                if parsed is None:
                    break
                message, used = parsed
                del buf[:used]
                self.apply(message)

    def apply(self, message: dict[str, Any]) -> None:
        phone = self.phone
        kind = message["type"]
        if kind == "touch":
            if (message["width"], message["height"]) != self.video_size:
                self.dropped_touches += 1  # the real server ignores stale-size touches
                return
            dev_w, dev_h = self.device_size
            if self.landscape:  # the landscape screen is (dev_h x dev_w); back to portrait
                u = message["x"] * dev_h / self.video_size[0]
                v = message["y"] * dev_w / self.video_size[1]
                x, y = round(dev_w - 1 - v), round(u)
            else:
                x = round(message["x"] * dev_w / self.video_size[0])
                y = round(message["y"] * dev_h / self.video_size[1])
            if message["action"] == scrcpy.MOTION_DOWN:
                self._touch_down = (x, y, time.perf_counter())
            elif message["action"] == scrcpy.MOTION_UP and self._touch_down:
                x0, y0, t0 = self._touch_down
                self._touch_down = None
                phone.gesture(x0, y0, x, y, (time.perf_counter() - t0) * 1000)
        elif kind == "key" and message["action"] == scrcpy.KEY_UP:
            if message["keycode"] == scrcpy.KEYCODE_A and message["metastate"] & 0x1000:
                phone.select_all()
            else:
                phone.key(message["keycode"])
        elif kind == "text":
            if message["text"]:
                phone.type_text(message["text"])
        elif kind == "clipboard" and message["paste"]:
            phone.type_text(message["text"])
        elif kind == "back" and message["action"] == scrcpy.KEY_UP:
            phone.key(scrcpy.KEYCODE_BACK)
        elif kind == "start_app":
            phone.open_app(message["name"].lstrip("?+"))
