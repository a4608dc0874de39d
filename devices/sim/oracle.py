"""The oracle: shortest paths to a task's success state by breadth-first search.

Evaluation only — it knows the task's predicate and hidden preference (DESIGN.md "The
simulator": the simulated operator, the optimal step count for RE, the right/wrong label of
every proposed action).

One search from a state runs level by level until the first level that holds a success
state (depth ``d``); walking the layered graph back from those success states marks every
state on a shortest path and every optimal action out of it. Results are cached per
(world, task) and shared by every :class:`Oracle` built for them, because the device host
builds a new one per request.
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any

import devices.sim.expr as expr_mod
from devices.actions import (
    CLICK, COMPLETE, IMPOSSIBLE, LONG_CLICK, OPENAPP, PRESS_BACK, PRESS_ENTER, PRESS_HOME, SCROLL,
    TYPE, WAIT, Action, ActionError, validate_action,
)
from devices.sim.abstraction import _Abstraction
from devices.sim.bound import Bound, conjuncts
from devices.sim.loader import AppBundle
from devices.sim.model import LAUNCHER
from devices.sim.state import SimState
from devices.sim.suite import SimTask
from devices.sim.world import World, world_for

DEFAULT_MAX_DEPTH = 30
DEFAULT_MAX_STATES = 50_000


class NoPathError(RuntimeError):
    """No success state is reachable within the search bound."""


class _Search(_Abstraction):
    """Search results for one (world, task), shared by all oracles for them."""

    def __init__(self, world: World, task: SimTask, max_depth: int, max_states: int,
                 composite: bool = True):
        assert task.success is not None
        self.world, self.task = world, task
        self.goal = task.success
        self.max_depth, self.max_states = max_depth, max_states
        self.texts = task.type_candidates()
        self.lock = threading.Lock()
        # key -> (distance, [(action, child key)]) for states on a shortest path
        self.info: dict[Any, tuple[int, list[tuple[Action, Any]]]] = {}
        # key -> [(action, child state, child key)]
        self.successors: dict[Any, list[tuple[Action, SimState, Any]]] = {}
        self.failures: dict[Any, str] = {}
        self._relevance()
        self._value_classes()
        bound = Bound(world, self.goal)
        self.bound: Bound | None = bound if bound.useful else None
        # key -> (is a success state, lower bound on its distance); with and without the bound
        self.meta: dict[Any, tuple[bool, float]] = {}
        self.meta_plain: dict[Any, tuple[bool, float]] = {}
        self.composite = _Composite.build(self) if composite else None

    def is_goal(self, s: SimState) -> bool:
        return self.world.check(self.goal, s)

    # --- candidate actions -----------------------------------------------------------
    def expand(self, s: SimState, k: Any) -> list[tuple[Action, SimState, Any]]:
        cached = self.successors.get(k)
        if cached is not None:
            return cached
        world = self.world
        view = world.view(s, full=False)
        actions: list[Action] = []
        seen_points: set[tuple[int, int]] = set()
        targets = view.targets
        # Under an open dialog only the dialog (and the nav bar) can be touched.
        outside = [i for i, t in enumerate(targets) if t.special == "outside"]
        if outside:
            targets = targets[outside[-1]:]
        for t in targets:
            # Keyboard keys are covered by TYPE, and the nav bar's Back/Home by the
            # PRESS_BACK/PRESS_HOME below (same successor states, half the work).
            if t.special in ("outside", "inside", "key", "back", "home") and t.label != "Navigate up":
                continue
            x, y = (t.bounds[0] + t.bounds[2]) // 2, (t.bounds[1] + t.bounds[3]) // 2
            if (x, y) in seen_points:
                continue
            seen_points.add((x, y))
            label = (t.label or "")[:200] or None
            actions.append(Action(CLICK, x=x, y=y, element=label))
            if t.long:
                actions.append(Action(LONG_CLICK, x=x, y=y, element=label))
        if s.focus is not None or len(view.fields) == 1:
            actions.extend(Action(TYPE, text=text) for text in self.texts)
        if any(max_offset for _, _, max_offset, _ in view.lists):
            actions.extend((Action(SCROLL, direction="UP"), Action(SCROLL, direction="DOWN")))
        for app in world.bundle.apps:
            if app.id in self.relevant_apps:
                actions.append(Action(OPENAPP, app=app.name))
        actions.extend((Action(PRESS_BACK), Action(PRESS_HOME)))
        if s.focus is not None:
            actions.append(Action(PRESS_ENTER))
        if world.max_tick or (s.app != LAUNCHER and world.screen(s.app, view.screen).on_wait):
            actions.append(Action(WAIT))
        out: list[tuple[Action, SimState, Any]] = []
        for action in actions:
            s2, result = world.step(s, action, view)
            if not result.ok or s2 == s:
                continue
            # Entering an app that cannot affect the predicate never shortens a path.
            if s2.app != s.app and s2.app != LAUNCHER and s2.app not in self.relevant_apps:
                continue
            out.append((action, s2, self.key(s2)))
        self.successors[k] = out
        return out

    # --- the search --------------------------------------------------------------------
    def solve(self, start: SimState, limit: int | None = None) -> tuple[int, list[tuple[Action, Any]]]:
        """Distance and optimal (action, child key) pairs; ``limit`` caps the depth for
        this query only (a bounded miss is not remembered as a failure)."""
        k0 = self.key(start)
        with self.lock:
            found = self.info.get(k0)
            if found is not None:
                return found
            if k0 in self.failures:
                raise NoPathError(self.failures[k0])
            try:
                return self._bfs(start, k0, self.max_depth if limit is None
                                 else min(limit, self.max_depth))
            except NoPathError as exc:
                if limit is None:
                    self.failures[k0] = str(exc)
                raise

    def _bfs(self, start: SimState, k0: Any,
             max_depth: int) -> tuple[int, list[tuple[Action, Any]]]:
        """A* with the consistent lower bound of :mod:`devices.sim.bound` (plain
        breadth-first search where the bound does not apply). States leave the open list in
        order of ``f = g + h``; with a consistent ``h`` a state's ``g`` is its true distance
        from ``start`` when it leaves, and every state on a shortest path has ``f <= d``
        (``d``: the goal's distance), so expanding everything with ``f <= d`` finds every
        optimal action, as the layered breadth-first search did, while skipping states
        that provably cannot reach the goal within ``d``."""
        if self.is_goal(start):
            self.info[k0] = (0, [])
            return self.info[k0]
        bound = self.bound if self.bound is not None and self.bound.nav.is_normal(start) else None
        meta = self.meta if bound is not None else self.meta_plain
        h0 = self._meta(start, k0, bound, meta)[1]
        if h0 == math.inf:
            raise NoPathError(self._no_path("at all: the predicate can never hold"))
        g: dict[Any, int] = {k0: 0}
        states: dict[Any, SimState] = {k0: start}
        buckets: dict[int, list[Any]] = {int(h0): [k0]}
        by_level: list[list[Any]] = []
        goals: list[Any] = []
        found: int | None = None
        f = int(h0)
        while buckets:
            if f not in buckets:
                f = min(buckets)
            if found is not None and f > found:
                break
            if f > max_depth:
                raise NoPathError(self._no_path(f"within {max_depth} actions"))
            bucket = buckets[f]
            i = 0
            while i < len(bucket):  # expansions append to this bucket while it is read
                k = bucket[i]
                i += 1
                gk = g[k]
                is_goal, hk = meta[k] if k in meta else self._meta(states[k], k, bound, meta)
                if gk + hk != f:
                    continue  # stale: reached again with a smaller g, or already expanded
                g[k] = -1 - gk  # mark expanded (decoded below)
                if is_goal:
                    found = gk
                    goals.append(k)
                    continue
                while len(by_level) <= gk:
                    by_level.append([])
                by_level[gk].append(k)
                g2 = gk + 1
                for _action, s2, k2 in self.expand(states[k], k):
                    old = g.get(k2)
                    if old is not None and (old < 0 or old <= g2):
                        continue
                    m2 = meta.get(k2)
                    if m2 is None:
                        m2 = self._meta(s2, k2, bound, meta)
                    if m2[1] == math.inf:
                        continue
                    f2 = g2 + int(m2[1])
                    if found is not None and f2 > found:
                        continue
                    g[k2] = g2
                    states[k2] = s2
                    buckets.setdefault(f2, []).append(k2)
                if len(g) > self.max_states:
                    raise NoPathError(self._no_path(f"within {self.max_states} states"))
            del buckets[f]
            f += 1
        if found is None:
            raise NoPathError(self._no_path("at all: every reachable state was searched"))
        # Walk back: a state is on a shortest path iff an edge to the next level leads to one.
        good = set(goals)
        for k in goals:
            self.info.setdefault(k, (0, []))
        for level in range(min(found, len(by_level)) - 1, -1, -1):
            for k in by_level[level]:
                best = [(a, k2) for a, _, k2 in self.successors[k]
                        if k2 in good and g.get(k2) == -2 - level]
                if best:
                    good.add(k)
                    self.info.setdefault(k, (found - level, best))
        return self.info[k0]

    def _meta(self, s: SimState, k: Any, bound: Bound | None,
              meta: dict[Any, tuple[bool, float]]) -> tuple[bool, float]:
        env = self.world.env(s)
        if self.goal(env):
            out = (True, 0.0)
        else:
            out = (False, max(1.0, bound(s, env)) if bound is not None else 1.0)
        meta[k] = out
        return out

    def _no_path(self, bound: str) -> str:
        return (f"no path to the success state of task '{self.task.id}' "
                f"({self.goal.source}) {bound}")


class _Composite:
    """An errand whose predicate splits into parts that separate apps alone can make true
    (a purchase in Shop, then a message in Messages): its distance is the cheapest order
    of the parts, each solved by a search over its own app only.

    Exact under the conditions :meth:`build` checks: every conjunct belongs to a part, the
    parts' relevant apps (those that can write or gate what a part reads) are disjoint, and
    no perturbation fires by step count. Then no action of one part changes another's
    variables, every app is entered the same way from anywhere (OPENAPP), and leaving an
    app forgets its back stack, so interleaving parts never saves an action: a shortest
    path does the parts one after another, the first from the current state and each
    later one from outside its app. The search then scales with each part, not with the
    product of the apps' states.
    """

    def __init__(self, parent: "_Search", parts: list["_Search"]):
        self.parent, self.parts = parent, parts
        self.lock = threading.Lock()
        self.cache: dict[Any, tuple[int, list[tuple[Action, Any]]]] = {}

    @classmethod
    def build(cls, parent: "_Search") -> "_Composite | None":
        bound, world = parent.bound, parent.world
        if bound is None or not bound.groups or world.max_tick:
            return None
        atoms = conjuncts(parent.goal)
        grouped = {i for _, members in bound.groups for i in members}
        if len(atoms) != len(bound.atoms) or grouped != set(range(len(bound.atoms))):
            return None  # a conjunct on the screen, or one that several apps can write
        from dataclasses import replace

        parts = []
        for app, members in bound.groups:
            source = " and ".join(bound.atoms[i].source for i in members)
            task = replace(parent.task, id=f"{parent.task.id}[{app}]",
                           success=expr_mod.parse(source))
            parts.append(_Search(world, task, parent.max_depth, parent.max_states,
                                 composite=False))
        seen: set[str] = set()
        for part in parts:
            if part.relevant_apps & seen:
                return None  # two parts need the same app: their states interact
            seen |= part.relevant_apps
        return cls(parent, parts)

    def _outside(self, s: SimState) -> SimState:
        return SimState(s.values, LAUNCHER, (), None, None, (), s.tick)

    def distance(self, s: SimState) -> int:
        return self._solve(s)[0]

    def _part_cost(self, part: "_Search", s: SimState, first: bool) -> int:
        return part.solve(s if first else self._outside(s))[0]

    def _orders(self, s: SimState) -> list[tuple[int, list[int]]]:
        """(cost, order of the unfinished parts) for every order; raises NoPathError."""
        from itertools import permutations

        todo = [i for i, part in enumerate(self.parts) if not part.is_goal(s)]
        if not todo:
            return []  # every part holds: a success state
        out = []
        for order in permutations(todo):
            cost = sum(self._part_cost(self.parts[i], s, n == 0) for n, i in enumerate(order))
            out.append((cost, list(order)))
        return out

    def _solve(self, s: SimState) -> tuple[int, list[tuple[Action, Any]]]:
        k = self.parent.key(s)
        with self.lock:
            found = self.cache.get(k)
        if found is not None:
            return found
        orders = self._orders(s)
        if not orders:
            result: tuple[int, list[tuple[Action, Any]]] = (0, [])
        else:
            best_cost = min(cost for cost, _ in orders)
            firsts = {order[0] for cost, order in orders if cost == best_cost}
            best: list[tuple[Action, Any]] = []
            for i in sorted(firsts):
                for action, _ in self.parts[i].solve(s)[1]:
                    s2 = self.parent.world.step(s, action)[0]
                    best.append((action, self.parent.key(s2)))
            result = (best_cost, best)
        with self.lock:
            self.cache[k] = result
        return result

    def solve(self, s: SimState, limit: int | None = None) -> tuple[int, list[tuple[Action, Any]]]:
        result = self._solve(s)
        if limit is not None and result[0] > limit:
            raise NoPathError(self.parent._no_path(f"within {limit} actions"))
        return result


_SEARCHES: OrderedDict[tuple[int, int], tuple[World, SimTask, _Search]] = OrderedDict()
_SEARCHES_LOCK = threading.Lock()


def _shared_search(world: World, task: SimTask, max_depth: int, max_states: int) -> _Search:
    key = (id(world), id(task))
    with _SEARCHES_LOCK:
        entry = _SEARCHES.get(key)
        if (entry is not None and entry[0] is world and entry[1] is task
                and entry[2].max_depth == max_depth and entry[2].max_states == max_states):
            _SEARCHES.move_to_end(key)
            return entry[2]
        search = _Search(world, task, max_depth, max_states)
        _SEARCHES[key] = (world, task, search)
        if len(_SEARCHES) > 64:
            _SEARCHES.popitem(last=False)
        return search


def clear_cache() -> None:
    """Forget every cached search (the bench measures cold searches)."""
    with _SEARCHES_LOCK:
        _SEARCHES.clear()


class Oracle:
    """Shortest paths for ``task`` on a simulated phone.

    ``source`` is a :class:`~devices.sim.device.SimDevice` (queries default to its current
    state), a :class:`World`, or an :class:`AppBundle` (queries default to the task's
    initial state). The task must have a success predicate. Every query takes ``state``: a
    device ``Snapshot``, a :class:`SimState`, or None.
    """

    def __init__(self, source: Any, task: SimTask, *, max_depth: int = DEFAULT_MAX_DEPTH,
                 max_states: int = DEFAULT_MAX_STATES):
        if task.success is None:
            raise ValueError(f"task '{task.id}' has no success predicate; the oracle needs one")
        self.task = task
        self.device = None
        if isinstance(source, World):
            world = source
        elif isinstance(source, AppBundle):
            world = world_for(source, task.perturbations)
        elif hasattr(source, "snapshot") and hasattr(source, "world"):
            self.device = source
            world = source.world
        else:
            raise TypeError("Oracle needs a SimDevice, a World or an AppBundle")
        if world.perturbations != task.perturbations:
            world = world_for(world.bundle, task.perturbations, world.width, world.height)
        self.world = world
        self._search = _shared_search(world, task, max_depth, max_states)
        # Errands whose parts live in separate apps are solved part by part (_Composite).
        self._solver: Any = self._search.composite or self._search

    def _state(self, state: Any) -> SimState:
        if state is None:
            if self.device is not None:
                state = self.device.snapshot()
            else:
                start = self.task.start
                return self.world.initial_state(self.task.state, start.app if start else None,
                                                start.screen if start else None)
        if isinstance(state, SimState):
            return state
        inner = getattr(state, "state", None)
        if isinstance(inner, SimState):
            if getattr(state, "world", self.world).var_names != self.world.var_names:
                raise ValueError("the snapshot comes from a phone reset for a different task")
            return inner
        raise TypeError("state must be a Snapshot, a SimState or None")

    def distance(self, state: Any = None) -> int:
        """The fewest actions from ``state`` to a success state (the final COMPLETE not
        counted). Raises :class:`NoPathError`."""
        return self._solver.solve(self._state(state))[0]

    def next_actions(self, state: Any = None) -> list[Action]:
        """Every optimal next action; ``[COMPLETE]`` on a success state."""
        s = self._state(state)
        dist, best = self._solver.solve(s)
        if dist == 0:
            return [Action(COMPLETE)]
        return [a for a, _ in best]

    def shortest_path(self, state: Any = None) -> list[Action]:
        """One optimal action sequence to success (without the final COMPLETE)."""
        s = self._state(state)
        path: list[Action] = []
        while True:
            dist, best = self._solver.solve(s)
            if dist == 0:
                return path
            action = best[0][0]
            path.append(action)
            s = self.world.step(s, action)[0]

    def judge(self, state: Any, action: Action | dict[str, Any]) -> bool:
        """Is ``action`` right in ``state``? Right iff it leads to a state one step closer
        to success, or it is COMPLETE on a success state (IMPOSSIBLE: iff no path exists).
        WAIT and other no-ops leave the distance unchanged, so they are wrong."""
        checked = validate_action(action, (self.world.width, self.world.height))
        if isinstance(checked, ActionError):
            return False
        s = self._state(state)
        try:
            dist, best = self._solver.solve(s)
        except NoPathError:
            return checked.type == IMPOSSIBLE
        if checked.type == COMPLETE:
            return dist == 0
        if checked.type == IMPOSSIBLE or dist == 0:
            return False
        s2, result = self.world.step(s, checked)
        if not result.ok:
            return False
        k2 = self._search.key(s2)
        if any(k2 == k for _, k in best):
            return True
        # Same place as an optimal successor but other values (e.g. TYPE "6:45 am" where
        # the predicate says ~= "6:45 AM"): search from there, at most distance-1 deep.
        if not any(k2[1:] == k[1:] for _, k in best):
            return False
        try:
            return self._solver.solve(s2, limit=dist - 1)[0] == dist - 1
        except NoPathError:
            return False

    def answer(self, question: str) -> str:
        """What the user answers (the hidden preference, or "No preference ...")."""
        return self.task.answer(question)


__all__ = ["NoPathError", "Oracle", "clear_cache"]
