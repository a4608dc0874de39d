"""Actions, reasons and decisions in the words a person reads ("Tapped ‘Wi-Fi’")."""
from __future__ import annotations

from typing import Any

_PAST = {
    "PRESS_BACK": "Pressed Back", "PRESS_HOME": "Pressed Home", "PRESS_ENTER": "Pressed Enter",
    "WAIT": "Waited for the screen", "COMPLETE": "Said the task is done",
    "IMPOSSIBLE": "Said the task is impossible",
}
_PROPOSED = {
    "PRESS_BACK": "Press Back", "PRESS_HOME": "Press Home", "PRESS_ENTER": "Press Enter",
    "WAIT": "Wait for the screen", "COMPLETE": "Finish: the task is done",
    "IMPOSSIBLE": "Give up: the task is impossible",
}
_SCROLL = {"UP": "up", "DOWN": "down", "LEFT": "left", "RIGHT": "right"}


def action_words(action: Any, *, done: bool = True) -> str:
    """``{"type": "CLICK", "element": "Wi-Fi", …}`` → "Tapped ‘Wi-Fi’" (or "Tap ‘Wi-Fi’").

    ``done`` picks the past tense (what happened) over the imperative (a proposal).
    Anything that is not an action dict reads as "–", never as a Python repr.
    """
    if not isinstance(action, dict) or not action.get("type"):
        return "–"
    kind = str(action["type"]).upper()
    element = action.get("element")
    if kind in ("CLICK", "LONG_CLICK"):
        verb = ("Tapped" if done else "Tap") if kind == "CLICK" else (
            "Long-pressed" if done else "Long-press")
        if element:
            return f"{verb} ‘{element}’"
        return f"{verb} at ({action.get('x')}, {action.get('y')})"
    if kind == "TYPE":
        return f"{'Typed' if done else 'Type'} “{action.get('text', '')}”"
    if kind == "SCROLL":
        # The direction the finger moves (CONTRACT "Actions").
        where = _SCROLL.get(str(action.get("direction", "")).upper(), "")
        return f"{'Swiped' if done else 'Swipe'} {where}".strip()
    if kind == "OPENAPP":
        return f"{'Opened' if done else 'Open'} {action.get('app', 'an app')}"
    table = _PAST if done else _PROPOSED
    return table.get(kind, kind.replace("_", " ").capitalize())


DECISION_WORDS = {
    "approve": "Approved", "edit": "Edited", "takeover": "Took over", "answer": "Answered",
    "abort": "Aborted", "": "Not decided yet",
}


def decision_words(decision: str | None, status: str = "") -> str:
    if not decision:
        return {"expired": "Expired", "cancelled": "Cancelled"}.get(status, "Not decided yet")
    return DECISION_WORDS.get(decision, decision)


def duration_words(seconds: float | None) -> str:
    """12.3 → "12 s", 95 → "1 min 35 s", None → "–"."""
    if seconds is None:
        return "–"
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"
