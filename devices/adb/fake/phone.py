"""The fake phone behind the fake ``adbd``: a simulated phone answering adb services.

Services: ``shell:`` and ``shell,v2,…:`` (a small shell, below), ``exec:``, ``sync:``
(STAT, SEND, RECV, LIST, QUIT) and ``localabstract:scrcpy_<scid>`` (the scrcpy server's
sockets, once ``app_process`` started it). Typing follows Android: ``input text`` and
scrcpy text insert at the cursor, DEL removes a character, Ctrl+A selects all. The
simulator's TYPE replaces a field's text, so the fake keeps what the focused field holds
and sends the whole text.
"""
from __future__ import annotations

import hashlib
import io
import shlex
import struct
import threading
import time
from typing import Any, Callable

from devices.actions import Action
from devices.adb import scrcpy
from devices.adb.fake import scrcpy_end
from devices.adb.fake.adbd import FakeAdbDevice, Stream, parse_service, shell_v2_packet
from devices.uitree import UINode, nodes_to_uiautomator_xml

KEY_ACTIONS = {3: "PRESS_HOME", 4: "PRESS_BACK", 66: "PRESS_ENTER"}
KEYCODE_MOVE_END = 123
LONG_PRESS_MS = 500
# What ``uiautomator dump`` prints on a screen that never goes idle (animations, video).
IDLE_STATE_ERROR = "ERROR: could not get idle state."

# A real phone's packages: its apps under their real names, and many system services no
# person opens (``pm list packages`` lists them all; only launcher activities are apps).
REAL_PACKAGES = {
    "com.kairos.settings": "com.android.settings",
    "com.kairos.clock": "com.google.android.deskclock",
    "com.kairos.maps": "com.google.android.apps.maps",
    "com.kairos.messages": "com.google.android.apps.messaging",
}
SYSTEM_SERVICES = (
    "android", "com.android.systemui", "com.android.providers.media",
    "com.android.providers.contacts", "com.android.providers.settings",
    "com.android.phone", "com.android.bluetooth", "com.android.nfc", "com.android.shell",
    "com.android.wallpaper", "com.android.inputmethod.latin", "com.android.permissioncontroller",
    "com.android.server.telecom", "com.google.android.gms", "com.google.android.gsf",
    "com.google.android.webview", "com.google.android.ext.services",
    "com.google.android.tts", "com.qualcomm.qti.telephonyservice",
)


