"""The engine: a bundle of apps plus a task's perturbations, as a pure state machine.

``World.step(state, action) -> (state', Result)`` is a pure function of immutable values,
which is what lets the oracle search it and :class:`~devices.sim.device.SimDevice` wrap it
with a lock. ``World.view(state)`` lays the screen out in device pixels: UI nodes in the
uiautomator schema, the hit targets a touch can reach, and drawing operations for the
renderer. Rules (scroll direction, TYPE, BACK, focus) are documented in docs/simulator.md.

The parts live in sibling modules: the state value (:mod:`devices.sim.state`), the
perturbations compiled into a world (:mod:`devices.sim.perturb`), and the screen layout
(:mod:`devices.sim.layout`, built from :mod:`devices.sim.widgets`). This module keeps the
world itself — its lookups, initial states and the action semantics (``step`` and the
effects that run on a working copy of a state) — and re-exports the names callers import
from it (``SimState``, ``View``, ``perturbation_vars``, ...).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import devices.sim.expr as expr_mod
from devices.actions import (
    CLICK, LONG_CLICK, OPENAPP, PRESS_BACK, PRESS_ENTER, PRESS_HOME, SCROLL, TERMINAL_TYPES, TYPE,
    WAIT, Action,
)
from devices.sim.layout import _Layout
from devices.sim.loader import AppBundle
from devices.sim.model import (
    LAUNCHER, LAUNCHER_PACKAGE, TEMPLATE_RE, AppSpec, Dialog, Effect, Effects, Element, Screen,
    number_value,
)
from devices.sim.perturb import Perturbation, _layer, perturbation_vars
from devices.sim.state import HOME_SCREEN, Result, SimState
from devices.sim.widgets import Target, View

_TEMPLATE_RE = TEMPLATE_RE  # kept for the oracle's imports


class World(_Layout):
    """A bundle of apps with one task's perturbations compiled in. Shared and immutable."""

    def __init__(self, bundle: AppBundle, perturbations: tuple[Perturbation, ...] = (),
                 width: int = 1080, height: int = 2400):
        self.bundle = bundle
        self.perturbations = perturbations
        self.width, self.height = width, height
        self.u = width / 1080
        self.layer = _layer(bundle, perturbations)
        initial = dict(bundle.state)
        for name, value in perturbation_vars(perturbations).items():
            initial.setdefault(name, value)
        self.var_names: tuple[str, ...] = tuple(sorted(initial))
        self.var_index = {n: i for i, n in enumerate(self.var_names)}
        self.initial_values = tuple(initial[n] for n in self.var_names)
        self.max_tick = max((t[0] for t in self.layer.triggers), default=0)
        self._views: OrderedDict[tuple[SimState, bool], View] = OrderedDict()
        self._lite: OrderedDict[Any, View] = OrderedDict()
        self._deps: dict[tuple[str, str, str | None], tuple[int, ...]] = {}
        self._heights: dict[int, int] = {}  # elements are immutable and live as long as us
        self._views_lock = threading.Lock()  # phones and oracles in other threads share worlds

    # --- lookups --------------------------------------------------------------------
    def app(self, app_id: str) -> AppSpec:
        return self.bundle.by_id[app_id]

    def screen(self, app_id: str, screen_id: str) -> Screen:
        app = self.bundle.by_id[app_id]
        return app.screens.get(screen_id) or self.layer.screens[(app_id, screen_id)]

    def dialog(self, app_id: str, dialog_id: str) -> Dialog:
        if app_id != LAUNCHER:
            found = self.bundle.by_id[app_id].dialogs.get(dialog_id)
            if found:
                return found
        return self.layer.dialogs[dialog_id]

    def displayed_screen(self, state: SimState) -> str:
        """The stack's top screen, or the interstitial a gate shows in its place."""
        if state.app == LAUNCHER:
            return HOME_SCREEN
        top = state.stack[-1]
        scr = self.screen(state.app, top)
        gates = list(self.layer.gates.get((state.app, top), ())) + list(scr.gates)
        if gates:
            env = self.env(state)
            for gate in gates:
                if gate.when(env):
                    return gate.screen
        return top

    def env(self, state: SimState) -> expr_mod.Env:
        values, index = state.values, self.var_index

        def lookup(name: str) -> Any:
            i = index.get(name)
            if i is not None:
                return values[i]
            if name == "app":
                return state.app
            if name == "package":
                return self.package_of(state.app)
            if name == "screen":
                return state.stack[-1] if state.stack else HOME_SCREEN
            if name == "dialog":
                return state.dialog
            return None

        return lookup

    def package_of(self, app_id: str) -> str:
        return LAUNCHER_PACKAGE if app_id == LAUNCHER else self.bundle.by_id[app_id].package

    def check(self, predicate: expr_mod.Expr, state: SimState) -> bool:
        return predicate(self.env(state))

    def state_vars(self, state: SimState) -> dict[str, Any]:
        return dict(zip(self.var_names, state.values))

    # --- states ---------------------------------------------------------------------
    def initial_state(self, overrides: dict[str, Any] | None = None, start_app: str | None = None,
                      start_screen: str | None = None) -> SimState:
        values = list(self.initial_values)
        for name, value in (overrides or {}).items():
            values[self.var_index[name]] = value
        state = SimState(tuple(values))
        if start_app:
            work = _Work(self, state)
            work.open_app(start_app)
            if start_screen and start_screen != work.stack[-1]:
                work.go(start_screen)
            state = work.freeze(tick=0)
        return state

    # --- layout: _Layout, devices/sim/layout.py -----------------------------------

    # --- transitions ----------------------------------------------------------------
    def step(self, state: SimState, action: Action,
             view: View | None = None) -> tuple[SimState, Result]:
        """Perform ``action`` on ``state`` (``view``: its layout, when the caller has it).
        Pure; never raises for a valid action."""
        kind = action.type
        if kind in TERMINAL_TYPES:
            return state, Result(details={"note": f"{kind} ends the episode; the phone is unchanged"})
        work = _Work(self, state)
        result = Result()
        view = view or self.view(state, full=False)
        if kind in (CLICK, LONG_CLICK):
            self._touch(work, view, action, result)
        elif kind == TYPE:
            self._type(work, view, action.text or "", result)
        elif kind == SCROLL:
            self._scroll(work, view, action.direction or "", result)
        elif kind == OPENAPP:
            app = self.bundle.find(action.app or "")
            if app is None:
                names = ", ".join(a.name for a in self.bundle.apps)
                result.ok = False
                result.error = f"no app named '{action.app}' is installed (installed: {names})"
            else:
                work.open_app(app.id)
        elif kind == PRESS_BACK:
            self._back(work, state)
        elif kind == PRESS_HOME:
            work.home()
        elif kind == PRESS_ENTER:
            self._enter(work, state, result)
        elif kind == WAIT:
            if state.app != LAUNCHER and state.dialog is None:
                work.run(self.screen(state.app, view.screen).on_wait)
        return work.freeze(), result

    def _touch(self, work: "_Work", view: View, action: Action, result: Result) -> None:
        x, y = action.x or 0, action.y or 0
        if not (0 <= x < self.width and 0 <= y < self.height):
            result.ok = False
            result.error = f"({x}, {y}) is off the {self.width}x{self.height} screen"
            return
        target = view.hit(x, y)
        state = work.origin
        result.details["hit"] = target.label if target else None
        if target is None:
            work.focus = None  # a tap on nothing hides the keyboard
            return
        special = target.special
        if special == "back":
            self._back(work, state)
        elif special == "home":
            work.home()
        elif special == "outside":
            dialog = self.dialog(state.app, state.dialog) if state.dialog else None
            if dialog is not None and dialog.cancelable:
                work.dialog = None
                work.run(dialog.on_dismiss)
        elif special == "inside":
            pass
        elif special == "focus":
            work.focus = target.arg.id
        elif special == "key":
            self._key(work, state, target.arg, result)
        else:
            effects = target.tap
            if action.type == LONG_CLICK and target.long:
                effects = target.long
            # Android performs the click when a long press is not handled.
            if effects is None:
                return
            if work.dialog is None:
                work.focus = None
            work.run(effects)

    @staticmethod
    def _reachable_fields(view: View) -> list[tuple[Element, Target]]:
        """The fields keys can reach: a dialog is modal, so while one is open only its own
        fields take input (on a phone the dialog's window has the keyboard focus)."""
        if view.dialog_box is None:
            return view.fields
        left, top, right, bottom = view.dialog_box
        return [(el, t) for el, t in view.fields
                if left <= t.bounds[0] and top <= t.bounds[1]
                and t.bounds[2] <= right and t.bounds[3] <= bottom]

    def _focused_field(self, state: SimState, view: View) -> Element | None:
        for el, _ in self._reachable_fields(view):
            if el.id == state.focus:
                return el
        return None

    def _type(self, work: "_Work", view: View, text: str, result: Result) -> None:
        state = work.origin
        el = self._focused_field(state, view)
        if el is None:
            fields = self._reachable_fields(view)
            if len(fields) == 1:
                # Documented convenience: with exactly one text field on screen, TYPE goes
                # into it (and focuses it), as ADB's input would after a tap.
                el = fields[0][0]
                work.focus = el.id
            else:
                result.ok = False
                if view.dialog_box is not None and not fields and view.fields:
                    result.error = "a dialog covers the screen and takes the keys; close it first"
                else:
                    result.error = ("no text field is focused; tap a field first" if fields else
                                    "there is no text field on this screen to type into")
                return
        # TYPE replaces the field's text (AndroidWorld's type action clears first), which
        # keeps the state space finite for the oracle.
        work.set(el.var, text)

    def _key(self, work: "_Work", state: SimState, ch: str, result: Result) -> None:
        el = self._focused_field(state, self.view(state, full=False))
        if el is None:
            return
        if ch == "\n":
            self._enter(work, state, result)
            return
        current = work.get(el.var) or ""
        work.set(el.var, str(current)[:-1] if ch == "<" else f"{current}{ch}")

    def _enter(self, work: "_Work", state: SimState, result: Result) -> None:
        el = self._focused_field(state, self.view(state, full=False))
        if el is None:
            result.details["note"] = "nothing is focused"
            return
        work.focus = None  # the IME action closes the keyboard
        work.run(el.on_enter)

    def _scroll(self, work: "_Work", view: View, direction: str, result: Result) -> None:
        if direction not in ("UP", "DOWN") or not view.lists:
            result.details["note"] = "nothing on this screen scrolls that way"
            return
        lid, offset, max_offset, page = max(view.lists, key=lambda item: item[2])
        # The finger's direction: UP drags content up, bringing later items into view.
        new = offset + page if direction == "UP" else offset - page
        new = max(0, min(max_offset, new))
        if new != offset:
            work.scroll[lid] = new
        else:
            result.details["note"] = "the list is already at its " + (
                "end" if direction == "UP" else "start")

    def _back(self, work: "_Work", state: SimState) -> None:
        if state.focus is not None:
            work.focus = None  # BACK first hides the keyboard
            return
        if state.dialog is not None:
            dialog = self.dialog(state.app, state.dialog)
            if dialog.cancelable:
                work.dialog = None
                work.run(dialog.on_dismiss)
            return
        if state.app == LAUNCHER:
            return
        shown = self.displayed_screen(state)
        scr = self.screen(state.app, shown)
        if scr.on_back is not None:
            work.run(scr.on_back)
        else:
            work.back()


