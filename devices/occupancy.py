"""Who is using a phone, answered by the layer that runs tasks on phones.

The devices app knows phones, not tasks, and imports nothing of the agents. The agents'
runtime registers its :class:`Occupancy` when Django starts
(``agents.runtime.apps.AgentsConfig.ready``), and through it a phone's live status
("busy" while a task drives it), who besides operators may watch its screen, and where
an operator's take-over input goes are answered here. With none registered (the devices
app on its own) no phone is busy, only operators watch, and input is refused.
"""
from __future__ import annotations

from typing import Any, Protocol

from access.errors import Forbidden


class Occupancy(Protocol):
    def driving(self, device: Any) -> Any | None:
        """The task driving ``device`` now (one at a time; others queue), or None."""

    def on_screen_for(self, user: Any, device_id: Any) -> bool:
        """Whether one of ``user``'s tasks is on the phone now (so they may watch it)."""

    def take_over_input(self, device: Any, user: Any, action: Any) -> Any:
        """Perform an operator's input on the task taken over on ``device``; the step."""


class Unoccupied:
    """No task layer: phones are idle, watched by operators only, and take no input."""

    def driving(self, device: Any) -> None:
        return None

    def on_screen_for(self, user: Any, device_id: Any) -> bool:
        return False

    def take_over_input(self, device: Any, user: Any, action: Any) -> Any:
        raise Forbidden("no task on this device is taken over")


_occupancy: Occupancy = Unoccupied()


def register(occupancy: Occupancy) -> None:
    global _occupancy
    _occupancy = occupancy


def occupancy() -> Occupancy:
    return _occupancy
