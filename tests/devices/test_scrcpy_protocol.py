"""The scrcpy 3.3.4 protocol byte for byte against upstream's own test vectors.

Expected bytes are copied from app/tests/test_control_msg_serialize.c and the header
layout from app/src/demuxer.c at tag v3.3.4 of github.com/Genymobile/scrcpy.
"""
from __future__ import annotations

import hashlib

import pytest

from devices.adb import scrcpy


def test_inject_keycode_matches_upstream() -> None:
    msg = scrcpy.inject_keycode(scrcpy.KEY_UP, scrcpy.KEYCODE_ENTER, repeat=5,
                                metastate=0x41)  # AMETA_SHIFT_ON | AMETA_SHIFT_LEFT_ON
    assert msg == bytes([0x00, 0x01, 0, 0, 0, 0x42, 0, 0, 0, 0x05, 0, 0, 0, 0x41])


def test_inject_text_matches_upstream() -> None:
    assert scrcpy.inject_text("hello, world!") == bytes([0x01, 0, 0, 0, 0x0d]) + b"hello, world!"


def test_inject_text_is_cut_at_300_bytes_without_splitting_a_character() -> None:
    long = scrcpy.inject_text("a" * 400)
    assert long == bytes([0x01, 0x00, 0x00, 0x01, 0x2c]) + b"a" * 300
    accented = scrcpy.inject_text("é" * 200)  # 2 bytes each: 150 fit in 300
    assert accented[1:5] == (300).to_bytes(4, "big")
    assert accented[5:].decode("utf-8") == "é" * 150


def test_inject_touch_event_matches_upstream() -> None:
    msg = scrcpy.inject_touch(scrcpy.MOTION_DOWN, 100, 200, 1080, 1920,
                              pointer_id=0x1234567887654321, pressure=1.0)
    assert msg == bytes([
        0x02, 0x00,
        0x12, 0x34, 0x56, 0x78, 0x87, 0x65, 0x43, 0x21,
        0x00, 0x00, 0x00, 0x64, 0x00, 0x00, 0x00, 0xc8,
        0x04, 0x38, 0x07, 0x80,
        0xff, 0xff,
        0x00, 0x00, 0x00, 0x01,
        0x00, 0x00, 0x00, 0x01,
    ])


def test_inject_scroll_event_matches_upstream() -> None:
    msg = scrcpy.inject_scroll(260, 1026, 1080, 1920, hscroll=16, vscroll=-16, buttons=1)
    assert msg == bytes([
        0x03, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x04, 0x02,
        0x04, 0x38, 0x07, 0x80, 0x7F, 0xFF, 0x80, 0x00, 0x00, 0x00, 0x00, 0x01,
    ])


def test_back_set_clipboard_start_app_and_reset_video_match_upstream() -> None:
    assert scrcpy.back_or_screen_on(scrcpy.KEY_UP) == bytes([0x04, 0x01])
    assert scrcpy.set_clipboard(0x0102030405060708, "hello, world!", paste=True) == bytes(
        [0x09, 1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 0, 0, 0x0d]) + b"hello, world!"
    assert scrcpy.start_app("firefox") == bytes([16, 7]) + b"firefox"
    assert scrcpy.reset_video() == bytes([17])


@pytest.mark.parametrize("message", [
    scrcpy.inject_keycode(scrcpy.KEY_DOWN, scrcpy.KEYCODE_A, 0, scrcpy.META_CTRL_ON),
    scrcpy.inject_text("Grüße, 世界"),
    scrcpy.inject_touch(scrcpy.MOTION_UP, 10, 20, 360, 800),
    scrcpy.inject_scroll(5, 6, 360, 800, 0, -8),
    scrcpy.back_or_screen_on(scrcpy.KEY_DOWN),
    scrcpy.set_clipboard(7, "Ünïcode", paste=True),
    scrcpy.start_app("com.kairos.maps"),
    scrcpy.reset_video(),
])
def test_the_fake_device_end_parses_what_the_client_sends(message: bytes) -> None:
    parsed, used = scrcpy.parse_control_message(message + b"\x99")
    assert used == len(message)
    assert scrcpy.parse_control_message(message[:-1]) is None or len(message) == 1


def test_the_video_packet_header_is_demuxer_c_layout() -> None:
    header = scrcpy.packet_header(None, 36, config=True)
    assert header == bytes([0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 36])
    header = scrcpy.packet_header(0x1234, 9, key_frame=True)
    assert header == bytes([0x40, 0, 0, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 9])
    stream = iter([header + b"x" * 9])
    buf = bytearray(next(stream))

    def recv(n: int) -> bytes:
        out = bytes(buf[:n])
        del buf[:n]
        return out

    packet = scrcpy.read_packet(recv)
    assert (packet.pts, packet.config, packet.key_frame, packet.data) == (0x1234, False, True,
                                                                          b"x" * 9)
    assert scrcpy.device_meta("Pixel 7") == b"Pixel 7" + bytes(57)
    assert scrcpy.codec_meta(1080, 2400) == b"h264" + (1080).to_bytes(4, "big") + \
        (2400).to_bytes(4, "big")


def test_the_pinned_server_jar_is_upstreams_3_3_4() -> None:
    data = scrcpy.verified_server_jar()
    assert len(data) == 90980
    assert hashlib.sha256(data).hexdigest() == scrcpy.SERVER_SHA256


def test_the_decoder_shows_each_frame_as_soon_as_its_packet_arrives() -> None:
    """No one-frame lag: after N packets the decoder has produced N images, the last of
    them being the last frame sent (a parser-fed decoder would still hold it back)."""
    from PIL import Image, ImageDraw

    encoder = scrcpy.VideoEncoder(96, 64)
    decoder = scrcpy.VideoDecoder()
    assert decoder.decode(scrcpy.VideoPacket(None, True, False, encoder.config)) == []
    shown = []
    for n in range(5):
        image = Image.new("RGB", (96, 64), (40 * n, 0, 255 - 40 * n))
        ImageDraw.Draw(image).rectangle((10 * n, 10, 10 * n + 20, 40), fill="white")
        for packet in encoder.encode(image, n * 16_000):
            shown += decoder.decode(packet)
        assert len(shown) == n + 1
    last = shown[-1].to_image()
    assert abs(last.getpixel((5, 5))[0] - 160) < 24  # the 5th frame's colour, not the 4th's
    assert scrcpy.jpeg_to_image(decoder.to_jpeg(shown[-1])).size == (96, 64)
