"""The engine: a bundle of apps plus a task's perturbations, as a pure state machine.

``World.step(state, action) -> (state', Result)`` is a pure function of immutable values,
which is what lets the oracle search it and :class:`~devices.sim.device.SimDevice` wrap it
with a lock. ``World.view(state)`` lays the screen out in device pixels: UI nodes in the
uiautomator schema, the hit targets a touch can reach, and drawing operations for the
renderer. Rules (scroll direction, TYPE, BACK, focus) are documented in docs/simulator.md.
"""
from __future__ import annotations

import functools

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from devices.actions import (
    CLICK, LONG_CLICK, OPENAPP, PRESS_BACK, PRESS_ENTER, PRESS_HOME, SCROLL, TERMINAL_TYPES, TYPE,
    WAIT, Action,
)
from devices.sim import expr as expr_mod
from devices.sim.loader import AppBundle, SimLoadError
from devices.sim.model import (
    LAUNCHER, LAUNCHER_PACKAGE, PERMISSION_PACKAGE, SYSTEMUI_PACKAGE, TEMPLATE_RE, AppSpec,
    Dialog, Effect, Effects, Element, Gate, Screen, fill_template, number_value, template_names,
)
from devices.uitree import Bounds, UINode

if TYPE_CHECKING:  # named in annotations only: suites build worlds, never the reverse
    from devices.sim.suite import Perturbation

HOME_SCREEN = "home"
CLOCK_TEXT = "9:41"


# --- state -----------------------------------------------------------------------------

@dataclass(frozen=True)
class SimState:
    """Everything that decides what the phone shows. Immutable and hashable."""

    values: tuple[Any, ...]  # aligned with World.var_names
    app: str = LAUNCHER  # foreground app id, or "launcher"
    stack: tuple[str, ...] = ()  # screens of the foreground app, top last
    dialog: str | None = None
    focus: str | None = None  # id of the focused text field
    scroll: tuple[tuple[str, int], ...] = ()  # list id -> first visible item
    tick: int = 0  # steps taken, kept only while a step-triggered pop-up is pending


@dataclass
class Result:
    ok: bool = True
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


# --- perturbations (OS-Kairos §3, Fig. 2: pop-up hijack, permission, network, logout) ---

def perturbation_vars(perturbations: Iterable[Perturbation]) -> dict[str, Any]:
    """The variables a task's perturbations add, with their initial values."""
    out: dict[str, Any] = {}
    for i, p in enumerate(perturbations):
        pre = f"sys.p{i}_"
        if p.kind == "popup":
            out[pre + "done"] = False
        elif p.kind == "permission":
            out[f"{p.app}.perm_{p.param('permission')}"] = None
        elif p.kind == "network_failure":
            out[pre + "failures"] = int(p.param("failures", 1))
        elif p.kind == "logged_out":
            out[pre + "signed_in"] = False
            out[pre + "account"] = str(p.param("account", "alex@example.com"))
            out[pre + "password"] = ""
        elif p.kind == "loading":
            out[pre + "waits"] = int(p.param("waits", 1))
    return out


@dataclass
class _Layer:
    screens: dict[tuple[str, str], Screen] = field(default_factory=dict)
    dialogs: dict[str, Dialog] = field(default_factory=dict)
    gates: dict[tuple[str, str], list[Gate]] = field(default_factory=dict)
    hooks: dict[tuple[str, str], list[Effect]] = field(default_factory=dict)
    triggers: list[tuple[int, str | None, str, str]] = field(default_factory=list)
    dialog_apps: dict[str, str | None] = field(default_factory=dict)  # dialog -> its app


def _x(source: str) -> expr_mod.Expr:
    return expr_mod.parse(source)


def _layer(bundle: AppBundle, perturbations: tuple[Perturbation, ...]) -> _Layer:
    layer = _Layer()
    for i, p in enumerate(perturbations):
        pid, pre = f"_p{i}", f"sys.p{i}_"
        app = bundle.by_id.get(p.app) if p.app else None
        if p.app and app is None:
            raise SimLoadError(f"{p.where}: no installed app '{p.app}'")
        screen = (p.screen or app.start) if app else None
        if p.kind == "popup":
            done = pre + "done"
            layer.dialogs[pid] = Dialog(
                id=pid, title=str(p.param("title", "Special offer!")),
                text=str(p.param("text", "Install our partner app and get 50% off today.")),
                buttons=(
                    Element("button", "popup_close", text=str(p.param("close", "Close")),
                            on_tap=(Effect("set", done, True),)),
                    # The hijack: the inviting button takes the user out of the task.
                    Element("button", "popup_accept", text=str(p.param("button", "Install now")),
                            on_tap=(Effect("set", done, True), Effect("home"))),
                ),
                on_dismiss=(Effect("set", done, True),))
            opener = Effect("if", cond=_x(f"not {done}"), then=(Effect("open", pid),))
            if p.param("at_step"):
                layer.triggers.append((int(p.param("at_step")), p.app, pid, done))
            else:
                layer.hooks.setdefault((p.app, screen), []).append(opener)
        elif p.kind == "permission":
            var = f"{p.app}.perm_{p.param('permission')}"
            label = str(p.param("permission")).replace("_", " ")
            layer.dialogs[pid] = Dialog(
                id=pid, title=str(p.param(
                    "text", f"Allow {app.name} to access this device's {label}?")),
                buttons=(
                    Element("button", "permission_allow_button", text="Allow",
                            on_tap=(Effect("set", var, True),)),
                    Element("button", "permission_deny_button", text="Don't allow",
                            on_tap=(Effect("set", var, False),)),
                ),
                cancelable=False, package=PERMISSION_PACKAGE)
            layer.hooks.setdefault((p.app, screen), []).append(
                Effect("if", cond=_x(f"{var} == null"), then=(Effect("open", pid),)))
        elif p.kind == "network_failure":
            var = pre + "failures"
            layer.screens[(p.app, pid)] = Screen(pid, title=app.name, up=False, elements=(
                Element("image", "no_connection_image", desc="No connection", height=300,
                        color="#B0BEC5"),
                Element("text", "no_connection_title", text="No internet connection",
                        style="heading"),
                Element("text", "no_connection_text",
                        text="Check your connection and try again.", style="caption"),
                Element("button", "retry_button", text="Retry", on_tap=(Effect("add", var, -1),)),
            ))
            layer.gates.setdefault((p.app, screen), []).append(Gate(_x(f"{var} > 0"), pid))
        elif p.kind == "logged_out":
            signed, user, pw = pre + "signed_in", pre + "account", pre + "password"
            password = p.param("password")
            sign_in: Effects = (Effect("set", signed, True), Effect("set", pw, ""))
            if password:
                sign_in = (Effect("if", cond=_x(f"{pw} == {_quote(str(password))}"),
                                  then=sign_in, otherwise=(Effect("open", pid + "_wrong"),)),)
                layer.dialogs[pid + "_wrong"] = Dialog(
                    pid + "_wrong", title="Wrong password", text="Check your password and try again.",
                    buttons=(Element("button", "ok_button", text="OK"),))
            layer.screens[(p.app, pid)] = Screen(pid, title="Sign in", up=False, elements=(
                Element("text", "sign_in_prompt", text=f"Sign in to {app.name} to continue",
                        style="heading"),
                Element("field", "email", var=user, hint="Email"),
                Element("field", "password", var=pw, hint="Password", password=True,
                        on_enter=sign_in),
                Element("button", "sign_in_button", text="Sign in", on_tap=sign_in),
            ))
            for sid in app.screens:  # a signed-out app shows nothing until sign-in
                layer.gates.setdefault((p.app, sid), []).append(Gate(_x(f"not {signed}"), pid))
        elif p.kind == "loading":
            var = pre + "waits"
            layer.screens[(p.app, pid)] = Screen(pid, title=app.name, up=False, elements=(
                Element("progress", "loading_progress", desc="Loading"),
                Element("text", "loading_text", text="Loading…", style="heading"),
            ), on_wait=(Effect("add", var, -1),))
            layer.gates.setdefault((p.app, screen), []).append(Gate(_x(f"{var} > 0"), pid))
    for did in layer.dialogs:
        layer.dialog_apps[did] = perturbations[int(did[2:].split("_")[0])].app
    return layer


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- layout constants (device pixels on a 1080-wide phone; scaled by width/1080) --------

