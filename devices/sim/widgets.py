"""The pieces a screen is laid out from: the layout constants, the touch targets
(:class:`Target`) and the laid-out :class:`View`, the builder that collects a layout's UI
nodes, targets and drawing operations, and how each element kind (text, button, row,
switch, stepper, radio, field, ...) is laid out: its nodes in the uiautomator schema, what a
touch on it does, and how it is drawn.

:class:`_Widgets` is mixed into :class:`~devices.sim.world.World` through
:class:`~devices.sim.layout._Layout`; it uses the world's ``u``, ``width``, ``text`` and
``_heights``.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import devices.sim.expr as expr_mod
from devices.sim.model import Effect, Effects, Element
from devices.sim.state import SimState
from devices.uitree import Bounds, UINode

CLOCK_TEXT = "9:41"


# --- layout constants (device pixels on a 1080-wide phone; scaled by width/1080) --------

STATUS_H, APPBAR_H, NAV_H, TAB_H, KEYBOARD_H, MARGIN = 84, 168, 132, 180, 880, 48
FONT = {"appbar": 60, "title": 64, "heading": 48, "body": 42, "caption": 34, "button": 44,
        "row": 46, "subtitle": 36, "status": 36, "launcher": 38, "clock": 180, "key": 46}
KEY_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm<")


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


class _Widgets:
    """How one element is laid out (a mixin of :class:`~devices.sim.world.World`)."""

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


@functools.lru_cache(maxsize=256)
def _bound_check(var: str, op: str, limit: float) -> expr_mod.Expr:
    """``var < limit`` (or ``>``): may a stepper still move that way?"""
    return expr_mod.parse(f"{var} {op} {limit!r}")


def _ident(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", str(value)).strip("_").lower() or "x"
