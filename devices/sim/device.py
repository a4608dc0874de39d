"""``SimDevice``: the virtual phone, implementing :class:`devices.protocol.Device`.

Thread-safe: one lock guards the state, and a condition on it wakes live-stream viewers
in :meth:`SimDevice.wait_for_frame`. A frame is rendered and JPEG-encoded at most once per
screen change (cached by frame number); the frame number increases only when what the
screen shows changes.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from PIL import Image

from devices.actions import Action, ActionError, ActionOutcome, validate_action
from devices.protocol import AppInfo, DeviceInfo, Frame, Observation
from devices.sim.loader import AppBundle, bundled_apps
from devices.sim.render import encode_jpeg, render_ops
from devices.sim.suite import SimTask
from devices.sim.state import SimState
from devices.sim.widgets import View
from devices.sim.world import World, world_for


@dataclass(frozen=True)
class Snapshot:
    """A phone's complete state; immutable and hashable, cheap to take and restore."""

    world: World
    state: SimState


class SimDevice:
    """A simulated Android phone running the apps of ``apps`` (default: the bundled apps)."""

    def __init__(self, name: str, apps: AppBundle | None = None, width: int = 1080,
                 height: int = 2400, scale: float = 1 / 3, jpeg_quality: int = 80):
        self.bundle = apps if apps is not None else bundled_apps()
        self.scale = scale
        self.jpeg_quality = jpeg_quality
        self.info = DeviceInfo(
            name=name, width=width, height=height, kind="sim",
            apps=tuple(AppInfo(a.name, a.package, a.description) for a in self.bundle.apps),
        )
        self._lock = threading.RLock()
        self._frame_ready = threading.Condition(self._lock)
        self._world = world_for(self.bundle, (), width, height)
        self._state = self._world.initial_state()
        self._view = self._world.view(self._state)
        self._frame = 1
        self._rendered: tuple[int, Image.Image, bytes] | None = None
        self.task: SimTask | None = None
        self.render_count = 0  # how many frames were drawn; tests use it to prove caching

    # --- Device protocol ------------------------------------------------------------
    def observe(self) -> Observation:
        with self._lock:
            image, jpeg = self._render_locked()
            view = self._view
            return Observation(
                frame=self._frame, width=self.info.width, height=self.info.height,
                app=view.package, nodes=list(view.nodes), image=image.copy(), jpeg=jpeg,
                extra={"screen": view.screen, "app_id": self._state.app,
                       "keyboard": view.keyboard, "dialog": self._state.dialog},
            )

    def perform(self, action: Action | dict[str, Any]) -> ActionOutcome:
        """Execute one action. Never raises: problems come back as ``ok=False``."""
        checked = validate_action(action, (self.info.width, self.info.height))
        if isinstance(checked, ActionError):
            return ActionOutcome(ok=False, error=checked.message)
        try:
            with self._lock:
                new_state, result = self._world.step(self._state, checked)
                changed = self._set_state_locked(self._world, new_state)
                details = dict(result.details)
                details.update(frame=self._frame, screen=self._view.screen,
                               app=self._view.package)
                return ActionOutcome(ok=result.ok, changed=changed, error=result.error,
                                     details=details)
        except Exception as exc:  # a bug in an app file's logic must not kill the host
            return ActionOutcome(ok=False, error=f"the simulator failed: {exc!r}")

    def latest_frame(self) -> Frame:
        with self._lock:
            image, jpeg = self._render_locked()
            return Frame(self._frame, jpeg, image.width, image.height)

    def wait_for_frame(self, after: int, timeout: float) -> Frame | None:
        with self._frame_ready:
            if not self._frame_ready.wait_for(lambda: self._frame > after, timeout):
                return None
            return self.latest_frame()

    # --- simulator extras -------------------------------------------------------------
    def reset(self, task: SimTask | None = None) -> None:
        """A fresh phone on the launcher; with ``task``, its initial state, start screen
        and perturbations applied. The device must have the task's apps installed."""
        with self._lock:
            perturbations = task.perturbations if task else ()
            world = world_for(self.bundle, perturbations, self.info.width, self.info.height)
            state = world.initial_state(
                task.state if task else None,
                task.start.app if task and task.start else None,
                task.start.screen if task and task.start else None,
            )
            self.task = task
            self._set_state_locked(world, state)

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(self._world, self._state)

    def restore(self, snapshot: Snapshot) -> None:
        with self._lock:
            self._set_state_locked(snapshot.world, snapshot.state)

    @property
    def state_vars(self) -> dict[str, Any]:
        with self._lock:
            return self._world.state_vars(self._state)

    @property
    def world(self) -> World:
        return self._world

    @property
    def frame_number(self) -> int:
        return self._frame

    def check(self, task: SimTask) -> bool:
        """The task's success predicate on the current state (False without a predicate)."""
        if task.success is None:
            return False
        with self._lock:
            return self._world.check(task.success, self._state)

    def view(self) -> View:
        with self._lock:
            return self._view

    # --- internals --------------------------------------------------------------------
    def _set_state_locked(self, world: World, state: SimState) -> bool:
        view = world.view(state)
        changed = view.ops != self._view.ops
        self._world, self._state, self._view = world, state, view
        if changed:
            self._frame += 1
            self._frame_ready.notify_all()
        return changed

    def _render_locked(self) -> tuple[Image.Image, bytes]:
        if self._rendered is None or self._rendered[0] != self._frame:
            image = render_ops(self._view.ops, self.info.width, self.info.height, self.scale)
            self._rendered = (self._frame, image, encode_jpeg(image, self.jpeg_quality))
            self.render_count += 1
        return self._rendered[1], self._rendered[2]
