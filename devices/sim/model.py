"""The in-memory form of app files: what the loader builds and the engine runs.

Everything here is immutable once loaded, so a compiled world can be shared by every
simulated phone and by the oracle's search without copying.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devices.sim.expr import Expr

ELEMENT_KINDS: tuple[str, ...] = (
    "text", "button", "icon", "image", "row", "switch", "checkbox", "radio_group", "field",
    "list", "tabs", "spacer",
)
EFFECT_OPS: tuple[str, ...] = (
    "go", "back", "home", "open_app", "set", "toggle", "add", "open", "close", "if",
)
RESERVED_NAMES = frozenset({"app", "screen", "dialog", "package", "sys"})
LAUNCHER = "launcher"
LAUNCHER_PACKAGE = "com.android.launcher3"
SYSTEMUI_PACKAGE = "com.android.systemui"
PERMISSION_PACKAGE = "com.android.permissioncontroller"


@dataclass(frozen=True)
class Effect:
    """One step of a transition. ``op`` is one of :data:`EFFECT_OPS`."""

    op: str
    target: str | None = None  # screen, app, dialog or variable (qualified)
    value: Any = None
    cond: Expr | None = None
    then: tuple["Effect", ...] = ()
    otherwise: tuple["Effect", ...] = ()


Effects = tuple[Effect, ...]


@dataclass(frozen=True)
class Option:
    value: Any
    text: str


@dataclass(frozen=True)
class Element:
    kind: str
    id: str
    text: str = ""
    subtitle: str = ""
    desc: str = ""
    var: str | None = None  # qualified variable a switch/checkbox/radio/field is bound to
    visible: Expr | None = None
    enabled: Expr | None = None
    on_tap: Effects = ()
    on_long_tap: Effects = ()
    on_change: Effects = ()
    on_enter: Effects = ()
    options: tuple[Option, ...] = ()
    items: tuple["Element", ...] = ()
    hint: str = ""
    password: bool = False
    style: str = ""
    rows: int | None = None
    height: int | None = None
    glyph: str = ""
    color: str = ""
    screen: str | None = None  # tabs: the screen a tab shows
    where: str = ""  # place in the file, for messages


@dataclass(frozen=True)
class Dialog:
    id: str
    title: str = ""
    text: str = ""
    elements: tuple[Element, ...] = ()
    buttons: tuple[Element, ...] = ()
    cancelable: bool = True
    on_dismiss: Effects = ()  # run when closed by BACK or a tap outside
    package: str | None = None  # system dialogs (permissions) belong to another package
    where: str = ""


@dataclass(frozen=True)
class Gate:
    """While ``when`` holds, ``screen`` is shown in place of the gated screen."""

    when: Expr
    screen: str


@dataclass(frozen=True)
class Screen:
    id: str
    title: str = ""
    elements: tuple[Element, ...] = ()
    toolbar: tuple[Element, ...] = ()
    on_enter: Effects = ()
    on_back: Effects | None = None  # None: pop the back stack
    on_wait: Effects = ()
    gates: tuple[Gate, ...] = ()
    up: bool | None = None  # show the "Navigate up" arrow; None: on every non-start screen
    where: str = ""


@dataclass
class AppSpec:
    id: str
    name: str
    package: str
    description: str = ""
    start: str = ""
    icon_color: str = "#3F51B5"
    icon_glyph: str = ""
    state: dict[str, Any] = field(default_factory=dict)  # qualified name -> initial value
    screens: dict[str, Screen] = field(default_factory=dict)
    dialogs: dict[str, Dialog] = field(default_factory=dict)
    on_open: Effects = ()
    path: str = ""  # the file, as shown in messages
    # (where, qualified name) of variables this app reads or writes in other apps
    foreign: tuple[tuple[str, str], ...] = ()
    # (where, app) named by open_app effects, checked against the bundle
    opens: tuple[tuple[str, str], ...] = ()
