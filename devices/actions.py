"""The action space: one schema for agents, operators, the API and devices.

Pure Python (no Django). Two representations, both ways:

* canonical JSON: ``{"type": "CLICK", "x": 540, "y": 1200}`` — coordinates in device pixels;
* the OS-Atlas text form models read and write (OS-Kairos App. C.1, Fig. 14):
  ``CLICK <point>[[x, y]]</point>`` with x, y normalised to 0–1000, ``TYPE [text]``,
  ``SCROLL [UP]``, ``OPEN_APP [Clock]``, ``PRESS_BACK``, ...

SCROLL's direction is the way the **finger** moves, as in AITZ and OS-Atlas: ``SCROLL UP``
drags the finger upwards, which brings content further down the list into view.

Validation never raises into a caller's loop: :func:`validate_action` and
:func:`action_from_text` return either an :class:`Action` or an :class:`ActionError`
with a message a person can read. :func:`parse_action` is the raising variant for code
that wants an exception.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

CLICK = "CLICK"
LONG_CLICK = "LONG_CLICK"
TYPE = "TYPE"
SCROLL = "SCROLL"
OPENAPP = "OPENAPP"
PRESS_BACK = "PRESS_BACK"
PRESS_HOME = "PRESS_HOME"
PRESS_ENTER = "PRESS_ENTER"
WAIT = "WAIT"
COMPLETE = "COMPLETE"
IMPOSSIBLE = "IMPOSSIBLE"

ACTION_TYPES: tuple[str, ...] = (
    CLICK, LONG_CLICK, TYPE, SCROLL, OPENAPP, PRESS_BACK, PRESS_HOME, PRESS_ENTER,
    WAIT, COMPLETE, IMPOSSIBLE,
)
POINT_TYPES = frozenset({CLICK, LONG_CLICK})
TERMINAL_TYPES = frozenset({COMPLETE, IMPOSSIBLE})
DIRECTIONS: tuple[str, ...] = ("UP", "DOWN", "LEFT", "RIGHT")
MAX_TEXT_LENGTH = 1000
MAX_APP_LENGTH = 100
MAX_ELEMENT_LENGTH = 200

# Aliases seen in model output and datasets, mapped to the canonical type.
_TYPE_ALIASES = {
    "TAP": CLICK,
    "LONG_PRESS": LONG_CLICK,
    "LONGPRESS": LONG_CLICK,
    "LONG_TAP": LONG_CLICK,
    "OPEN_APP": OPENAPP,
    "OPEN": OPENAPP,
    "BACK": PRESS_BACK,
    "HOME": PRESS_HOME,
    "ENTER": PRESS_ENTER,
    "SWIPE": SCROLL,
    "INPUT": TYPE,
    "INPUT_TEXT": TYPE,
    "DONE": COMPLETE,
    "FINISH": COMPLETE,
    "STATUS_TASK_COMPLETE": COMPLETE,
    "STATUS_TASK_IMPOSSIBLE": IMPOSSIBLE,
}


@dataclass(frozen=True)
class Action:
    """One validated action. Only the fields of its type are set."""

    type: str
    x: int | None = None
    y: int | None = None
    text: str | None = None
    direction: str | None = None
    app: str | None = None
    element: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        for name in ("x", "y", "text", "direction", "app", "element"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @property
    def is_terminal(self) -> bool:
        return self.type in TERMINAL_TYPES

    def describe(self) -> str:
        """A short plain-words form, used in histories and the UI."""
        if self.type in POINT_TYPES:
            target = f" '{self.element}'" if self.element else ""
            return f"{self.type}{target} at ({self.x}, {self.y})"
        if self.type == TYPE:
            return f'TYPE "{self.text}"'
        if self.type == SCROLL:
            return f"SCROLL {self.direction}"
        if self.type == OPENAPP:
            return f"OPENAPP {self.app}"
        return self.type

    def same_as(self, other: "Action") -> bool:
        """Equal ignoring the optional ``element`` label."""
        return self.to_json() | {"element": None} == other.to_json() | {"element": None}


@dataclass(frozen=True)
class ActionError:
    """Why an action was refused; ``field`` names the offending field when there is one."""

    message: str
    field: str | None = None

    def __str__(self) -> str:
        return self.message


class InvalidAction(ValueError):
    def __init__(self, error: ActionError):
        super().__init__(error.message)
        self.error = error


@dataclass(frozen=True)
class Screen:
    """Device size in pixels, used to check and convert coordinates."""

    width: int
    height: int


def _as_screen(screen: Screen | tuple[int, int] | None) -> Screen | None:
    if screen is None or isinstance(screen, Screen):
        return screen
    return Screen(int(screen[0]), int(screen[1]))


# No screen is this large; a bound keeps "1e400", "inf" or 400 nines from overflowing.
MAX_COORDINATE = 10**6


def _coerce_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip()[:64])
        except ValueError:
            return None
    if isinstance(value, float):
        if value != value or abs(value) >= MAX_COORDINATE:  # NaN, ±inf, huge
            return None
        return int(round(value))
    if isinstance(value, int) and abs(value) < MAX_COORDINATE:
        return value
    return None


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored or shown, or None.

    PostgreSQL refuses NUL in text and JSON; a lone UTF-16 surrogate (``"\\ud800"`` in
    JSON) is not valid Unicode and fails when encoded for the database or a socket.
    """
    if "\x00" in text:
        return "contains a NUL character"
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        return "contains a lone surrogate (invalid Unicode)"
    return None


