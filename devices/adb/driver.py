"""An Android phone over adb, behind the device protocol (:mod:`devices.protocol`).

* the apps a person can open: the launcher's activities (``cmd package query-activities``
  for MAIN/LAUNCHER), named by their label (the phone's, else the usual label of a known
  package, else the package's last word) — not every package ``pm list packages`` shows;
* the UI tree from ``uiautomator dump``, parsed by :func:`devices.uitree.parse_uiautomator_xml`;
  the foreground app is the package of the dump's first node (``dumpsys window`` without
  one). Where the dump fails ("ERROR: could not get idle state.") or names nothing, the
  screenshot is read instead (:mod:`devices.screenread`: OCR text and switches, as
  detected nodes merged with whatever the tree has);
* the screenshot from the newest scrcpy video frame while a session is up, else
  ``screencap -p``;
* actions through the scrcpy control socket while a session is up (touches, keys, text,
  clipboard paste for non-ASCII text), else ``input`` / ``monkey`` over adb shell;
* every adb call bounded by ``timeout``: a phone that stops answering raises
  :class:`AdbDeviceError` (the host turns it into a ``device_error`` ticket).

Pure Python: no Django. The adb server is reached at ``host:port`` (``KAIROS_ADB_HOST``,
``ANDROID_ADB_SERVER_PORT``).
"""
from __future__ import annotations

import hashlib
import io
import logging
import re
import threading
import time
from typing import Any

from PIL import Image

from devices.actions import (
    CLICK, COMPLETE, IMPOSSIBLE, LONG_CLICK, OPENAPP, PRESS_BACK, PRESS_ENTER, PRESS_HOME,
    SCROLL, TYPE, WAIT, Action, ActionError, ActionOutcome, validate_action,
)
from devices.adb import scrcpy
from devices.adb.video import ScrcpySession
from devices.android_apps import label_for_package
from devices.protocol import AppInfo, DeviceInfo, Frame, Observation
from devices.screenread import read_screen
from devices.uitree import UINode, UITreeError, parse_uiautomator_xml

logger = logging.getLogger(__name__)

DUMP_PATH = "/sdcard/kairos_window_dump.xml"
KEYCODES = {PRESS_BACK: scrcpy.KEYCODE_BACK, PRESS_HOME: scrcpy.KEYCODE_HOME,
            PRESS_ENTER: scrcpy.KEYCODE_ENTER}
KEYCODE_MOVE_END = 123
LONG_PRESS_S = 0.7
SETTLE_S = 1.0  # how long an action may take to show on screen before "unchanged"

LAUNCHER_QUERY = ("cmd package query-activities -a android.intent.action.MAIN "
                  "-c android.intent.category.LAUNCHER")
_FOCUS_RE = re.compile(r"(?:mCurrentFocus|mFocusedApp)=\S+\{[^}]*?\s([A-Za-z][\w.]*)/")


class AdbDeviceError(RuntimeError):
    """The phone did not answer, went away, or refused a command."""


def adb_client(host: str, port: int, timeout: float) -> Any:
    import adbutils

    return adbutils.AdbClient(host=host, port=port, socket_timeout=timeout)


def attached_phones(client: Any) -> dict[str, str]:
    """Serial -> adb state (``device``, ``offline``, ``unauthorized``…) of every phone the
    adb server knows."""
    return {info.serial: info.state for info in client.list()}


def label_for(package: str, label: str | None = None) -> str:
    """What the launcher calls ``package``: the phone's own label when it gives one, else
    the usual label of a standard app (:mod:`devices.android_apps`), else its last word."""
    if label:
        return label
    known = label_for_package(package)
    if known:
        return known
    return package.rsplit(".", 1)[-1].replace("_", " ").capitalize()


