"""The in-memory form of app files: what the loader builds and the engine runs.

Everything here is immutable once loaded, so a compiled world can be shared by every
simulated phone and by the oracle's search without copying.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from devices.sim.expr import Expr

ELEMENT_KINDS: tuple[str, ...] = (
    "text", "button", "icon", "image", "row", "switch", "checkbox", "radio_group", "field",
    "list", "tabs", "spacer", "stepper", "radio",
)
EFFECT_OPS: tuple[str, ...] = (
    "go", "back", "home", "open_app", "set", "toggle", "add", "open", "close", "if",
)
RESERVED_NAMES = frozenset({"app", "screen", "dialog", "package", "sys"})
LAUNCHER = "launcher"

# --- display-text templates --------------------------------------------------------------
# ``{var}`` shows a value; ``{cond ? Then : Else}`` (in app files) shows one of two texts
# by a condition — a label that depends on state ("Locked" / "Unlocked"). The loader
# compiles each conditional once, registers it here and leaves ``{?<key>}`` in the text.
# A branch is itself a template: it may show ``{var}`` and hold another conditional's
# ``{?<key>}`` ("Booked for {slot}").
TEMPLATE_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")
CONDITIONAL_RE = re.compile(r"\{\?([0-9a-f]{16})\}")
_CONDITIONALS: dict[str, tuple[Expr, str, str]] = {}


def register_conditional(cond: Expr, then: str, otherwise: str, scope: str) -> str:
    """Register a conditional text; return the placeholder that stands for it."""
    key = hashlib.sha1(f"{scope}\0{cond.source}\0{then}\0{otherwise}".encode()).hexdigest()[:16]
    _CONDITIONALS[key] = (cond, then, otherwise)
    return "{?" + key + "}"


def template_names(text: str) -> set[str]:
    """Every variable a display text reads (``{var}`` and conditional texts)."""
    if "{" not in text:
        return set()
    return set(TEMPLATE_RE.findall(text)) | conditional_names(text)


def conditional_names(text: str) -> set[str]:
    """The variables read by the conditional texts of ``text`` only: their conditions and
    whatever their branches show."""
    names: set[str] = set()
    for key in CONDITIONAL_RE.findall(text or ""):
        cond, then, otherwise = _CONDITIONALS[key]
        names.update(cond.names)
        names.update(template_names(then + otherwise))
    return names


def fill_template(text: str, env: Callable[[str], Any], fmt: Callable[[Any], str]) -> str:
    """``text`` with conditionals resolved and ``{var}`` values formatted by ``fmt``."""
    if "{" not in text:
        return text
    if "{?" in text:
        def pick(match: re.Match[str]) -> str:
            cond, then, otherwise = _CONDITIONALS[match.group(1)]
            chosen = then if cond(env) else otherwise
            return CONDITIONAL_RE.sub(pick, chosen) if "{?" in chosen else chosen

        text = CONDITIONAL_RE.sub(pick, text)
    return TEMPLATE_RE.sub(lambda m: fmt(env(m.group(1))), text)


def number_value(value: Any) -> int | float | None:
    """The number a variable holds for ``add: {x: {var: y}}``: a number as it is, null as
    0, text that reads as a number (typed "15") as that number; None for anything else."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[-+]?\d+", text):
            return int(text)
        if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+)", text):
            return float(text)
    return None


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
    # set/add: the variable (qualified) whose current value is written or added instead
    # of ``value`` (``set: {booked: {var: picked}}``); None: ``value`` is the literal
    source: str | None = None


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
    # switch/checkbox: a tap while ``confirm_when`` holds opens the dialog ``confirm``
    # (made by the loader) instead of flipping the switch; its confirm button flips it.
    confirm: str | None = None
    confirm_when: Expr | None = None
    # stepper: the bounds and the step of its number (None: unbounded)
    minimum: float | None = None
    maximum: float | None = None
    step: float = 1
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
