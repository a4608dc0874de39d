"""The phone's state as a value: :class:`SimState` (everything that decides what the phone
shows, immutable and hashable, so the oracle can search over it and a device can snapshot
it) and the :class:`Result` a step reports.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devices.sim.model import LAUNCHER

HOME_SCREEN = "home"


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