class FakePhone:
    """A simulated phone reachable through the real adb server (``adb connect``)."""

    def __init__(self, sim: Any, *, model: str = "Kairos_Fake", port: int = 0,
                 video_fps: int = 60, real_phone: bool = False):
        self.sim = sim
        # real_phone: answer as a real phone does — real package names, system services
        # in ``pm list packages``, launcher activities from ``cmd package
        # query-activities`` (labels as resource ids), no app descriptions anywhere.
        self.real_phone = real_phone
        self.renames = dict(REAL_PACKAGES) if real_phone else {}
        # what ``uiautomator dump`` answers instead of a tree (None: a tree), e.g.
        # IDLE_STATE_ERROR; the screenshot still shows the screen.
        self.dump_error: str | None = None
        self.files: dict[str, bytes] = {}
        self.video_fps = video_fps
        self.adbd = FakeAdbDevice(self.open_service, model=model, port=port)
        self.servers: dict[str, scrcpy_end.ScrcpyDeviceEnd] = {}
        self.commands: list[str] = []  # every shell command run, for tests
        self.actions: list[dict[str, Any]] = []  # every simulator action, for tests
        self._text = ""  # what the focused field holds, as typed through adb
        self._select_all = False
        self._lock = threading.RLock()
        self.package_labels = {self.renames.get(app.package, app.package): app.name
                               for app in sim.info.apps}
        self.on_sent: Callable[[int, float], None] | None = None  # (pts, perf_counter)
        self.before_act: Callable[[Action], None] | None = None

    @property
    def serial(self) -> str:
        return self.adbd.address

    def close(self) -> None:
        for server in list(self.servers.values()):
            server.kill()
        self.adbd.close()

    # --- simulator actions -------------------------------------------------------------
    def act(self, action: Action) -> None:
        if self.before_act is not None:
            self.before_act(action)  # tests: a phone that hangs or is pulled mid-action
        with self._lock:
            self.actions.append(action.to_json())
            if action.type in ("CLICK", "LONG_CLICK", "PRESS_BACK", "PRESS_HOME", "OPENAPP"):
                self._text = ""
                self._select_all = False
            self.sim.perform(action)

    def type_text(self, text: str) -> None:
        with self._lock:
            self._text = text if self._select_all else self._text + text
            self._select_all = False
            self.actions.append({"type": "TYPE", "text": self._text})
            self.sim.perform(Action("TYPE", text=self._text))

    def delete(self) -> None:
        with self._lock:
            self._text = "" if self._select_all else self._text[:-1]
            self._select_all = False
            if self._text:
                self.sim.perform(Action("TYPE", text=self._text))

    def select_all(self) -> None:
        self._select_all = True

    def key(self, code: int) -> None:
        if code in KEY_ACTIONS:
            self.act(Action(KEY_ACTIONS[code]))
        elif code == scrcpy.KEYCODE_DEL:
            self.delete()
        # KEYCODE_MOVE_END and others: nothing the simulator shows

    def open_app(self, name: str) -> bool:
        label = self.package_labels.get(name, name)
        if label not in self.package_labels.values():
            return False
        self.act(Action("OPENAPP", app=label))
        return True

    def gesture(self, x0: int, y0: int, x1: int, y1: int, duration_ms: float) -> None:
        """A finger from (x0, y0) to (x1, y1) in device pixels."""
        dx, dy = x1 - x0, y1 - y0
        if abs(dx) < 20 and abs(dy) < 20:
            kind = "LONG_CLICK" if duration_ms >= LONG_PRESS_MS else "CLICK"
            self.act(Action(kind, x=x0, y=y0))
        elif abs(dy) >= abs(dx):
            self.act(Action("SCROLL", direction="UP" if dy < 0 else "DOWN"))
        else:
            self.act(Action("SCROLL", direction="LEFT" if dx < 0 else "RIGHT"))

    # --- adb services --------------------------------------------------------------------
    def open_service(self, service: str, stream: Stream) -> Callable[[Stream], None] | None:
        name, args, rest = parse_service(service)
        if name == "shell" and "v2" in args:
            return lambda s: self._shell_v2(rest, s)
        if name in ("shell", "exec"):
            return lambda s: self._shell_raw(rest, s)
        if name == "sync":
            return self._sync
        if name == "localabstract":
            server = self.servers.get(rest)
            if server is None:
                return None  # nothing listens there: connection refused
            return server.accept
        return None

    def _shell_raw(self, command: str, stream: Stream) -> None:
        self.run_shell(command, stream, lambda data: stream.send(data))

    def _shell_v2(self, command: str, stream: Stream) -> None:
        code = self.run_shell(command, stream, lambda data: stream.send(shell_v2_packet(1, data)))
        stream.send(shell_v2_packet(3, bytes([code & 0xFF])))

    def run_shell(self, command: str, stream: Stream, out: Callable[[bytes], None]) -> int:
        """Run one command line (``&&`` and ``;`` chain commands); returns the exit code."""
        self.commands.append(command)
        code = 0
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|>")
        lexer.whitespace_split = True
        words = list(lexer)
        chain: list[list[str]] = [[]]
        joins: list[str] = []
        for word in words:
            if word in ("&&", ";", "||"):
                joins.append(word)
                chain.append([])
            else:
                chain[-1].append(word)
        for n, argv in enumerate(chain):
            if n and joins[n - 1] == "&&" and code != 0:
                break
            if n and joins[n - 1] == "||" and code == 0:
                break
            if argv:
                argv = [w.replace("$?", str(code)) for w in argv]
                code = self._command(argv, stream, out)
        return code

    def _command(self, argv: list[str], stream: Stream, out: Callable[[bytes], None]) -> int:
        env: dict[str, str] = {}
        while argv and "=" in argv[0] and not argv[0].startswith("-"):
            key, _, value = argv.pop(0).partition("=")
            env[key] = value
        err = out  # stderr: adb's plain shell merges it, and "> /dev/null" keeps it
        if ">" in argv:  # "cmd > /dev/null": output discarded
            argv = argv[:argv.index(">")]
            out = lambda _data: None  # noqa: E731
        name, args = argv[0], argv[1:]
        info = self.sim.info

        if name == "echo":
            out((" ".join(args) + "\n").encode())
        elif name == "getprop":
            props = {"ro.product.model": self.adbd.model, "ro.build.version.release": "14",
                     "ro.build.version.sdk": "34", "ro.product.manufacturer": "Kairos"}
            out((props.get(args[0], "") + "\n").encode() if args else b"")
        elif name == "wm" and args[:1] == ["size"]:
            out(f"Physical size: {info.width}x{info.height}\n".encode())
        elif name == "screencap":
            image = self.sim.observe().image.resize((info.width, info.height))
            buf = io.BytesIO()
            image.save(buf, format="PNG", compress_level=1)
            out(buf.getvalue())
        elif name == "uiautomator" and args[:1] == ["dump"]:
            path = args[1] if len(args) > 1 else "/sdcard/window_dump.xml"
            if self.dump_error is not None:
                err((self.dump_error + "\n").encode())
                return 1
            self.files[path] = nodes_to_uiautomator_xml(self._nodes()).encode()
            out(f"UI hierchary dumped to: {path}\n".encode())  # sic, as Android prints it
        elif name == "dumpsys" and args[:1] == ["window"]:
            app = self.sim.observe().app
            package = self.renames.get(app, app)
            out(f"  mCurrentFocus=Window{{5d1e0a1 u0 {package}/{package}.MainActivity}}\n"
                f"  mFocusedApp=ActivityRecord{{9c2f3b u0 {package}/.MainActivity t42}}\n"
                .encode())
        elif name == "cmd" and args[:2] == ["package", "query-activities"]:
            out(self._launcher_activities(args[2:]).encode())
        elif name == "cat":
            for path in args:
                if path not in self.files:
                    out(f"cat: {path}: No such file or directory\n".encode())
                    return 1
                out(self.files[path])
        elif name == "rm":
            for path in args:
                self.files.pop(path, None)
        elif name == "pm" and args[:2] == ["list", "packages"]:
            packages = [self.renames.get(a.package, a.package) for a in info.apps]
            if self.real_phone:
                packages = sorted(set(packages) | set(SYSTEM_SERVICES))
            out("".join(f"package:{p}\n" for p in packages).encode())
        elif name == "input":
            return self._input(args, out)
        elif name == "monkey":
            package = args[args.index("-p") + 1] if "-p" in args else ""
            if not self.open_app(package):
                out(b"** No activities found to run, monkey aborted.\n")
                return 252
            out(b"Events injected: 1\n")
        elif name == "app_process" and env.get("CLASSPATH"):
            return self._start_scrcpy(env["CLASSPATH"], args, stream, out)
        else:
            out(f"/system/bin/sh: {name}: inaccessible or not found\n".encode())
            return 127
        return 0

    def _nodes(self) -> list[UINode]:
        nodes = self.sim.observe().nodes
        if not self.renames:
            return nodes
        return [UINode(**{**n.__dict__, "package": self.renames.get(n.package, n.package)})
                for n in nodes]

    def _launcher_activities(self, args: list[str]) -> str:
        """``cmd package query-activities`` as Android 14 prints it for
        ``-a android.intent.action.MAIN -c android.intent.category.LAUNCHER``: one block
        per launcher activity; labels are resource ids (``nonLocalizedLabel=null``)."""
        if "android.intent.category.LAUNCHER" not in args:
            return "No activities found\n"
        packages = sorted(self.package_labels)
        lines = [f"{len(packages)} activities found:"]
        for n, package in enumerate(packages):
            lines += [
                f"  Activity #{n}:",
                "    priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false",
                "    ActivityInfo:",
                f"      name={package}.MainActivity",
                f"      packageName={package}",
                f"      labelRes=0x7f13{n:04x} nonLocalizedLabel=null icon=0x7f0f0000 banner=0x0",
                "      enabled=true exported=true directBootAware=false",
                "      ApplicationInfo:",
                f"        name={package}.App",
                f"        packageName={package}",
                f"        labelRes=0x7f13{n:04x} nonLocalizedLabel=null icon=0x7f0f0000 banner=0x0",
            ]
        return "\n".join(lines) + "\n"

    def _input(self, args: list[str], out: Callable[[bytes], None]) -> int:
        sub, rest = (args[0], args[1:]) if args else ("", [])
        try:
            if sub == "tap":
                self.gesture(int(float(rest[0])), int(float(rest[1])),
                             int(float(rest[0])), int(float(rest[1])), 0)
            elif sub == "swipe":
                x0, y0, x1, y1 = (int(float(v)) for v in rest[:4])
                self.gesture(x0, y0, x1, y1, float(rest[4]) if len(rest) > 4 else 300)
            elif sub == "keyevent":
                for code in rest:
                    self.key(int(code))
            elif sub == "text":
                # Android's `input text` turns "%s" into a space and types ASCII only
                text = " ".join(rest).replace("%s", " ")
                if any(ord(c) > 127 for c in text):
                    out(b"java.lang.RuntimeException: Cannot type non-ASCII characters\n")
                    return 1
                self.type_text(text)
            else:
                out(f"Error: Unknown command: {sub}\n".encode())
                return 1
        except (IndexError, ValueError):
            out(b"Error: bad arguments\n")
            return 1
        return 0

    def _start_scrcpy(self, classpath: str, args: list[str], stream: Stream,
                      out: Callable[[bytes], None]) -> int:
        jar = self.files.get(classpath)
        if jar is None or hashlib.sha256(jar).hexdigest() != scrcpy.SERVER_SHA256:
            out(b"Error: Could not find or load main class com.genymobile.scrcpy.Server\n")
            return 1
        if args[:2] != ["/", scrcpy.SERVER_CLASS] or len(args) < 3:
            out(b"Error: bad app_process arguments\n")
            return 1
        if args[2] != scrcpy.SERVER_VERSION:
            out(f"[server] ERROR: The server version ({scrcpy.SERVER_VERSION}) does not "
                f"match the client ({args[2]})\n".encode())
            return 1
        options = dict(a.split("=", 1) for a in args[3:] if "=" in a)
        scid = int(options.get("scid", "-1"), 16)
        name = scrcpy.socket_name(scid) if scid >= 0 else "scrcpy"
        server = scrcpy_end.ScrcpyDeviceEnd(self, options, max_fps=self.video_fps)
        self.servers[name] = server
        out(f"[server] INFO: Device: [Kairos] {self.adbd.model} (Android 14)\n".encode())
        try:
            # the server lives as long as its shell (the client closing it stops it)
            while not server.dead.wait(0.2):
                if stream.closed:
                    break
        finally:
            server.kill()
            self.servers.pop(name, None)
        return 0

    def kill_scrcpy(self) -> None:
        """The scrcpy server dies (as when the phone kills app_process)."""
        for server in list(self.servers.values()):
            server.kill()

    # --- sync: push and pull ---------------------------------------------------------------
    def _sync(self, stream: Stream) -> None:
        while True:
            try:
                head = stream.recv_exactly(8)
            except EOFError:
                return
            ident, size = head[:4], struct.unpack("<I", head[4:])[0]
            if ident == b"QUIT":
                return
            path = stream.recv_exactly(size).decode() if size else ""
            if ident == b"STAT":
                data = self.files.get(path)
                mode = 0o100644 if data is not None else (0o40755 if path.endswith("/tmp")
                                                           or path.endswith("/") else 0)
                stream.send(b"STAT" + struct.pack("<III", mode, len(data or b""),
                                                  int(time.time()) if mode else 0))
            elif ident == b"SEND":
                target = path.rsplit(",", 1)[0]
                received = bytearray()
                while True:
                    chunk_head = stream.recv_exactly(8)
                    kind, length = chunk_head[:4], struct.unpack("<I", chunk_head[4:])[0]
                    if kind == b"DATA":
                        received += stream.recv_exactly(length)
                    elif kind == b"DONE":
                        break
                    else:
                        stream.send(b"FAIL" + struct.pack("<I", 12) + b"bad sync msg")
                        return
                self.files[target] = bytes(received)
                stream.send(b"OKAY" + struct.pack("<I", 0))
            elif ident == b"RECV":
                data = self.files.get(path)
                if data is None:
                    message = f"remote object '{path}' does not exist".encode()
                    stream.send(b"FAIL" + struct.pack("<I", len(message)) + message)
                    continue
                for offset in range(0, len(data), 64 * 1024):
                    chunk = data[offset:offset + 64 * 1024]
                    stream.send(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
                stream.send(b"DONE" + struct.pack("<I", 0))
            elif ident == b"LIST":
                prefix = path.rstrip("/") + "/"
                for full, data in self.files.items():
                    if full.startswith(prefix) and "/" not in full[len(prefix):]:
                        name = full[len(prefix):].encode()
                        stream.send(b"DENT" + struct.pack("<IIII", 0o100644, len(data),
                                                          int(time.time()), len(name)) + name)
                stream.send(b"DONE" + bytes(16))
            else:
                stream.send(b"FAIL" + struct.pack("<I", 14) + b"unknown sync .")
                return