STATUS_H, APPBAR_H, NAV_H, TAB_H, KEYBOARD_H, MARGIN = 84, 168, 132, 180, 880, 48
FONT = {"appbar": 60, "title": 64, "heading": 48, "body": 42, "caption": 34, "button": 44,
        "row": 46, "subtitle": 36, "status": 36, "launcher": 38, "clock": 180, "key": 46}
KEY_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm<")
_TEMPLATE_RE = TEMPLATE_RE  # kept for the oracle's imports


@dataclass(frozen=True)
class Target:
    """Something a touch can hit. ``tap``/``long`` are effects; ``special`` marks built-ins."""

    bounds: Bounds
    tap: Effects | None = None
    long: Effects | None = None
    special: str | None = None  # focus | key | outside | back | home
    arg: Any = None
    label: str = ""
    node: int = -1

    def contains(self, x: int, y: int) -> bool:
        left, top, right, bottom = self.bounds
        return left <= x < right and top <= y < bottom


@dataclass
class View:
    """One laid-out screen."""

    package: str
    screen: str  # the displayed screen (after gates), "home" on the launcher
    targets: list[Target]
    nodes: list[UINode]
    ops: tuple[Any, ...]
    fields: list[tuple[Element, Target]]  # visible, enabled text fields
    lists: list[tuple[str, int, int, int]]  # (list id, offset, max offset, page size)
    keyboard: bool
    dialog_box: Bounds | None

    def hit(self, x: int, y: int) -> Target | None:
        for target in reversed(self.targets):  # drawn last is on top
            if target.contains(x, y):
                return target
        return None


def _wrap(text: str, size: int, width: int) -> list[str]:
    """Greedy word wrap with an average glyph width, so layout needs no font metrics."""
    per_line = max(4, int(width / (size * 0.52)))
    lines: list[str] = []
    for para in text.split("\n"):
        line = ""
        for word in para.split(" "):
            if line and len(line) + 1 + len(word) > per_line:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return lines or [""]


class _Builder:
    """Collects nodes, targets and drawing ops; ``full=False`` skips nodes and ops for the
    oracle's search, which only needs targets."""

    def __init__(self, full: bool):
        self.full = full
        self.nodes: list[UINode] = []
        self.ops: list[Any] = []
        self.targets: list[Target] = []

    def node(self, parent: int | None, cls: str, bounds: Bounds, package: str, **kw: Any) -> int:
        if not self.full:
            return -1
        depth = 0 if parent is None or parent < 0 else self.nodes[parent].depth + 1
        index = len(self.nodes)
        node = UINode(index=index, cls=cls, bounds=bounds, package=package,
                      parent=parent if parent is not None and parent >= 0 else None,
                      depth=depth, **kw)
        if node.clickable and not (node.text or node.content_desc):
            node.naf = True
        self.nodes.append(node)
        return index

    def op(self, *op: Any) -> None:
        if self.full:
            self.ops.append(op)

    def target(self, bounds: Bounds, **kw: Any) -> Target:
        target = Target(bounds, **kw)
        self.targets.append(target)
        return target


def _fmt(value: Any) -> str:
    if value is True:
        return "On"
    if value is False:
        return "Off"
    if value is None:
        return "—"
    return str(value)