def normalise_type(name: Any) -> str | None:
    if not isinstance(name, str):
        return None
    key = name.strip().upper().replace("-", "_").replace(" ", "_")
    if key in ACTION_TYPES:
        return key
    return _TYPE_ALIASES.get(key)


def validate_action(
    data: Any, screen: Screen | tuple[int, int] | None = None
) -> Action | ActionError:
    """Check a JSON-like action; return the canonical :class:`Action` or an error.

    With ``screen`` given, CLICK/LONG_CLICK coordinates must lie on the screen.
    Never raises.
    """
    screen = _as_screen(screen)
    if isinstance(data, Action):
        data = data.to_json()
    if not isinstance(data, dict):
        return ActionError("an action must be a JSON object with a 'type'")
    raw_type = data.get("type")
    if raw_type is None or raw_type == "":
        return ActionError("the action has no 'type'", "type")
    kind = normalise_type(raw_type)
    if kind is None:
        shown = str(raw_type)[:40]
        return ActionError(
            f"unknown action type '{shown}'; expected one of {', '.join(ACTION_TYPES)}", "type"
        )
    # Fields that do not belong to the type are ignored, but must still be well-formed.
    for name in ("x", "y"):
        if data.get(name) not in (None, "") and _coerce_int(data[name]) is None and \
                kind not in POINT_TYPES:
            return ActionError(f"'{name}' must be a number of device pixels", name)
    for name in ("text", "direction", "app"):
        if data.get(name) is not None and not isinstance(data[name], str):
            return ActionError(f"'{name}' must be a string", name)
    element = data.get("element")
    if element is not None:
        if not isinstance(element, str) or len(element) > MAX_ELEMENT_LENGTH:
            return ActionError(
                f"'element' must be a string of at most {MAX_ELEMENT_LENGTH} characters",
                "element",
            )
        if problem := text_problem(element):
            return ActionError(f"'element' {problem}", "element")
        element = element or None

    if kind in POINT_TYPES:
        x, y = _coerce_int(data.get("x")), _coerce_int(data.get("y"))
        for name, value in (("x", x), ("y", y)):
            if value is None:
                return ActionError(f"{kind} needs an integer '{name}' in device pixels", name)
        assert x is not None and y is not None
        if x < 0 or y < 0:
            return ActionError(f"{kind} at ({x}, {y}) is off the screen", "x" if x < 0 else "y")
        if screen is not None and (x >= screen.width or y >= screen.height):
            return ActionError(
                f"{kind} at ({x}, {y}) is off the {screen.width}x{screen.height} screen",
                "x" if x >= screen.width else "y",
            )
        return Action(kind, x=x, y=y, element=element)
    if kind == TYPE:
        text = data.get("text")
        if not isinstance(text, str):
            return ActionError("TYPE needs a 'text' string", "text")
        if not text.strip():
            return ActionError("TYPE needs non-empty 'text'", "text")
        if len(text) > MAX_TEXT_LENGTH:
            return ActionError(
                f"TYPE text is {len(text)} characters; at most {MAX_TEXT_LENGTH} are allowed",
                "text",
            )
        if problem := text_problem(text):
            return ActionError(f"TYPE text {problem}", "text")
        return Action(kind, text=text, element=element)
    if kind == SCROLL:
        direction = data.get("direction")
        norm = direction.strip().upper() if isinstance(direction, str) else None
        if norm not in DIRECTIONS:
            return ActionError(
                f"SCROLL needs 'direction' one of {', '.join(DIRECTIONS)} (the way the finger moves)",
                "direction",
            )
        return Action(kind, direction=norm, element=element)
    if kind == OPENAPP:
        app = data.get("app")
        if not isinstance(app, str) or not app.strip():
            return ActionError("OPENAPP needs a non-empty 'app' name", "app")
        if len(app) > MAX_APP_LENGTH:
            return ActionError(f"OPENAPP 'app' is longer than {MAX_APP_LENGTH} characters", "app")
        if problem := text_problem(app):
            return ActionError(f"OPENAPP 'app' {problem}", "app")
        return Action(kind, app=app.strip(), element=element)
    return Action(kind, element=element)