class _Work:
    """A mutable working copy of a state while one action's effects run."""

    def __init__(self, world: World, state: SimState):
        self.world = world
        self.origin = state
        self.values = list(state.values)
        self.app = state.app
        self.stack = list(state.stack)
        self.dialog = state.dialog
        self.focus = state.focus
        self.scroll = dict(state.scroll)
        self.depth = 0

    def get(self, name: str) -> Any:
        return self.values[self.world.var_index[name]]

    def set(self, name: str, value: Any) -> None:
        self.values[self.world.var_index[name]] = value

    def add(self, eff: Effect) -> None:
        """``add``: a literal amount, or (``{var: name}``) the number another variable holds
        now; when it holds no number (true/false, text that is not a number) nothing
        changes."""
        amount = eff.value if eff.source is None else number_value(self.get(eff.source))
        if amount is not None:
            self.set(eff.target, (self.get(eff.target) or 0) + amount)

    def env(self) -> expr_mod.Env:
        index, values = self.world.var_index, self.values

        def lookup(name: str) -> Any:
            i = index.get(name)
            if i is not None:
                return values[i]
            if name == "app":
                return self.app
            if name == "package":
                return self.world.package_of(self.app)
            if name == "screen":
                return self.stack[-1] if self.stack else HOME_SCREEN
            if name == "dialog":
                return self.dialog
            return None

        return lookup

    def run(self, effects: Effects) -> None:
        self.depth += 1
        if self.depth > 50:  # a cycle of on_enter effects; stop rather than hang
            return
        for eff in effects:
            op = eff.op
            if op == "set":
                self.set(eff.target, eff.value if eff.source is None else self.get(eff.source))
            elif op == "toggle":
                self.set(eff.target, not self.get(eff.target))
            elif op == "add":
                self.add(eff)
            elif op == "go":
                self.go(eff.target)
            elif op == "back":
                self.back()
            elif op == "home":
                self.home()
            elif op == "open_app":
                app = self.world.bundle.find(eff.target)
                if app is not None:
                    self.open_app(app.id)
            elif op == "open":
                self.dialog = eff.target
            elif op == "close":
                self.dialog = None
            elif op == "if":
                self.run(eff.then if eff.cond(self.env()) else eff.otherwise)
        self.depth -= 1

    def _entered(self) -> None:
        self.focus = None
        self.scroll = {}
        self.dialog = None
        top = self.stack[-1]
        self.run(self.world.screen(self.app, top).on_enter)
        self.run(tuple(self.world.layer.hooks.get((self.app, top), ())))

    def go(self, screen: str) -> None:
        if self.app == LAUNCHER:
            return
        # Navigating to a screen already on the stack pops back to it (clear-top), so the
        # stack never grows without bound and the oracle's search stays finite.
        if screen in self.stack:
            del self.stack[self.stack.index(screen) + 1:]
        else:
            self.stack.append(screen)
        self._entered()

    def back(self) -> None:
        self.focus, self.scroll, self.dialog = None, {}, None
        if len(self.stack) > 1:
            self.stack.pop()
        else:
            self.home()

    def home(self) -> None:
        self.app, self.stack, self.dialog, self.focus, self.scroll = LAUNCHER, [], None, None, {}

    def open_app(self, app_id: str) -> None:
        app = self.world.app(app_id)
        self.app, self.stack = app_id, [app.start]
        self.focus, self.scroll, self.dialog = None, {}, None
        self.run(app.on_open)
        if self.app == app_id and self.stack == [app.start]:
            self._entered()

    def freeze(self, tick: int | None = None) -> SimState:
        world = self.world
        if tick is None:
            tick = min(self.origin.tick + 1, world.max_tick) if world.max_tick else 0
            for at, app, dialog, done in world.layer.triggers:
                if (at == tick and self.origin.tick < at and not self.get(done)
                        and (app is None or app == self.app)):
                    self.dialog = dialog
        return SimState(
            tuple(self.values), self.app, tuple(self.stack), self.dialog, self.focus,
            tuple(sorted((k, v) for k, v in self.scroll.items() if v)) if self.scroll else (),
            tick,
        )


_WORLDS: dict[tuple[int, tuple[Perturbation, ...], int, int], World] = {}


def world_for(bundle: AppBundle, perturbations: tuple[Perturbation, ...] = (),
              width: int = 1080, height: int = 2400) -> World:
    """A shared compiled world (worlds are immutable, so phones and oracles share them)."""
    key = (id(bundle), tuple(perturbations), width, height)
    world = _WORLDS.get(key)
    if world is None or world.bundle is not bundle:
        world = World(bundle, tuple(perturbations), width, height)
        _WORLDS[key] = world
        if len(_WORLDS) > 256:
            _WORLDS.pop(next(iter(_WORLDS)))
    return world