class World:
    """A bundle of apps with one task's perturbations compiled in. Shared and immutable."""

    def __init__(self, bundle: AppBundle, perturbations: tuple[Perturbation, ...] = (),
                 width: int = 1080, height: int = 2400):
        self.bundle = bundle
        self.perturbations = perturbations
        self.width, self.height = width, height
        self.u = width / 1080
        self.layer = _layer(bundle, perturbations)
        initial = dict(bundle.state)
        for name, value in perturbation_vars(perturbations).items():
            initial.setdefault(name, value)
        self.var_names: tuple[str, ...] = tuple(sorted(initial))
        self.var_index = {n: i for i, n in enumerate(self.var_names)}
        self.initial_values = tuple(initial[n] for n in self.var_names)
        self.max_tick = max((t[0] for t in self.layer.triggers), default=0)
        self._views: OrderedDict[tuple[SimState, bool], View] = OrderedDict()
        self._lite: OrderedDict[Any, View] = OrderedDict()
        self._deps: dict[tuple[str, str, str | None], tuple[int, ...]] = {}
        self._heights: dict[int, int] = {}  # elements are immutable and live as long as us
        self._views_lock = threading.Lock()  # phones and oracles in other threads share worlds

    # --- lookups --------------------------------------------------------------------
    def app(self, app_id: str) -> AppSpec:
        return self.bundle.by_id[app_id]

    def screen(self, app_id: str, screen_id: str) -> Screen:
        app = self.bundle.by_id[app_id]
        return app.screens.get(screen_id) or self.layer.screens[(app_id, screen_id)]

    def dialog(self, app_id: str, dialog_id: str) -> Dialog:
        if app_id != LAUNCHER:
            found = self.bundle.by_id[app_id].dialogs.get(dialog_id)
            if found:
                return found
        return self.layer.dialogs[dialog_id]

    def displayed_screen(self, state: SimState) -> str:
        """The stack's top screen, or the interstitial a gate shows in its place."""
        if state.app == LAUNCHER:
            return HOME_SCREEN
        top = state.stack[-1]
        scr = self.screen(state.app, top)
        gates = list(self.layer.gates.get((state.app, top), ())) + list(scr.gates)
        if gates:
            env = self.env(state)
            for gate in gates:
                if gate.when(env):
                    return gate.screen
        return top

    def env(self, state: SimState) -> expr_mod.Env:
        values, index = state.values, self.var_index

        def lookup(name: str) -> Any:
            i = index.get(name)
            if i is not None:
                return values[i]
            if name == "app":
                return state.app
            if name == "package":
                return self.package_of(state.app)
            if name == "screen":
                return state.stack[-1] if state.stack else HOME_SCREEN
            if name == "dialog":
                return state.dialog
            return None

        return lookup

    def package_of(self, app_id: str) -> str:
        return LAUNCHER_PACKAGE if app_id == LAUNCHER else self.bundle.by_id[app_id].package

    def check(self, predicate: expr_mod.Expr, state: SimState) -> bool:
        return predicate(self.env(state))

    def state_vars(self, state: SimState) -> dict[str, Any]:
        return dict(zip(self.var_names, state.values))

    # --- states ---------------------------------------------------------------------
    def initial_state(self, overrides: dict[str, Any] | None = None, start_app: str | None = None,
                      start_screen: str | None = None) -> SimState:
        values = list(self.initial_values)
        for name, value in (overrides or {}).items():
            values[self.var_index[name]] = value
        state = SimState(tuple(values))
        if start_app:
            work = _Work(self, state)
            work.open_app(start_app)
            if start_screen and start_screen != work.stack[-1]:
                work.go(start_screen)
            state = work.freeze(tick=0)
        return state

    # --- layout ---------------------------------------------------------------------
    def _layout_deps(self, app_id: str, shown: str, dialog_id: str | None) -> tuple[int, ...]:
        """Indices of the variables that can change the touch targets of a screen: those in
        visibility/enabled conditions and in display texts (labels). Switch and radio
        values only change how targets look, not what they do."""
        key = (app_id, shown, dialog_id)
        deps = self._deps.get(key)
        if deps is not None:
            return deps
        names: set[str] = set()

        def element(el: Element) -> None:
            for cond in (el.visible, el.enabled):
                if cond is not None:
                    names.update(cond.names)
            names.update(template_names(el.text + el.subtitle))
            for item in el.items:
                element(item)

        if app_id != LAUNCHER:
            scr = self.screen(app_id, shown)
            names.update(template_names(scr.title))
            for el in scr.elements + scr.toolbar:
                element(el)
        if dialog_id is not None:
            dialog = self.dialog(app_id, dialog_id)
            names.update(template_names(dialog.title + dialog.text))
            for el in dialog.elements + dialog.buttons:
                element(el)
        deps = tuple(sorted(self.var_index[n] for n in names if n in self.var_index))
        self._deps[key] = deps
        return deps

    def view(self, state: SimState, full: bool = True) -> View:
        if not full:
            # Touch targets depend on far less than the picture does, so the oracle's
            # search shares one layout between many states.
            shown = self.displayed_screen(state)
            values = state.values
            key = (state.app, shown, state.dialog, state.focus, state.scroll,
                   tuple(values[i] for i in self._layout_deps(state.app, shown, state.dialog)))
            with self._views_lock:
                cached = self._lite.get(key)
            if cached is None:
                cached = self._layout(state, False)
                with self._views_lock:
                    self._lite[key] = cached
                    if len(self._lite) > 4096:
                        self._lite.popitem(last=False)
            return cached
        key = (state, full)
        with self._views_lock:
            cached = self._views.get(key)
        if cached is not None:
            return cached
        view = self._layout(state, full)
        with self._views_lock:
            self._views[key] = view
            if len(self._views) > 4096:
                self._views.popitem(last=False)
        return view

    def text(self, template: str, env: expr_mod.Env) -> str:
        return fill_template(template, env, _fmt)

    def _layout(self, state: SimState, full: bool) -> View:
        u, W, H = self.u, self.width, self.height
        b = _Builder(full)
        env = self.env(state)
        app_id = state.app
        package = self.package_of(app_id)
        root = b.node(None, "android.widget.FrameLayout", (0, 0, W, H), package)
        b.op("fill", (0, 0, W, H), "#FAFAFA" if app_id != LAUNCHER else "#1E3A5F")
        self._status_bar(b, env, app_id == LAUNCHER)
        fields: list[tuple[Element, Target]] = []
        lists: list[tuple[str, int, int, int]] = []
        keyboard = False
        bottom = H - int(NAV_H * u)
        if app_id == LAUNCHER:
            shown = HOME_SCREEN
            self._launcher(b, root)
        else:
            shown = self.displayed_screen(state)
            scr = self.screen(app_id, shown)
            app = self.app(app_id)
            top = int((STATUS_H + APPBAR_H) * u)
            # App bar: title, "Navigate up" arrow, toolbar icons.
            bar = (0, int(STATUS_H * u), W, top)
            b.op("fill", bar, app.icon_color)
            up = scr.up if scr.up is not None else (shown != app.start and len(state.stack) > 1)
            title_x = int(MARGIN * u)
            if up:
                ub = (int(12 * u), bar[1] + int(24 * u), int(132 * u), bar[3] - int(24 * u))
                b.node(root, "android.widget.ImageButton", ub, package, content_desc="Navigate up",
                       clickable=True, focusable=True)
                b.target(ub, special="back", label="Navigate up", node=len(b.nodes) - 1)
                b.op("arrow_left", ub, "#FFFFFF")
                title_x = int(156 * u)
            title = self.text(scr.title or app.name, env)
            b.node(root, "android.widget.TextView", (title_x, bar[1], W - int(300 * u), bar[3]),
                   package, text=title, resource_id=f"{package}:id/toolbar_title")
            b.op("text", (title_x, (bar[1] + bar[3]) // 2), title, int(FONT["appbar"] * u),
                 "#FFFFFF", "lm", True)
            x = W - int(24 * u)
            for el in reversed(scr.toolbar):
                if el.visible is not None and not el.visible(env):
                    continue
                size = int(120 * u)
                ib = (x - size, bar[1] + int(24 * u), x, bar[3] - int(24 * u))
                self._icon(b, root, el, ib, package, env, on_bar=True)
                x -= size + int(12 * u)
            tabs = next((e for e in scr.elements if e.kind == "tabs" and
                         (e.visible is None or e.visible(env))), None)
            content_bottom = bottom - (int(TAB_H * u) if tabs else 0)
            keyboard = state.focus is not None
            if keyboard:
                content_bottom = min(content_bottom, bottom - int(KEYBOARD_H * u))
            self._content(b, root, state, scr, env, package, top, content_bottom, fields, lists)
            if tabs:
                self._tabs(b, root, tabs, shown, package, (0, bottom - int(TAB_H * u), W, bottom),
                           env)
            if keyboard:
                self._keyboard(b, (0, bottom - int(KEYBOARD_H * u), W, bottom))
        dialog_box = None
        if state.dialog is not None:
            dialog = self.dialog(app_id, state.dialog)
            dialog_box = self._dialog(b, state, dialog, env, package, fields)
        self._nav_bar(b, (0, bottom, W, H))
        return View(package, shown, b.targets, b.nodes, tuple(b.ops), fields, lists, keyboard,
                    dialog_box)

    def _status_bar(self, b: _Builder, env: expr_mod.Env, dark: bool) -> None:
        u, W = self.u, self.width
        box = (0, 0, W, int(STATUS_H * u))
        b.op("fill", box, "#0F2540" if dark else "#E8EAF0")
        color = "#FFFFFF" if dark else "#202124"
        b.node(None, "android.widget.TextView", (int(36 * u), 0, int(200 * u), box[3]),
               SYSTEMUI_PACKAGE, text=CLOCK_TEXT, resource_id=f"{SYSTEMUI_PACKAGE}:id/clock")
        b.op("text", (int(36 * u), box[3] // 2), CLOCK_TEXT, int(FONT["status"] * u), color, "lm", True)
        # System indicators mirror the Settings app when it is installed.
        icons = []
        if env("settings.airplane"):
            icons.append("airplane")
        if env("settings.wifi"):
            icons.append("wifi")
        if env("settings.bluetooth"):
            icons.append("bluetooth")
        if env("settings.dnd"):
            icons.append("dnd")
        b.op("status_icons", box, tuple(icons), color)

    def _nav_bar(self, b: _Builder, box: Bounds) -> None:
        u = self.u
        b.op("fill", box, "#000000")
        cy, w = (box[1] + box[3]) // 2, self.width
        for special, desc, cx in (("back", "Back", w // 4), ("home", "Home", w // 2)):
            hb = (cx - int(90 * u), box[1], cx + int(90 * u), box[3])
            b.node(None, "android.widget.ImageView", hb, SYSTEMUI_PACKAGE, content_desc=desc,
                   resource_id=f"{SYSTEMUI_PACKAGE}:id/{special}", clickable=True)
            b.target(hb, special=special, label=desc, node=len(b.nodes) - 1)
            b.op("nav_" + special, (cx, cy), int(34 * u))

    def _launcher(self, b: _Builder, root: int) -> None:
        u, W = self.u, self.width
        b.op("text", (W // 2, int(330 * u)), CLOCK_TEXT, int(FONT["clock"] * u), "#FFFFFF", "mm", False)
        b.op("text", (W // 2, int(480 * u)), "Monday, June 2", int(FONT["body"] * u), "#DDE6F0",
             "mm", False)
        cell_w, cell_h, top = W // 4, int(330 * u), int(620 * u)
        for i, app in enumerate(self.bundle.apps):
            col, row = i % 4, i // 4
            cell = (col * cell_w, top + row * cell_h, (col + 1) * cell_w, top + (row + 1) * cell_h)
            b.node(root, "android.widget.TextView", cell, LAUNCHER_PACKAGE, text=app.name,
                   content_desc=app.name, resource_id=f"{LAUNCHER_PACKAGE}:id/icon",
                   clickable=True, focusable=True, long_clickable=True)
            b.target(cell, tap=(Effect("open_app", app.id),), label=app.name,
                     node=len(b.nodes) - 1)
            b.op("app_icon", cell, app.icon_glyph, app.icon_color, app.name,
                 int(FONT["launcher"] * u))

    def _height(self, el: Element, width: int) -> int:
        if el.kind != "text":
            cached = self._heights.get(id(el))
            if cached is None:
                cached = self._heights[id(el)] = self._height_of(el, width)
            return cached
        return self._height_of(el, width)

    def _height_of(self, el: Element, width: int) -> int:
        u = self.u
        if el.kind == "text":
            size = FONT.get(el.style or "body", FONT["body"])
            lines = len(_wrap(el.text, size, int(width / u)))
            return int((lines * size * 1.3 + 36) * u)
        return int({
            "button": 168, "icon": 168, "image": el.height or 360, "row": 200 if el.subtitle else 160,
            "switch": 210 if el.subtitle else 176, "checkbox": 160, "field": 176,
            "spacer": el.height or 48, "progress": 120, "stepper": 176,
            "radio": 200 if el.subtitle else 136,
            "radio_group": 100 + 136 * len(el.options),
        }.get(el.kind, 160) * u)

    def _content(self, b: _Builder, root: int, state: SimState, scr: Screen, env: expr_mod.Env,
                 package: str, top: int, bottom: int, fields: list, lists: list) -> None:
        u, W = self.u, self.width
        visible = [e for e in scr.elements if e.kind != "tabs" and
                   (e.visible is None or e.visible(env))]
        y = top + int(24 * u)
        fixed = sum(self._height(e, W - 2 * int(MARGIN * u)) for e in visible if e.kind != "list")
        n_lists = sum(1 for e in visible if e.kind == "list")
        spare = max(0, bottom - y - fixed)
        scroll = dict(state.scroll)
        for el in visible:
            if el.kind == "list":
                h = spare // max(1, n_lists)
                if el.rows:
                    h = min(h, int(el.rows * 176 * u)) if h else int(el.rows * 176 * u)
                box = (0, y, W, min(bottom, y + h))
                self._list(b, root, state, el, env, package, box, scroll.get(el.id, 0), fields,
                           lists)
                y += h
                continue
            h = self._height(el, W - 2 * int(MARGIN * u))
            if y + h > bottom:
                break  # hidden behind the keyboard or the tab bar
            self._element(b, root, state, el, env, package, (0, y, W, y + h), fields)
            y += h

    def _list(self, b: _Builder, root: int, state: SimState, el: Element, env: expr_mod.Env,
              package: str, box: Bounds, offset: int, fields: list, lists: list) -> None:
        items = [it for it in el.items if it.visible is None or it.visible(env)]
        heights = [self._height(it, self.width - 2 * int(MARGIN * self.u)) for it in items]
        space = box[3] - box[1]
        # The largest offset at which the last item is fully visible.
        max_offset, used = len(items), 0
        while max_offset > 0 and used + heights[max_offset - 1] <= space:
            max_offset -= 1
            used += heights[max_offset]
        offset = max(0, min(offset, max_offset))
        lid = b.node(root, "androidx.recyclerview.widget.RecyclerView", box, package,
                     resource_id=f"{package}:id/{el.id}", scrollable=bool(max_offset),
                     focusable=True)
        y, shown = box[1], 0
        for it, h in zip(items[offset:], heights[offset:]):
            if y + h > box[3]:
                break
            self._element(b, lid, state, it, env, package, (0, y, self.width, y + h), fields)
            b.op("line", (int(MARGIN * self.u), y + h - 1, self.width, y + h - 1), "#E0E0E0")
            y += h
            shown += 1
        lists.append((el.id, offset, max_offset, max(1, shown - 1)))
        if max_offset:
            b.op("scrollbar", box, offset, max_offset)

    def _element(self, b: _Builder, parent: int, state: SimState, el: Element,
                 env: expr_mod.Env, package: str, box: Bounds, fields: list) -> None:
        u, W = self.u, self.width
        m = int(MARGIN * u)
        rid = f"{package}:id/{el.id}"
        enabled = el.enabled is None or el.enabled(env)
        text = self.text(el.text, env)
        left, top, right, bottom = box
        long = el.on_long_tap or None
        kind = el.kind
        if kind == "text":
            size = int(FONT.get(el.style or "body", FONT["body"]) * u)
            clickable = bool(el.on_tap) and enabled
            n = b.node(parent, "android.widget.TextView", (m, top, W - m, bottom), package,
                       text=text, resource_id=rid, clickable=clickable, long_clickable=bool(long))
            if clickable or long:
                b.target((m, top, W - m, bottom), tap=el.on_tap if clickable else None, long=long,
                         label=text, node=n)
            if not b.full:
                return
            color = {"caption": "#5F6368"}.get(el.style, "#202124")
            lines = _wrap(text, int(size / u), int((W - 2 * m) / u))
            b.op("lines", (m, top + int(18 * u)), tuple(lines), size, color,
                 el.style in ("title", "heading"))
        elif kind == "button":
            bb = (m, top + int(12 * u), W - m, bottom - int(12 * u))
            n = b.node(parent, "android.widget.Button", bb, package, text=text, resource_id=rid,
                       clickable=enabled, enabled=enabled, focusable=True, long_clickable=bool(long))
            if enabled:
                b.target(bb, tap=el.on_tap, long=long, label=text, node=n)
            b.op("button", bb, text, el.style or "primary", enabled, int(FONT["button"] * u))
        elif kind == "icon":
            size = int(144 * u)
            self._icon(b, parent, el, (m, top + int(12 * u), m + size, top + int(12 * u) + size),
                       package, env)
        elif kind == "image":
            ib = (m, top + int(12 * u), W - m, bottom - int(12 * u))
            b.node(parent, "android.widget.ImageView", ib, package, content_desc=el.desc,
                   resource_id=rid)
            b.op("image", ib, el.color or "#CFD8DC", el.desc)
        elif kind == "progress":
            pb = (W // 2 - int(60 * u), top, W // 2 + int(60 * u), top + int(120 * u))
            b.node(parent, "android.widget.ProgressBar", pb, package, content_desc=el.desc,
                   resource_id=rid)
            b.op("spinner", pb)
        elif kind == "row":
            clickable = enabled and bool(el.on_tap)
            n = b.node(parent, "android.widget.LinearLayout", box, package, resource_id=rid,
                       clickable=clickable, focusable=clickable, long_clickable=bool(long),
                       enabled=enabled)
            b.node(n, "android.widget.TextView", (m, top, W - m, (top + bottom) // 2 if el.subtitle
                                                  else bottom), package, text=text,
                   resource_id="android:id/title")
            sub = self.text(el.subtitle, env)
            if sub:
                b.node(n, "android.widget.TextView", (m, (top + bottom) // 2, W - m, bottom),
                       package, text=sub, resource_id="android:id/summary")
            if clickable or long:
                b.target(box, tap=el.on_tap if clickable else None, long=long, label=text, node=n)
            b.op("row", box, text, sub, int(FONT["row"] * u), int(FONT["subtitle"] * u), m,
                 enabled)
        elif kind == "stepper":
            # A number with - and + buttons (a thermostat, a quantity): label on the left,
            # the value between the buttons; each press moves by `step` within the bounds.
            shown = _fmt(env(el.var))
            n = b.node(parent, "android.widget.LinearLayout", box, package, resource_id=rid)
            b.node(n, "android.widget.TextView", (m, top, W - m - int(380 * u), bottom), package,
                   text=text, resource_id="android:id/title")
            b.node(n, "android.widget.TextView",
                   (W - m - int(250 * u), top, W - m - int(110 * u), bottom),
                   package, text=shown, resource_id=f"{rid}_value")
            cy, half = (top + bottom) // 2, int(55 * u)
            centres = []
            for sign, centre, word in ((-1, W - m - int(305 * u), "Decrease"),
                                       (1, W - m - int(55 * u), "Increase")):
                bb = (centre - half, cy - half, centre + half, cy + half)
                centres.append(centre)
                limit = el.minimum if sign < 0 else el.maximum
                step = (Effect("add", el.var, sign * el.step),) + el.on_change
                tap = step if limit is None else (
                    Effect("if", cond=_bound_check(el.var, "<" if sign > 0 else ">", limit),
                           then=step),)
                label = f"{word} {text}".strip()
                bn = b.node(n, "android.widget.ImageButton", bb, package, content_desc=label,
                            resource_id=f"{rid}_{word.lower()}", clickable=enabled,
                            enabled=enabled, focusable=True)
                if enabled:
                    b.target(bb, tap=tap, label=label, node=bn)
            b.op("stepper", box, text, shown, enabled, int(FONT["row"] * u), m,
                 tuple(centres), W - m - int(180 * u), half)
        elif kind in ("switch", "checkbox"):
            checked = bool(env(el.var))
            cls = "android.widget.Switch" if kind == "switch" else "android.widget.CheckBox"
            n = b.node(parent, cls, box, package, text=text, resource_id=rid, checkable=True,
                       checked=checked, clickable=enabled, enabled=enabled, focusable=True,
                       long_clickable=bool(long))
            sub = self.text(el.subtitle, env)
            if sub:
                b.node(n, "android.widget.TextView", (m, (top + bottom) // 2, W - m, bottom),
                       package, text=sub, resource_id="android:id/summary")
            if enabled:
                flip = (Effect("toggle", el.var),) + el.on_change
                if el.confirm is not None:
                    flip = (Effect("if", cond=el.confirm_when, then=(Effect("open", el.confirm),),
                                   otherwise=flip),)
                b.target(box, tap=flip, long=long, label=text, node=n)
            b.op(kind, box, text, sub, checked, enabled, int(FONT["row"] * u),
                 int(FONT["subtitle"] * u), m)
        elif kind == "radio_group":
            head_h = int(100 * u)
            # The heading names the choice; the RadioGroup repeats it as content-desc so an
            # agent can find open choices (a group with no checked option).
            b.node(parent, "android.widget.TextView", (m, top, W - m, top + head_h), package,
                   text=text, resource_id=f"{rid}_label")
            b.op("lines", (m, top + int(30 * u)), (text,), int(FONT["heading"] * u), "#1A237E", True)
            g = b.node(parent, "android.widget.RadioGroup", (0, top + head_h, W, bottom), package,
                       content_desc=text, resource_id=rid)
            current = env(el.var)
            oy = top + head_h
            for opt in el.options:
                ob = (0, oy, W, oy + int(136 * u))
                checked = current == opt.value
                n = b.node(g, "android.widget.RadioButton", ob, package, text=opt.text,
                           resource_id=f"{rid}_{_ident(opt.value)}", checkable=True,
                           checked=checked, clickable=enabled, enabled=enabled, focusable=True)
                if enabled:
                    b.target(ob, tap=(Effect("set", el.var, opt.value),) + el.on_change,
                             label=opt.text, node=n)
                b.op("radio", ob, opt.text, checked, enabled, int(FONT["row"] * u), m)
                oy += int(136 * u)
        elif kind == "radio":
            opt = el.options[0]
            checked = env(el.var) == opt.value
            n = b.node(parent, "android.widget.RadioButton", box, package, text=text,
                       resource_id=rid, checkable=True, checked=checked, clickable=enabled,
                       enabled=enabled, focusable=True)
            sub = self.text(el.subtitle, env)
            if sub:
                b.node(n, "android.widget.TextView", (m, (top + bottom) // 2, W - m, bottom),
                       package, text=sub, resource_id="android:id/summary")
            if enabled:
                b.target(box, tap=(Effect("set", el.var, opt.value),) + el.on_change,
                         label=text, node=n)
            b.op("radio", box, text + (f"  ({sub})" if sub else ""), checked, enabled,
                 int(FONT["row"] * u), m)
        elif kind == "field":
            fb = (m, top + int(16 * u), W - m, bottom - int(16 * u))
            value = env(el.var)
            value = "" if value is None else str(value)
            shown = "•" * len(value) if el.password else value
            focused = state.focus == el.id
            n = b.node(parent, "android.widget.EditText", fb, package, text=shown or el.hint,
                       resource_id=rid, clickable=enabled, enabled=enabled, focusable=True,
                       focused=focused, password=el.password, long_clickable=True,
                       extra={"hint": el.hint} if el.hint else {})
            if enabled:
                t = b.target(fb, special="focus", arg=el, label=el.hint or el.id, node=n)
                fields.append((el, t))
            b.op("field", fb, shown, el.hint, focused, int(FONT["body"] * u))
        elif kind == "spacer":
            pass

    def _icon(self, b: _Builder, parent: int, el: Element, box: Bounds, package: str,
              env: expr_mod.Env, on_bar: bool = False) -> None:
        enabled = el.enabled is None or el.enabled(env)
        clickable = bool(el.on_tap) and enabled
        cls = "android.widget.ImageButton" if clickable else "android.widget.ImageView"
        if el.kind == "button":
            cls = "android.widget.Button"
        n = b.node(parent, cls, box, package, text=self.text(el.text, env) if el.kind == "button"
                   else "", content_desc=el.desc or el.text, resource_id=f"{package}:id/{el.id}",
                   clickable=clickable, enabled=enabled, long_clickable=bool(el.on_long_tap))
        if clickable or el.on_long_tap:
            b.target(box, tap=el.on_tap if clickable else None, long=el.on_long_tap or None,
                     label=el.desc or el.text, node=n)
        b.op("icon", box, el.glyph or (el.text or el.desc)[:1], el.color or
             ("#FFFFFF" if on_bar else "#3F51B5"), on_bar)

    def _tabs(self, b: _Builder, root: int, tabs: Element, shown: str, package: str,
              box: Bounds, env: expr_mod.Env) -> None:
        b.op("fill", box, "#FFFFFF")
        b.op("line", (0, box[1], self.width, box[1]), "#D0D0D0")
        bar = b.node(root, "android.widget.TabWidget", box, package,
                     resource_id=f"{package}:id/{tabs.id}")
        w = self.width // len(tabs.items)
        for i, tab in enumerate(tabs.items):
            tb = (i * w, box[1], (i + 1) * w, box[3])
            selected = tab.screen == shown
            n = b.node(bar, "android.widget.TextView", tb, package, text=tab.text,
                       content_desc=tab.text, resource_id=f"{package}:id/{tab.id}",
                       clickable=True, selected=selected, focusable=True)
            b.target(tb, tap=tab.on_tap, label=tab.text, node=n)
            b.op("tab", tb, tab.text, selected, int(FONT["caption"] * self.u))

    def _keyboard(self, b: _Builder, box: Bounds) -> None:
        # The on-screen keyboard is another window (an IME), so, as in a uiautomator dump,
        # its keys are touch targets but not nodes.
        u, W = self.u, self.width
        b.op("fill", box, "#D5D8DE")
        key_h = (box[3] - box[1] - int(24 * u)) // 4
        y = box[1] + int(12 * u)
        for row in KEY_ROWS:
            kw = W // 10
            x = (W - kw * len(row)) // 2
            for ch in row:
                kb = (x + int(6 * u), y + int(8 * u), x + kw - int(6 * u), y + key_h - int(8 * u))
                b.target(kb, special="key", arg=ch, label=ch)
                b.op("key", kb, "DEL" if ch == "<" else ch, int(FONT["key"] * u))
                x += kw
            y += key_h
        for ch, left, right, label in ((" ", W * 2 // 10, W * 7 // 10, "space"),
                                       ("\n", W * 7 // 10, W * 9 // 10, "enter")):
            kb = (left + int(6 * u), y + int(8 * u), right - int(6 * u), y + key_h - int(8 * u))
            b.target(kb, special="key", arg=ch, label=label)
            b.op("key", kb, label, int(FONT["caption"] * u))

    def _dialog(self, b: _Builder, state: SimState, dialog: Dialog, env: expr_mod.Env,
                app_package: str, fields: list) -> Bounds:
        u, W, H = self.u, self.width, self.height
        package = dialog.package or app_package
        m = int(72 * u)
        inner = W - 2 * m - 2 * int(MARGIN * u)
        title = self.text(dialog.title, env)
        text = self.text(dialog.text, env)
        title_lines = _wrap(title, FONT["heading"], int(inner / u)) if title else []
        text_lines = _wrap(text, FONT["body"], int(inner / u)) if text else []
        els = [e for e in dialog.elements if e.visible is None or e.visible(env)]
        heights = [self._height(e, inner) for e in els]
        buttons = [bt for bt in dialog.buttons if bt.visible is None or bt.visible(env)]
        btn_h = int(140 * u)
        side_by_side = len(buttons) <= 2
        h = (int(48 * u) + int(len(title_lines) * FONT["heading"] * 1.3 * u)
             + int(len(text_lines) * FONT["body"] * 1.35 * u) + int(24 * u) + sum(heights)
             + (btn_h if side_by_side else btn_h * len(buttons)) + int(24 * u))
        top = max(int(STATUS_H * u), (H - h) // 2)
        box = (m, top, W - m, top + h)
        # Everything behind the dialog is dimmed and unreachable; a tap outside it
        # cancels it when it is cancelable, as Android's AlertDialog does.
        b.targets.append(Target((0, 0, W, H), special="outside"))
        b.op("dim", (0, 0, W, H))
        b.op("card", box)
        d = b.node(None, "android.widget.FrameLayout", box, package,
                   resource_id=f"{package}:id/dialog_{_ident(dialog.id)}")
        b.targets.append(Target(box, special="inside"))
        x0 = m + int(MARGIN * u)
        y = top + int(48 * u)
        if title_lines:
            th = int(len(title_lines) * FONT["heading"] * 1.3 * u)
            b.node(d, "android.widget.TextView", (x0, y, W - x0, y + th), package, text=title,
                   resource_id="android:id/alertTitle")
            b.op("lines", (x0, y), tuple(title_lines), int(FONT["heading"] * u), "#202124", True)
            y += th
        if text_lines:
            th = int(len(text_lines) * FONT["body"] * 1.35 * u)
            b.node(d, "android.widget.TextView", (x0, y, W - x0, y + th), package, text=text,
                   resource_id="android:id/message")
            b.op("lines", (x0, y + int(8 * u)), tuple(text_lines), int(FONT["body"] * u),
                 "#5F6368", False)
            y += th
        y += int(24 * u)
        for el, eh in zip(els, heights):
            self._element(b, d, state, el, env, package, (m, y, W - m, y + eh), fields)
            y += eh
        if side_by_side:
            bw = (W - 2 * m - 2 * int(24 * u)) // max(1, len(buttons))
            for i, bt in enumerate(reversed(buttons)):  # Android puts the positive button right
                right = W - m - int(24 * u) - i * bw
                bb = (right - bw + int(8 * u), y, right, y + btn_h - int(16 * u))
                self._dialog_button(b, d, bt, bb, package, env, dialog)
        else:
            for bt in buttons:
                bb = (m + int(24 * u), y, W - m - int(24 * u), y + btn_h - int(16 * u))
                self._dialog_button(b, d, bt, bb, package, env, dialog)
                y += btn_h
        return box

    def _dialog_button(self, b: _Builder, parent: int, bt: Element, bb: Bounds, package: str,
                       env: expr_mod.Env, dialog: Dialog) -> None:
        text = self.text(bt.text, env)
        rid = f"{package}:id/{bt.id}"
        n = b.node(parent, "android.widget.Button", bb, package, text=text, resource_id=rid,
                   clickable=True, focusable=True)
        # Dialog buttons dismiss the dialog first, then run their own effects.
        b.target(bb, tap=(Effect("close"),) + bt.on_tap, label=text, node=n)
        b.op("button", bb, text, "text", True, int(FONT["button"] * self.u))

    # --- transitions ----------------------------------------------------------------
    def step(self, state: SimState, action: Action,
             view: View | None = None) -> tuple[SimState, Result]:
        """Perform ``action`` on ``state`` (``view``: its layout, when the caller has it).
        Pure; never raises for a valid action."""
        kind = action.type
        if kind in TERMINAL_TYPES:
            return state, Result(details={"note": f"{kind} ends the episode; the phone is unchanged"})
        work = _Work(self, state)
        result = Result()
        view = view or self.view(state, full=False)
        if kind in (CLICK, LONG_CLICK):
            self._touch(work, view, action, result)
        elif kind == TYPE:
            self._type(work, view, action.text or "", result)
        elif kind == SCROLL:
            self._scroll(work, view, action.direction or "", result)
        elif kind == OPENAPP:
            app = self.bundle.find(action.app or "")
            if app is None:
                names = ", ".join(a.name for a in self.bundle.apps)
                result.ok = False
                result.error = f"no app named '{action.app}' is installed (installed: {names})"
            else:
                work.open_app(app.id)
        elif kind == PRESS_BACK:
            self._back(work, state)
        elif kind == PRESS_HOME:
            work.home()
        elif kind == PRESS_ENTER:
            self._enter(work, state, result)
        elif kind == WAIT:
            if state.app != LAUNCHER and state.dialog is None:
                work.run(self.screen(state.app, view.screen).on_wait)
        return work.freeze(), result

    def _touch(self, work: "_Work", view: View, action: Action, result: Result) -> None:
        x, y = action.x or 0, action.y or 0
        if not (0 <= x < self.width and 0 <= y < self.height):
            result.ok = False
            result.error = f"({x}, {y}) is off the {self.width}x{self.height} screen"
            return
        target = view.hit(x, y)
        state = work.origin
        result.details["hit"] = target.label if target else None
        if target is None:
            work.focus = None  # a tap on nothing hides the keyboard
            return
        special = target.special
        if special == "back":
            self._back(work, state)
        elif special == "home":
            work.home()
        elif special == "outside":
            dialog = self.dialog(state.app, state.dialog) if state.dialog else None
            if dialog is not None and dialog.cancelable:
                work.dialog = None
                work.run(dialog.on_dismiss)
        elif special == "inside":
            pass
        elif special == "focus":
            work.focus = target.arg.id
        elif special == "key":
            self._key(work, state, target.arg, result)
        else:
            effects = target.tap
            if action.type == LONG_CLICK and target.long:
                effects = target.long
            # Android performs the click when a long press is not handled.
            if effects is None:
                return
            if work.dialog is None:
                work.focus = None
            work.run(effects)

    @staticmethod
    def _reachable_fields(view: View) -> list[tuple[Element, Target]]:
        """The fields keys can reach: a dialog is modal, so while one is open only its own
        fields take input (on a phone the dialog's window has the keyboard focus)."""
        if view.dialog_box is None:
            return view.fields
        left, top, right, bottom = view.dialog_box
        return [(el, t) for el, t in view.fields
                if left <= t.bounds[0] and top <= t.bounds[1]
                and t.bounds[2] <= right and t.bounds[3] <= bottom]

    def _focused_field(self, state: SimState, view: View) -> Element | None:
        for el, _ in self._reachable_fields(view):
            if el.id == state.focus:
                return el
        return None

    def _type(self, work: "_Work", view: View, text: str, result: Result) -> None:
        state = work.origin
        el = self._focused_field(state, view)
        if el is None:
            fields = self._reachable_fields(view)
            if len(fields) == 1:
                # Documented convenience: with exactly one text field on screen, TYPE goes
                # into it (and focuses it), as ADB's input would after a tap.
                el = fields[0][0]
                work.focus = el.id
            else:
                result.ok = False
                if view.dialog_box is not None and not fields and view.fields:
                    result.error = "a dialog covers the screen and takes the keys; close it first"
                else:
                    result.error = ("no text field is focused; tap a field first" if fields else
                                    "there is no text field on this screen to type into")
                return
        # TYPE replaces the field's text (AndroidWorld's type action clears first), which
        # keeps the state space finite for the oracle.
        work.set(el.var, text)

    def _key(self, work: "_Work", state: SimState, ch: str, result: Result) -> None:
        el = self._focused_field(state, self.view(state, full=False))
        if el is None:
            return
        if ch == "\n":
            self._enter(work, state, result)
            return
        current = work.get(el.var) or ""
        work.set(el.var, str(current)[:-1] if ch == "<" else f"{current}{ch}")

    def _enter(self, work: "_Work", state: SimState, result: Result) -> None:
        el = self._focused_field(state, self.view(state, full=False))
        if el is None:
            result.details["note"] = "nothing is focused"
            return
        work.focus = None  # the IME action closes the keyboard
        work.run(el.on_enter)

    def _scroll(self, work: "_Work", view: View, direction: str, result: Result) -> None:
        if direction not in ("UP", "DOWN") or not view.lists:
            result.details["note"] = "nothing on this screen scrolls that way"
            return
        lid, offset, max_offset, page = max(view.lists, key=lambda item: item[2])
        # The finger's direction: UP drags content up, bringing later items into view.
        new = offset + page if direction == "UP" else offset - page
        new = max(0, min(max_offset, new))
        if new != offset:
            work.scroll[lid] = new
        else:
            result.details["note"] = "the list is already at its " + (
                "end" if direction == "UP" else "start")

    def _back(self, work: "_Work", state: SimState) -> None:
        if state.focus is not None:
            work.focus = None  # BACK first hides the keyboard
            return
        if state.dialog is not None:
            dialog = self.dialog(state.app, state.dialog)
            if dialog.cancelable:
                work.dialog = None
                work.run(dialog.on_dismiss)
            return
        if state.app == LAUNCHER:
            return
        shown = self.displayed_screen(state)
        scr = self.screen(state.app, shown)
        if scr.on_back is not None:
            work.run(scr.on_back)
        else:
            work.back()


@functools.lru_cache(maxsize=256)
def _bound_check(var: str, op: str, limit: float) -> expr_mod.Expr:
    """``var < limit`` (or ``>``): may a stepper still move that way?"""
    return expr_mod.parse(f"{var} {op} {limit!r}")


def _ident(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", str(value)).strip("_").lower() or "x"


class _Work:
    """A mutable working copy of a state while one action's effects run."""

    def __init__(self, world: World, state: SimState):
        self.world = world
        self.origin = state
        self.values = list(state.values)
        self.app = state.app
        self.stack = list(state.stack)
        self.dialog = state.dialog
        self.focus = state.focus
        self.scroll = dict(state.scroll)
        self.depth = 0

    def get(self, name: str) -> Any:
        return self.values[self.world.var_index[name]]

    def set(self, name: str, value: Any) -> None:
        self.values[self.world.var_index[name]] = value

    def add(self, eff: Effect) -> None:
        """``add``: a literal amount, or (``{var: name}``) the number another variable holds
        now; when it holds no number (true/false, text that is not a number) nothing
        changes."""
        amount = eff.value if eff.source is None else number_value(self.get(eff.source))
        if amount is not None:
            self.set(eff.target, (self.get(eff.target) or 0) + amount)

    def env(self) -> expr_mod.Env:
        index, values = self.world.var_index, self.values

        def lookup(name: str) -> Any:
            i = index.get(name)
            if i is not None:
                return values[i]
            if name == "app":
                return self.app
            if name == "package":
                return self.world.package_of(self.app)
            if name == "screen":
                return self.stack[-1] if self.stack else HOME_SCREEN
            if name == "dialog":
                return self.dialog
            return None

        return lookup

    def run(self, effects: Effects) -> None:
        self.depth += 1
        if self.depth > 50:  # a cycle of on_enter effects; stop rather than hang
            return
        for eff in effects:
            op = eff.op
            if op == "set":
                self.set(eff.target, eff.value if eff.source is None else self.get(eff.source))
            elif op == "toggle":
                self.set(eff.target, not self.get(eff.target))
            elif op == "add":
                self.add(eff)
            elif op == "go":
                self.go(eff.target)
            elif op == "back":
                self.back()
            elif op == "home":
                self.home()
            elif op == "open_app":
                app = self.world.bundle.find(eff.target)
                if app is not None:
                    self.open_app(app.id)
            elif op == "open":
                self.dialog = eff.target
            elif op == "close":
                self.dialog = None
            elif op == "if":
                self.run(eff.then if eff.cond(self.env()) else eff.otherwise)
        self.depth -= 1

    def _entered(self) -> None:
        self.focus = None
        self.scroll = {}
        self.dialog = None
        top = self.stack[-1]
        self.run(self.world.screen(self.app, top).on_enter)
        self.run(tuple(self.world.layer.hooks.get((self.app, top), ())))

    def go(self, screen: str) -> None:
        if self.app == LAUNCHER:
            return
        # Navigating to a screen already on the stack pops back to it (clear-top), so the
        # stack never grows without bound and the oracle's search stays finite.
        if screen in self.stack:
            del self.stack[self.stack.index(screen) + 1:]
        else:
            self.stack.append(screen)
        self._entered()

    def back(self) -> None:
        self.focus, self.scroll, self.dialog = None, {}, None
        if len(self.stack) > 1:
            self.stack.pop()
        else:
            self.home()

    def home(self) -> None:
        self.app, self.stack, self.dialog, self.focus, self.scroll = LAUNCHER, [], None, None, {}

    def open_app(self, app_id: str) -> None:
        app = self.world.app(app_id)
        self.app, self.stack = app_id, [app.start]
        self.focus, self.scroll, self.dialog = None, {}, None
        self.run(app.on_open)
        if self.app == app_id and self.stack == [app.start]:
            self._entered()

    def freeze(self, tick: int | None = None) -> SimState:
        world = self.world
        if tick is None:
            tick = min(self.origin.tick + 1, world.max_tick) if world.max_tick else 0
            for at, app, dialog, done in world.layer.triggers:
                if (at == tick and self.origin.tick < at and not self.get(done)
                        and (app is None or app == self.app)):
                    self.dialog = dialog
        return SimState(
            tuple(self.values), self.app, tuple(self.stack), self.dialog, self.focus,
            tuple(sorted((k, v) for k, v in self.scroll.items() if v)) if self.scroll else (),
            tick,
        )


_WORLDS: dict[tuple[int, tuple[Perturbation, ...], int, int], World] = {}


def world_for(bundle: AppBundle, perturbations: tuple[Perturbation, ...] = (),
              width: int = 1080, height: int = 2400) -> World:
    """A shared compiled world (worlds are immutable, so phones and oracles share them)."""
    key = (id(bundle), tuple(perturbations), width, height)
    world = _WORLDS.get(key)
    if world is None or world.bundle is not bundle:
        world = World(bundle, tuple(perturbations), width, height)
        _WORLDS[key] = world
        if len(_WORLDS) > 256:
            _WORLDS.pop(next(iter(_WORLDS)))
    return world