def parse_action(data: Any, screen: Screen | tuple[int, int] | None = None) -> Action:
    """Like :func:`validate_action` but raises :class:`InvalidAction`."""
    result = validate_action(data, screen)
    if isinstance(result, ActionError):
        raise InvalidAction(result)
    return result


# --- OS-Atlas text form -------------------------------------------------------------

_TEXT_NAMES = {
    CLICK: "CLICK",
    LONG_CLICK: "LONG_PRESS",
    TYPE: "TYPE",
    SCROLL: "SCROLL",
    OPENAPP: "OPEN_APP",
    PRESS_BACK: "PRESS_BACK",
    PRESS_HOME: "PRESS_HOME",
    PRESS_ENTER: "ENTER",
    WAIT: "WAIT",
    COMPLETE: "COMPLETE",
    IMPOSSIBLE: "IMPOSSIBLE",
}

_NUM = r"-?\d+(?:\.\d+)?"
_POINT_RE = re.compile(
    rf"<point>\s*\[?\s*\[\s*({_NUM})\s*,\s*({_NUM})\s*\]\s*\]?\s*</point>"
    rf"|\[\s*\[\s*({_NUM})\s*,\s*({_NUM})\s*\]\s*\]"
    rf"|\(\s*({_NUM})\s*,\s*({_NUM})\s*\)"
    rf"|\[\s*({_NUM})\s*,\s*({_NUM})\s*\]",
    re.IGNORECASE,
)
_HEAD_RE = re.compile(r"^\s*([A-Za-z][A-Za-z_ -]*?)(?=\s*(?:<|\[|\(|$))", re.DOTALL)


def to_normalised(value: int, size: int) -> int:
    """Device pixel → 0–1000 (OS-Atlas)."""
    return max(0, min(1000, round(value * 1000 / size)))


def from_normalised(value: float, size: int) -> int:
    """0–1000 → device pixel, clamped to the screen."""
    return max(0, min(size - 1, int(round(value * size / 1000))))


def action_to_text(action: Action, screen: Screen | tuple[int, int]) -> str:
    """Render the OS-Atlas form a model is prompted with."""
    screen = _as_screen(screen)
    assert screen is not None
    name = _TEXT_NAMES[action.type]
    if action.type in POINT_TYPES:
        assert action.x is not None and action.y is not None
        nx, ny = to_normalised(action.x, screen.width), to_normalised(action.y, screen.height)
        return f"{name} <point>[[{nx}, {ny}]]</point>"
    if action.type == TYPE:
        return f"{name} [{action.text}]"
    if action.type == SCROLL:
        return f"{name} [{action.direction}]"
    if action.type == OPENAPP:
        return f"{name} [{action.app}]"
    return name


def action_from_text(text: Any, screen: Screen | tuple[int, int]) -> Action | ActionError:
    """Parse one OS-Atlas action (``CLICK <point>[[x, y]]</point>`` …). Never raises.

    Tolerant of case, spacing and brackets; coordinates are read as 0–1000 and
    converted to device pixels of ``screen``.
    """
    screen = _as_screen(screen)
    assert screen is not None
    if not isinstance(text, str) or not text.strip():
        return ActionError("empty action text")
    body = text.strip().strip("`").strip()
    head = _HEAD_RE.match(body)
    if not head:
        return ActionError(f"no action name in '{body[:60]}'")
    kind = normalise_type(head.group(1))
    if kind is None:
        return ActionError(f"unknown action '{head.group(1).strip()[:40]}'", "type")
    rest = body[head.end():].strip()
    if kind in POINT_TYPES:
        match = _POINT_RE.search(rest)
        if not match:
            return ActionError(f"{kind} needs a point like <point>[[x, y]]</point>", "x")
        numbers = [g for g in match.groups() if g is not None]
        nx, ny = float(numbers[0]), float(numbers[1])
        if not (0 <= nx <= 1000 and 0 <= ny <= 1000):
            return ActionError(f"{kind} point ({nx:g}, {ny:g}) is outside 0–1000", "x")
        return validate_action(
            {"type": kind, "x": from_normalised(nx, screen.width),
             "y": from_normalised(ny, screen.height)},
            screen,
        )
    argument = _bracket_argument(rest)
    if kind == TYPE:
        return validate_action({"type": kind, "text": argument}, screen)
    if kind == SCROLL:
        return validate_action({"type": kind, "direction": argument}, screen)
    if kind == OPENAPP:
        return validate_action({"type": kind, "app": argument}, screen)
    return Action(kind)


def _bracket_argument(rest: str) -> str:
    rest = rest.strip()
    if rest.startswith("[") and "]" in rest:
        return rest[1: rest.rindex("]")].strip()
    return rest.strip().strip("\"'")


@dataclass
class ActionOutcome:
    """What a device reports after :meth:`perform`."""

    ok: bool
    changed: bool = False
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
