"""Hand-built screens (uiautomator-schema node lists) for the agent-brain tests."""
from __future__ import annotations

from PIL import Image

from agents.brain.backends.base import HistoryEntry, StepContext
from devices.protocol import AppInfo, Observation
from devices.uitree import UINode

WIDTH, HEIGHT = 1080, 2400
SETTINGS = AppInfo("Settings", "com.android.settings", "Wi-Fi, Bluetooth, display and sound")
CLOCK = AppInfo("Clock", "com.google.android.deskclock", "Alarms, timers and stopwatch")
COFFEE = AppInfo("Coffee", "com.example.coffee", "Order coffee drinks")
MESSAGES = AppInfo("Messages", "com.example.messages", "Send text messages")
APPS = (SETTINGS, CLOCK, COFFEE, MESSAGES)


class ScreenBuilder:
    """Builds a flat node list with parent links, like a uiautomator dump."""

    def __init__(self, package: str) -> None:
        self.package = package
        self.nodes: list[UINode] = []
        self.add("android.widget.FrameLayout", bounds=(0, 0, WIDTH, HEIGHT))

    def add(self, cls: str, *, parent: int | None = 0, bounds: tuple[int, int, int, int],
            **attrs: object) -> int:
        index = len(self.nodes)
        depth = 0 if parent is None or index == 0 else self.nodes[parent].depth + 1
        self.nodes.append(UINode(
            index=index, cls=cls, package=self.package, bounds=bounds,
            parent=None if index == 0 else parent, depth=depth, **attrs,  # type: ignore[arg-type]
        ))
        return index

    def text(self, text: str, top: int, *, parent: int = 0, left: int = 48, **attrs: object) -> int:
        return self.add("android.widget.TextView", parent=parent, text=text,
                        bounds=(left, top, left + 600, top + 80), **attrs)

    def switch_row(self, label: str, top: int, checked: bool, rid: str = "") -> int:
        """A settings row: clickable container, label TextView, unlabelled Switch."""
        row = self.add("android.widget.LinearLayout", bounds=(0, top, WIDTH, top + 160),
                       clickable=True)
        self.text(label, top + 40, parent=row)
        return self.add("android.widget.Switch", parent=row, bounds=(880, top + 40, 1030, top + 120),
                        checkable=True, checked=checked, clickable=True, resource_id=rid)

    def button(self, label: str, top: int, *, left: int = 48, width: int = 400, **attrs: object) -> int:
        return self.add("android.widget.Button", text=label, clickable=True,
                        bounds=(left, top, left + width, top + 120), **attrs)

    def observation(self) -> Observation:
        return Observation(frame=1, width=WIDTH, height=HEIGHT, app=self.package,
                           nodes=list(self.nodes), image=Image.new("RGB", (4, 8)), jpeg=b"")


def settings_screen(wifi_on: bool, bluetooth_on: bool = False, filler: int = 10) -> Observation:
    """Settings main page: Wi-Fi and Bluetooth switches plus unrelated rows."""
    s = ScreenBuilder(SETTINGS.package)
    s.text("Settings", 60)
    s.switch_row("Wi-Fi", 200, wifi_on, rid="com.android.settings:id/wifi_switch")
    s.switch_row("Bluetooth", 380, bluetooth_on, rid="com.android.settings:id/bluetooth_switch")
    for i, name in enumerate(["Display", "Sound", "Storage", "Battery", "Apps", "Location",
                              "Security", "Accounts", "Accessibility", "System",
                              "About phone", "Notifications"][:filler]):
        top = 560 + 150 * i
        row = s.add("android.widget.LinearLayout", bounds=(0, top, WIDTH, top + 140), clickable=True)
        s.text(name, top + 30, parent=row)
    return s.observation()


def coffee_screen(sweetness_checked: str | None = None) -> Observation:
    """Coffee order form: drink title, a Sweetness RadioGroup, an Order button."""
    s = ScreenBuilder(COFFEE.package)
    s.text("Latte", 80)
    s.text("Sweetness", 300)
    group = s.add("android.widget.RadioGroup", bounds=(0, 400, WIDTH, 760),
                  resource_id="com.example.coffee:id/sweetness")
    for i, label in enumerate(["None", "Less", "Regular"]):
        s.add("android.widget.RadioButton", parent=group, text=label, checkable=True,
              clickable=True, checked=label == sweetness_checked,
              bounds=(48, 400 + 120 * i, 700, 400 + 120 * i + 100))
    s.button("Place order", 900)
    return s.observation()


def ctx(instruction: str, observation: Observation, **kwargs: object) -> StepContext:
    kwargs.setdefault("apps", APPS)
    return StepContext(instruction=instruction, observation=observation, **kwargs)  # type: ignore[arg-type]


def entry(index: int, action: dict, summary: str = "", by: str = "agent",
          changed: bool = True) -> HistoryEntry:
    return HistoryEntry(index=index, action=action, by=by, summary=summary, screen_changed=changed)


class HandBuiltPhone:
    """A simulated phone with one hand-built app (tests.devices.sim_helpers.hand_built)
    opened on one task of its suite, keeping the history as the episode runner does."""

    def __init__(self, tmp_path, app_yaml: str, suite_yaml: str, task_id: str,
                 app_name: str) -> None:
        from agents.evaluation.episode import EpisodeMemory
        from devices.actions import Action
        from devices.sim import SimDevice
        from tests.devices.sim_helpers import hand_built

        bundle, suite = hand_built(tmp_path, app_yaml, suite_yaml)
        self.task = suite.task(task_id)
        self.device = SimDevice(app_name.lower(), apps=bundle)
        self.device.reset(self.task)
        self.device.perform(Action("OPENAPP", app=app_name))
        self.memory = EpisodeMemory(instruction=self.task.instruction)

    def tap(self, label: str) -> None:
        """Tap the element labelled ``label`` — the last one: a dialog's over the screen's."""
        from devices.actions import CLICK, Action

        node = [n for n in self.device.observe().nodes if n.label == label][-1]
        x, y = node.center
        self.do(Action(CLICK, x=x, y=y, element=label))

    def do(self, action) -> None:
        from agents.brain import loop

        target = loop.target_node(action, self.device.observe().nodes)
        outcome = self.device.perform(action)
        self.memory.history.append(loop.history_entry(
            len(self.memory.history) + 1, action, "agent", outcome.changed, target))

    def propose(self):
        from agents.brain.backends.heuristic import HeuristicBackend

        return HeuristicBackend().propose(
            self.memory.context(self.device.observe(), self.device.info.apps))

    def done(self) -> bool:
        return bool(self.device.check(self.task))
