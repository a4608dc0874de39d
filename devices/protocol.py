"""The device protocol everything above a phone talks to (simulator now, adb phones later).

Pure Python. A device is owned by exactly one process, the device host; workers and the
console reach it only through the host (see ``devices/host.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from PIL import Image

from devices.actions import Action, ActionOutcome
from devices.uitree import UINode


@dataclass(frozen=True)
class AppInfo:
    """An installed app, as OPENAPP and a launcher know it."""

    name: str
    package: str
    description: str = ""

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "package": self.package, "description": self.description}


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    width: int  # device pixels
    height: int
    kind: str = "sim"  # "sim" | "adb"
    apps: tuple[AppInfo, ...] = ()


@dataclass
class Frame:
    """An encoded screen image. ``number`` increases whenever the screen changes."""

    number: int
    jpeg: bytes
    width: int  # pixel size of the encoded image (may be smaller than the device)
    height: int


@dataclass
class Observation:
    """What an agent sees at one step."""

    frame: int
    width: int  # device pixels
    height: int
    app: str  # foreground package
    nodes: list[UINode]
    image: Image.Image  # rendered screenshot (possibly downscaled from device pixels)
    jpeg: bytes  # the same image, encoded
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Device(Protocol):
    info: DeviceInfo

    def observe(self) -> Observation:
        """Screenshot, UI nodes and foreground app of the current screen."""

    def perform(self, action: Action) -> ActionOutcome:
        """Execute one action; never raises for a valid action the screen can't use."""

    def latest_frame(self) -> Frame:
        """The newest frame, rendered and encoded at most once per screen change."""

    def wait_for_frame(self, after: int, timeout: float) -> Frame | None:
        """Block until a frame newer than ``after`` exists; ``None`` on timeout."""