def parse_launcher_activities(text: str) -> list[tuple[str, str | None]]:
    """(package, label or None) of each activity in a ``cmd package query-activities``
    answer, in order, each package once. Both forms are read: the full one (blocks with
    ``packageName=`` and ``nonLocalizedLabel=``, usually ``null``: labels are resource
    ids) and ``--brief`` (``package/activity`` lines)."""
    found: dict[str, str | None] = {}
    for block in re.split(r"^\s*Activity #\d+:\s*$", text, flags=re.M)[1:]:
        package = re.search(r"packageName=(\S+)", block)
        if package is None:
            brief = re.search(r"^\s*([A-Za-z][\w.]*)/\S+\s*$", block, flags=re.M)
            if brief is None:
                continue
            name = brief.group(1)
        else:
            name = package.group(1)
        label = re.search(r"nonLocalizedLabel=(.*?)(?:\s+icon=|$)", block, flags=re.M)
        value = label.group(1).strip() if label else ""
        found.setdefault(name, None if value in ("", "null") else value)
    return list(found.items())


def escape_input_text(text: str) -> list[str]:
    """``input text`` arguments typing ``text`` exactly (ASCII only).

    Android's ``input text`` turns ``%s`` into a space and the phone's shell splits and
    expands what it is given. Each chunk is single-quoted for the shell, spaces become
    ``%s``, and a literal ``%s`` is typed as ``%`` then ``s`` in two commands, since
    ``input`` has no escape for it.
    """
    if any(ord(c) > 127 or (ord(c) < 32 and c != "\n") for c in text):
        raise ValueError("input text types printable ASCII only")
    pieces = text.split("%s")
    commands: list[str] = []
    for n, piece in enumerate(pieces):
        chunk = (piece if n == 0 else "s" + piece)
        if n < len(pieces) - 1:
            chunk += "%"
        if chunk:
            encoded = chunk.replace(" ", "%s").replace("'", "'\\''")
            commands.append(f"input text '{encoded}'")
    return commands


class AdbDevice:
    """A phone attached to this machine's adb server, named by its serial."""

    def __init__(self, serial: str, client: Any, *, timeout: float = 10.0,
                 video: bool = True, max_size: int = 800, max_fps: int = 60):
        self.serial = serial
        self.client = client
        self.timeout = timeout
        self.adb = client.device(serial)
        self._lock = threading.RLock()
        width, height = self._screen_size()
        model = self._shell("getprop ro.product.model").strip() or serial
        apps = self._launcher_apps()
        self.info = DeviceInfo(name=serial, width=width, height=height, kind="adb", apps=apps)
        self.model = model
        self.session: ScrcpySession | None = None
        self._still: Frame | None = None  # screencap frames when no video
        if video:
            self.session = ScrcpySession(self.adb, max_size=max_size, max_fps=max_fps,
                                         connect_timeout=timeout)
            self.session.start()

    # --- adb calls, bounded ----------------------------------------------------------------
    def _shell(self, command: str, *, binary: bool = False) -> Any:
        try:
            return self.adb.shell(command, timeout=self.timeout,
                                  encoding=None if binary else "utf-8")
        except Exception as exc:
            raise AdbDeviceError(f"phone {self.serial} did not answer '{command.split()[0]}': "
                                 f"{exc}") from exc

    def _launcher_apps(self) -> tuple[AppInfo, ...]:
        """The apps a person can open, by launcher label; a phone whose ``cmd package``
        cannot list activities (Android < 7) gives its user-installed packages and the
        standard apps among the rest."""
        activities = parse_launcher_activities(self._shell(LAUNCHER_QUERY))
        if not activities:
            def listed(flags: str) -> list[str]:
                return [line.split(":", 1)[1].strip() for line in
                        self._shell(f"pm list packages {flags}".strip()).splitlines()
                        if line.startswith("package:")]
            user = set(listed("-3"))
            activities = [(p, None) for p in listed("")
                          if p in user or label_for_package(p) is not None]
        apps = [AppInfo(label_for(p, label), p) for p, label in activities]
        return tuple(sorted(apps, key=lambda a: (a.name.lower(), a.package)))

    def _screen_size(self) -> tuple[int, int]:
        text = self._shell("wm size")
        sizes = [line.rsplit(":", 1)[1].strip() for line in text.splitlines() if ":" in line]
        if not sizes:
            raise AdbDeviceError(f"phone {self.serial}: cannot read its screen size ({text!r})")
        width, height = (int(v) for v in sizes[-1].split("x"))  # an override wins
        return width, height

    def close(self) -> None:
        if self.session is not None:
            self.session.close()

    @property
    def screen_size(self) -> tuple[int, int]:
        """The screen as the phone holds it now: width and height swap when the video
        turns (a rotation restarts the server's encoder at the turned size). Actions and
        observations are in these pixels."""
        width, height = self.info.width, self.info.height
        if self.streaming and self.session is not None:
            vw, vh = self.session.video_size
            if vw and vh and (vw > vh) != (width > height):
                return height, width
        return width, height

    @property
    def streaming(self) -> bool:
        return self.session is not None and self.session.up.is_set()

    # --- observe -------------------------------------------------------------------------------
    def ui_nodes(self) -> list[UINode]:
        xml = self._shell(f"uiautomator dump {DUMP_PATH} >/dev/null && cat {DUMP_PATH}")
        start = xml.find("<?xml")
        if start < 0:
            start = xml.find("<hierarchy")
        if start < 0:
            raise AdbDeviceError(f"phone {self.serial}: uiautomator dump failed: {xml[:200]!r}")
        try:
            return parse_uiautomator_xml(xml[start:].strip())
        except UITreeError as exc:
            raise AdbDeviceError(f"phone {self.serial}: {exc}") from exc

    def screenshot(self) -> tuple[Image.Image, bytes]:
        """The newest video frame while streaming, else ``screencap``."""
        frame = self.session.latest_frame() if self.streaming and self.session else None
        if frame is not None:
            image = Image.open(io.BytesIO(frame.jpeg))
            image.load()
            return image, frame.jpeg
        png = self._shell("screencap -p", binary=True)
        try:
            image = Image.open(io.BytesIO(png)).convert("RGB")
        except Exception as exc:
            raise AdbDeviceError(f"phone {self.serial}: screencap gave no image") from exc
        scale = 800 / max(image.size)
        if scale < 1:
            image = image.resize((round(image.width * scale), round(image.height * scale)))
        buf = io.BytesIO()
        image.save(buf, format="JPEG", quality=80)
        return image, buf.getvalue()

    def foreground_package(self) -> str:
        """The focused app's package from ``dumpsys window`` ("" when it names none)."""
        match = _FOCUS_RE.search(self._shell("dumpsys window"))
        return match.group(1) if match else ""

    def observe(self) -> Observation:
        with self._lock:
            tree_error = ""
            try:
                nodes = self.ui_nodes()
            except AdbDeviceError as exc:
                # No tree ("could not get idle state" on animated screens): the
                # screenshot below still shows the screen. A phone that is gone fails there.
                nodes, tree_error = [], str(exc)
            image, jpeg = self.screenshot()
            frame = self.latest_frame()
            app = next((n.package for n in nodes if n.package), "") or self.foreground_package()
            width, height = self.screen_size
            nodes, detected = read_screen(nodes, image, width, height, package=app)
            extra: dict[str, Any] = {"serial": self.serial, "streaming": self.streaming}
            if detected:
                extra["detected"] = True  # nodes read from the screenshot (OCR)
            if tree_error:
                extra["tree_error"] = tree_error[:300]
            return Observation(frame=frame.number, width=width, height=height, app=app,
                               nodes=nodes, image=image, jpeg=jpeg, extra=extra)

    # --- frames ------------------------------------------------------------------------------
    def latest_frame(self) -> Frame:
        if self.session is not None:
            frame = self.session.latest_frame()
            if frame is not None:
                return frame
        image, jpeg = self.screenshot()
        number = self._still.number if self._still else 0
        if self._still is None or self._still.jpeg != jpeg:
            video = self.session.latest_frame() if self.session is not None else None
            number = max(number, video.number if video else 0) + 1
            if self.session is not None:
                self.session.floor = max(self.session.floor, number)
        self._still = Frame(number, jpeg, image.width, image.height)
        return self._still

    def wait_for_frame(self, after: int, timeout: float) -> Frame | None:
        if self.session is not None:
            return self.session.wait_for_frame(after, timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            frame = self.latest_frame()
            if frame.number > after:
                return frame
            time.sleep(0.5)  # polling screencap: there is no change signal without video
        return None

    # --- actions -----------------------------------------------------------------------------
    def perform(self, action: Action | dict[str, Any]) -> ActionOutcome:
        checked = validate_action(action, self.screen_size)
        if isinstance(checked, ActionError):
            return ActionOutcome(ok=False, error=checked.message)
        with self._lock:
            before = self._screen_marker()
            try:
                error = self._execute(checked)
            except AdbDeviceError:
                raise
            except scrcpy.ScrcpyError:
                error = self._execute(checked, use_video=False)  # the session just died
            if error:
                return ActionOutcome(ok=False, error=error)
            changed = self._screen_changed(before)
            return ActionOutcome(ok=True, changed=changed, details={"serial": self.serial})

    def _screen_marker(self) -> Any:
        if self.streaming and self.session:
            frame = self.session.latest_frame()
            return ("video", frame.number if frame else 0, frame.jpeg if frame else b"")
        tree = self._shell(f"uiautomator dump {DUMP_PATH} >/dev/null && cat {DUMP_PATH}")
        if "<hierarchy" in tree:
            return ("tree", tree)
        # no tree on this screen: the pixels tell a change
        png = self._shell("screencap -p", binary=True)
        return ("shot", hashlib.sha256(png).hexdigest())

    def _screen_changed(self, before: Any) -> bool:
        if before[0] == "video" and self.session:
            number, jpeg = before[1], before[2]
            deadline = time.monotonic() + SETTLE_S
            while time.monotonic() < deadline:
                frame = self.session.wait_for_frame(number, deadline - time.monotonic())
                if frame is None:
                    return False
                if frame.jpeg != jpeg:
                    return True
                number = frame.number  # a repeated frame: the same picture
            return False
        return self._screen_marker() != before

    def _video_point(self, x: int, y: int) -> tuple[int, int, int, int]:
        assert self.session is not None
        vw, vh = self.session.video_size
        width, height = self.screen_size
        return (round(x * vw / width), round(y * vh / height), vw, vh)

    def _touch(self, points: list[tuple[int, int]], hold: float = 0.0) -> None:
        assert self.session is not None
        (x, y, vw, vh) = self._video_point(*points[0])
        self.session.send(scrcpy.inject_touch(scrcpy.MOTION_DOWN, x, y, vw, vh))
        if hold:
            time.sleep(hold)  # a long press is a finger held down for real time
        for px, py in points[1:-1]:
            x, y, vw, vh = self._video_point(px, py)
            self.session.send(scrcpy.inject_touch(scrcpy.MOTION_MOVE, x, y, vw, vh))
        x, y, vw, vh = self._video_point(*points[-1])
        self.session.send(scrcpy.inject_touch(scrcpy.MOTION_UP, x, y, vw, vh, pressure=0.0))

    def _key(self, keycode: int, metastate: int = 0) -> None:
        assert self.session is not None
        self.session.send(scrcpy.inject_keycode(scrcpy.KEY_DOWN, keycode, 0, metastate),
                          scrcpy.inject_keycode(scrcpy.KEY_UP, keycode, 0, metastate))

    def _scroll_points(self, direction: str) -> list[tuple[int, int]]:
        w, h = self.screen_size
        cx, cy = w // 2, h // 2
        dx, dy = {"UP": (0, -h * 0.3), "DOWN": (0, h * 0.3), "LEFT": (-w * 0.3, 0),
                  "RIGHT": (w * 0.3, 0)}[direction]
        # the finger moves in ``direction`` (CONTRACT: SCROLL names the finger's direction)
        return [(round(cx - dx / 2 + dx * t / 4), round(cy - dy / 2 + dy * t / 4))
                for t in range(5)]

    def resolve_app(self, name: str) -> AppInfo | None:
        wanted = name.strip().lower()
        for app in self.info.apps:
            if app.package.lower() == wanted or app.name.lower() == wanted:
                return app
        for app in self.info.apps:
            if wanted and wanted.replace(" ", "") in app.package.lower().rsplit(".", 1)[-1]:
                return app
        return None

    def _execute(self, action: Action, use_video: bool = True) -> str | None:
        """Run ``action``; an error message for the agent, or None."""
        video = use_video and self.streaming
        kind = action.type
        if kind in (COMPLETE, IMPOSSIBLE):
            return None
        if kind == WAIT:
            time.sleep(1.0)  # WAIT means: give the app a second
            return None
        if kind == OPENAPP:
            app = self.resolve_app(action.app or "")
            if app is None:
                return f"no app named '{action.app}' is installed on {self.serial}"
            if video:
                self.session.send(scrcpy.start_app(app.package))  # type: ignore[union-attr]
                return None
            out = self._shell(f"monkey -p {app.package} -c android.intent.category.LAUNCHER 1")
            return None if "Events injected" in out else f"could not start {app.package}"
        if kind in KEYCODES:
            if video:
                self._key(KEYCODES[kind])
            else:
                self._shell(f"input keyevent {KEYCODES[kind]}")
            return None
        if kind in (CLICK, LONG_CLICK):
            x, y = int(action.x or 0), int(action.y or 0)
            if video:
                self._touch([(x, y), (x, y)], hold=LONG_PRESS_S if kind == LONG_CLICK else 0)
            elif kind == CLICK:
                self._shell(f"input tap {x} {y}")
            else:
                self._shell(f"input swipe {x} {y} {x} {y} {int(LONG_PRESS_S * 1000)}")
            return None
        if kind == SCROLL:
            points = self._scroll_points(action.direction or "UP")
            if video:
                self._touch(points)
            else:
                (x0, y0), (x1, y1) = points[0], points[-1]
                self._shell(f"input swipe {x0} {y0} {x1} {y1} 300")
            return None
        if kind == TYPE:
            return self._type(action.text or "", video)
        return f"{kind} is not supported on an adb phone"

    def _type(self, text: str, video: bool) -> str | None:
        # TYPE replaces the field's text (as the simulator and AndroidWorld do): select all
        # and delete first, then insert.
        if video:
            self._key(scrcpy.KEYCODE_A, scrcpy.META_CTRL_ON)
            self._key(scrcpy.KEYCODE_DEL)
            if text.isascii():
                data = text.encode()
                for start in range(0, len(data), scrcpy.INJECT_TEXT_MAX_LENGTH):
                    chunk = data[start:start + scrcpy.INJECT_TEXT_MAX_LENGTH].decode()
                    self.session.send(scrcpy.inject_text(chunk))  # type: ignore[union-attr]
            else:
                # key injection cannot type characters outside the key map: paste instead
                self.session.send(scrcpy.set_clipboard(  # type: ignore[union-attr]
                    int(time.time() * 1000), text, paste=True))
            return None
        try:
            commands = escape_input_text(text)
        except ValueError:
            return ("non-ASCII text needs the live video session (scrcpy); adb's "
                    "'input text' types ASCII only")
        try:
            focused = next((n for n in self.ui_nodes() if n.focused), None)
        except AdbDeviceError:
            focused = None  # no tree: nothing tells what the field holds
        deletes = min(len(focused.text) if focused else 0, 500)
        clear = f"input keyevent {KEYCODE_MOVE_END}" + (
            " && input keyevent " + " ".join(["67"] * deletes) if deletes else "")
        self._shell(" && ".join([clear, *commands]))
        return None
