"""A lower bound on the number of actions to a task's success state, for the oracle's A*.

The bound comes from a static over-approximation of the apps: a graph whose nodes are
back-stack tops ``(app, screen)`` plus the launcher, with an edge wherever *some* action
might lead (conditions are ignored: every ``if`` takes both branches, every element is
visible and enabled, every dialog of an app may be open on any of its screens). For each
conjunct of the success predicate, a node *writes* it when one action there can set one of
its variables to a value that might make it true. A false conjunct then needs at least
``1 + (graph distance to the nearest writer)`` actions, and the bound is the largest such
need over the false conjuncts (``inf`` when no writer is reachable: the predicate can never
hold).

Each conjunct's need is consistent (one action lowers it by at most one: either the action
writes the conjunct from a writer node, where the need is 1, or it moves along a graph
edge), so the maximum is consistent too, and A* with it expands states in order of their
true distance from the start, exactly as breadth-first search would.

BACK pops to the screen below, so the graph needs to know which screen can lie below which:
``below[X]`` collects every screen that was the top when ``go: X`` could run (and each app's
start lies at the bottom of every stack). A state whose stack breaks that (built by hand, not
reached by actions) is not *normal*; the oracle searches from it without the bound.
"""
from __future__ import annotations

import math
from collections import deque
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

import devices.sim.expr as expr_mod
from devices.sim.model import LAUNCHER, Effect, Element
from devices.sim.state import SimState
from devices.sim.world import World

ANY = object()  # a written value the analysis cannot know (toggle, add, copy, typed text)
_LAUNCHER_NODE = (LAUNCHER, None)
_INF = math.inf

Node = tuple[str, Any]  # (app id, screen id); (LAUNCHER, None) for the launcher


def conjuncts(predicate: expr_mod.Expr) -> list[expr_mod.Expr]:
    """The top-level ``and`` parts of a predicate (the whole predicate when it has a
    top-level ``or``, since ``and`` binds tighter)."""
    source = predicate.source
    words = expr_mod.top_level_words(source)
    if words is None or any(word == "or" for word, _, _ in words):
        return [predicate]
    start = 0
    parts: list[tuple[int, int]] = []
    for word, at, after in words:
        if word == "and":
            parts.append((start, at))
            start = after
    parts.append((start, len(source)))
    out: list[expr_mod.Expr] = []
    for a, b in parts:
        piece = source[a:b].strip()
        if not piece:
            return [predicate]
        try:
            out.append(expr_mod.parse(piece))
        except expr_mod.ExprError:
            return [predicate]
    return out


class _Acc:
    """What one node's actions can do: the writes and the nodes they can reach.

    ``slots`` groups the writes by the action that makes them (one element's tap with
    every effect it sets off, one OPENAPP, one BACK …), so the bound can tell two
    conjuncts that one action may make true together from two that need two actions.
    Grouping too much is safe (it only weakens the bound); splitting one action's writes
    over two slots would not be."""

    def __init__(self) -> None:
        self.writes: set[tuple[str, Any]] = set()
        self.nodes: set[Node] = set()
        self.backs: set[Node] = set()  # BACK pops from these tops (resolved with ``below``)
        self.slots: list[set[tuple[str, Any]]] = []
        self._slot: set[tuple[str, Any]] | None = None

    @contextmanager
    def action(self) -> Iterator[None]:
        """Collect the writes made inside into one slot; nested calls join the open one
        (an effect that opens an app belongs to the action that ran it)."""
        if self._slot is not None:
            yield
            return
        self._slot = set()
        try:
            yield
        finally:
            if self._slot:
                self.slots.append(self._slot)
            self._slot = None

    def write(self, var: str | None, value: Any) -> None:
        if var:
            try:
                hash(value)
                item = (var, value)
            except TypeError:  # an unhashable value: unknown
                item = (var, ANY)
            self.writes.add(item)
            if self._slot is not None:
                self._slot.add(item)
            else:  # a write outside any known action: its own slot, to stay sound
                self.slots.append({item})


class Navigation:
    """The over-approximated app graph of one world (see the module docstring)."""

    def __init__(self, world: World):
        self.world = world
        bundle = world.bundle
        self.apps = [a.id for a in bundle.apps]
        self.start = {a.id: a.start for a in bundle.apps}
        self.screens = {a.id: list(a.screens) for a in bundle.apps}
        self.below: dict[Node, set[str]] = {}
        self.acts: dict[Node, _Acc] = {}
        nodes: list[Node] = [_LAUNCHER_NODE] + [(a, s) for a in self.apps for s in self.screens[a]]
        for node in nodes:
            self.acts[node] = self._node(node)
        # Tasks may start on any screen: initial_state goes there from the app's start.
        for a in self.apps:
            for s in self.screens[a]:
                if s != self.start[a]:
                    self.below.setdefault((a, s), set()).add(self.start[a])
        self.edges: dict[Node, set[Node]] = {}
        for node, acc in self.acts.items():
            out = set(acc.nodes)
            out.add(_LAUNCHER_NODE)  # HOME
            out.update((a, self.start[a]) for a in self.apps)  # OPENAPP (its effects are in acc)
            for app, top in acc.backs:
                if app == LAUNCHER:
                    continue
                landing = self.screens[app] if top is None else self.below.get((app, top), ())
                out.update((app, s) for s in landing)
            out.discard(node)
            self.edges[node] = out
        self.reverse: dict[Node, list[Node]] = {n: [] for n in self.acts}
        for node, out in self.edges.items():
            for m in out:
                self.reverse.setdefault(m, []).append(node)

    # --- one node's actions ---------------------------------------------------------------
    def _node(self, node: Node) -> _Acc:
        world, acc = self.world, _Acc()
        app, top = node
        ctx = {node}
        for a in self.apps:  # OPENAPP and launcher icons, from anywhere
            with acc.action():
                self._open(a, acc, set())
        if app == LAUNCHER:
            for did, owner in world.layer.dialog_apps.items():
                if owner is None:
                    self._dialog(world.layer.dialogs[did], ctx, acc)
            return acc
        spec = world.app(app)
        shown = [world.screen(app, top)]
        gates = list(world.layer.gates.get((app, top), ())) + list(shown[0].gates)
        shown += [world.screen(app, g.screen) for g in gates]
        acc.backs.add(node)  # BACK (nav bar, Navigate up) pops the stack
        for scr in shown:
            if scr.on_back is not None:
                with acc.action():
                    self._run(scr.on_back, ctx, acc, set())
            with acc.action():
                self._run(scr.on_wait, ctx, acc, set())
            for el in scr.elements + scr.toolbar:
                self._element(el, ctx, acc)
        dialogs = list(spec.dialogs.values()) + [
            world.layer.dialogs[did] for did, owner in world.layer.dialog_apps.items()
            if owner in (None, app)]
        for d in dialogs:
            self._dialog(d, ctx, acc)
        return acc

    def _dialog(self, dialog: Any, ctx: set[Node], acc: _Acc) -> None:
        with acc.action():
            self._run(dialog.on_dismiss, ctx, acc, set())
        for el in dialog.elements + dialog.buttons:
            self._element(el, ctx, acc)

    def _element(self, el: Element, ctx: set[Node], acc: _Acc) -> None:
        kind = el.kind
        # One slot for all of an element's effects (tap, long tap, change, enter): more
        # than one action's worth, which is safe; its list items are actions of their own.
        with acc.action():
            if kind in ("switch", "checkbox", "stepper"):
                acc.write(el.var, ANY)
            elif kind in ("radio_group", "radio"):
                for opt in el.options:
                    acc.write(el.var, opt.value)
            elif kind == "field":
                acc.write(el.var, ANY)  # TYPE and the keyboard
            for effects in (el.on_tap, el.on_long_tap, el.on_change, el.on_enter):
                self._run(effects, ctx, acc, set())
        for item in el.items:
            self._element(item, ctx, acc)

    # --- effects, over-approximated -----------------------------------------------------
    def _run(self, effects: Iterable[Effect], ctx: set[Node], acc: _Acc,
             entering: set[Node]) -> set[Node]:
        """Run ``effects`` from every context in ``ctx`` (a context is the foreground app and
        its stack top; top None: unknown); return the contexts they can end in."""
        for eff in effects or ():
            new: set[Node] = set()
            for c in ctx:
                new |= self._effect(eff, c, acc, entering)
            ctx = new
        return ctx

    def _effect(self, eff: Effect, c: Node, acc: _Acc, entering: set[Node]) -> set[Node]:
        op = eff.op
        app, top = c
        if op == "set" and eff.source is None:
            acc.write(eff.target, eff.value)
        elif op in ("set", "toggle", "add"):  # a copy of another variable is not known here
            acc.write(eff.target, ANY)
        elif op == "go":
            if app == LAUNCHER:
                return {c}
            pushers = self.screens[app] if top is None else [top]
            below = self.below.setdefault((app, eff.target), set())
            below.update(p for p in pushers if p != eff.target)
            return self._enter((app, eff.target), acc, entering)
        elif op == "back":
            if app == LAUNCHER:
                return {c}
            acc.backs.add(c)
            acc.nodes.add(_LAUNCHER_NODE)
            return {(app, None), _LAUNCHER_NODE}
        elif op == "home":
            acc.nodes.add(_LAUNCHER_NODE)
            return {_LAUNCHER_NODE}
        elif op == "open_app":
            found = self.world.bundle.find(eff.target or "")
            if found is not None:
                return self._open(found.id, acc, entering)
        elif op == "if":
            return (self._run(eff.then, {c}, acc, entering)
                    | self._run(eff.otherwise, {c}, acc, entering))
        return {c}

    def _enter(self, node: Node, acc: _Acc, entering: set[Node]) -> set[Node]:
        acc.nodes.add(node)
        if node in entering:  # an on_enter cycle: what follows is already collected
            return {(node[0], None)}
        entering = entering | {node}
        app, top = node
        ends = self._run(self.world.screen(app, top).on_enter, {node}, acc, entering)
        hooks = self.world.layer.hooks.get((app, top), ())
        return ends | self._run(hooks, {node}, acc, entering)

    def _open(self, app_id: str, acc: _Acc, entering: set[Node]) -> set[Node]:
        node = (app_id, self.start[app_id])
        acc.nodes.add(node)
        ends = self._run(self.world.app(app_id).on_open, {node}, acc, entering)
        return ends | self._enter(node, acc, entering)

    # --- queries --------------------------------------------------------------------------
    def node_of(self, state: SimState) -> Node:
        return _LAUNCHER_NODE if state.app == LAUNCHER else (state.app, state.stack[-1])

    def is_normal(self, state: SimState) -> bool:
        """Could actions have built this state's stack (so the graph covers it)?"""
        if state.app == LAUNCHER:
            return not state.stack and (
                state.dialog is None or self.world.layer.dialog_apps.get(state.dialog, 0) is None)
        if state.app not in self.start or not state.stack:
            return False
        stack = state.stack
        screens = self.screens[state.app]
        if stack[0] != self.start[state.app] or any(s not in screens for s in stack):
            return False
        for lower, upper in zip(stack, stack[1:]):
            if lower not in self.below.get((state.app, upper), ()):
                return False
        if state.dialog is not None and state.dialog not in self.world.app(state.app).dialogs:
            return self.world.layer.dialog_apps.get(state.dialog, 0) in (None, state.app)
        return True

    def distances_to(self, writers: set[Node]) -> dict[Node, float]:
        """1 + the graph distance from each node to the nearest writer."""
        dist: dict[Node, float] = {n: 1 for n in writers}
        queue = deque(writers)
        while queue:
            n = queue.popleft()
            for m in self.reverse.get(n, ()):
                if m not in dist:
                    dist[m] = dist[n] + 1
                    queue.append(m)
        return dist


class Bound:
    """``h(state)``: a consistent lower bound on the actions to ``predicate``.

    Per false conjunct ``a`` at node ``N``: ``D_a(N)`` = 1 + graph distance to a writer of
    ``a``. Order the false conjuncts by the last action that makes each true; between two
    consecutive ones, ``a`` then ``b``, lie at least ``e[a][b]`` more actions: 0 when one
    action (one slot of :class:`_Acc`) may make both true, else at least one, and at
    least ``D_b(N) - 1`` from the node ``N`` where ``a`` was written (the next action
    moves at most one edge). The bound of a set ``S`` of false conjuncts is the cheapest
    such chain, ``min over orders of D_first(N) + sum e``; ``h`` is the largest over the
    subsets of the false conjuncts.

    Why it stays consistent (one action lowers it by at most one): for the best subset
    ``S`` at ``s`` and an action to ``s'`` that makes the conjuncts ``T`` of ``S`` true,
    ``T`` followed by the best order of ``S - T`` at ``s'`` is an order of ``S`` at
    ``s`` costing ``1`` (the action is a writer of each of ``T``, in one slot, so ``e``
    is 0 inside ``T``) ``+ e[t][b] <= D_b(N')`` ``+`` the rest, i.e. at most
    ``1 + h(s')``. Counting one action per conjunct where no action writes two is what
    makes two-app errands cheap to search: a purchase then a message needs every field,
    choice and button of both halves, and the bound now says so (before, the chain took
    shared writer *screens* as shared actions and bounded such errands at half their
    length).
    """

    MAX_CHAINED = 10  # more false conjuncts than this: single and pair bounds only

    def __init__(self, world: World, predicate: expr_mod.Expr):
        self.world = world
        self.nav = Navigation(world)
        variables = world.var_index
        self.atoms: list[expr_mod.Expr] = []
        self.dist: list[dict[Node, float]] = []
        writer_slots: list[list[tuple[Node, int]]] = []
        for atom in conjuncts(predicate):
            names = atom.names
            if not names or not names <= variables.keys():
                continue  # screen facts (app, screen, dialog): no bound from them
            slots = [(node, i) for node, acc in self.nav.acts.items()
                     for i, slot in enumerate(acc.slots) if self._writes(slot, atom)]
            self.atoms.append(atom)
            writer_slots.append(slots)
            self.dist.append(self.nav.distances_to({node for node, _ in slots}))
        n = len(self.atoms)
        acts = self.nav.acts
        self.e = [[0.0] * n for _ in range(n)]
        for a in range(n):
            for b in range(n):
                if a == b:
                    continue
                best = _INF
                for node, i in writer_slots[a]:
                    if self._writes(acts[node].slots[i], self.atoms[b]):
                        best = 0.0
                        break
                    best = min(best, max(1.0, self.dist[b].get(node, _INF) - 1))
                self.e[a][b] = best
        self.groups = self._app_groups(writer_slots)
        self._cache: dict[tuple[Node, int], float] = {}
        self.useful = n > 0

    def _app_groups(self, writer_slots: list[list[tuple[Node, int]]]) -> list[tuple[str, list[int]]]:
        """Conjuncts grouped by the one app whose screens alone can write them, for the
        additive bound of :meth:`__call__` (empty when fewer than two such apps).

        A group's chain bound changes only inside its app: from every node outside app
        ``A`` the way to ``A``'s writers starts with the same entry (OPENAPP, or an
        ``open_app`` effect, which land on the same screens from anywhere), so ``D_a`` is
        the same constant at every node outside ``A``, and no larger inside it. One action
        then lowers at most one group's bound (a write happens in one app; a move within
        an app changes only that app's group; a move from ``A`` to ``B`` cannot lower
        ``A``'s, since outside is never closer), so the sum of the groups' bounds is
        consistent as well. Both properties are checked here rather than assumed: a
        conjunct that breaks them stays out of the sum (which only weakens it)."""
        groups: dict[str, list[int]] = {}
        nodes = list(self.nav.acts)
        app_ids = {node[0] for node in nodes} - {LAUNCHER}
        for i, slots in enumerate(writer_slots):
            apps = {node[0] for node, _ in slots}
            if not slots:
                # A conjunct no action makes true ("no coffee was ordered": ``unchanged``
                # over a one-way count) is kept, not reached: false, it is a dead end (its
                # distance is infinite everywhere, so it adds nothing wrong to a sum). It
                # joins the group of the app its variables belong to; whether another
                # app's actions can break it is the composite's relevance check.
                apps = {name.split(".", 1)[0] for name in self.atoms[i].names}
                if not apps <= app_ids:
                    continue
            if len(apps) != 1:
                continue
            app = next(iter(apps))
            if app == LAUNCHER:
                continue
            dist = self.dist[i]
            outside = {dist.get(node, _INF) for node in nodes if node[0] != app}
            if len(outside) != 1:
                continue
            far = next(iter(outside))
            if any(dist.get(node, _INF) > far for node in nodes if node[0] == app):
                continue
            groups.setdefault(app, []).append(i)
        return sorted(groups.items()) if len(groups) > 1 else []

    @staticmethod
    def _writes(writes: set[tuple[str, Any]], atom: expr_mod.Expr) -> bool:
        names = atom.names
        single = next(iter(names)) if len(names) == 1 else None
        for var, value in writes:
            if var not in names:
                continue
            if single is None or value is ANY:
                return True
            try:
                if atom(lambda name, v=value: v if name == single else None):
                    return True
            except Exception:  # noqa: BLE001 - an odd comparison: assume it may hold
                return True
        return False

    def _chains(self, node: Node, false: list[int]) -> float:
        """max over subsets S of the false conjuncts of the cheapest chain through S."""
        d = [self.dist[a].get(node, _INF) for a in false]
        k = len(false)
        if k == 1:
            return d[0]
        e = self.e
        if k > self.MAX_CHAINED:
            best = max(d)
            for x in range(k):
                for y in range(x + 1, k):
                    a, b = false[x], false[y]
                    best = max(best, min(d[x] + e[a][b], d[y] + e[b][a]))
            return best
        # cost[S][last]: the cheapest order of subset S that ends with ``last``.
        full = 1 << k
        cost = [[_INF] * k for _ in range(full)]
        best = 0.0
        for x in range(k):
            cost[1 << x][x] = d[x]
        for subset in range(1, full):
            row = cost[subset]
            chain = _INF
            for last in range(k):
                c = row[last]
                if c == _INF:
                    continue
                if c < chain:
                    chain = c
                ea = e[false[last]]
                for nxt in range(k):
                    bit = 1 << nxt
                    if subset & bit:
                        continue
                    c2 = c + ea[false[nxt]]
                    if c2 < cost[subset | bit][nxt]:
                        cost[subset | bit][nxt] = c2
            if chain > best:
                best = chain
        return best

    def __call__(self, state: SimState, env: Any = None) -> float:
        env = env or self.world.env(state)
        mask = 0
        for i, atom in enumerate(self.atoms):
            if not atom(env):
                mask |= 1 << i
        if not mask:
            return 0.0
        node = self.nav.node_of(state)
        cached = self._cache.get((node, mask))
        if cached is None:
            false = [i for i in range(len(self.atoms)) if mask >> i & 1]
            cached = self._chains(node, false)
            # Two-app errands: the purchase and the message each need their own actions,
            # so their bounds add up (see _app_groups for why the sum stays consistent).
            total = 0.0
            for _app, members in self.groups:
                part = [i for i in false if i in members]
                if part:
                    total += self._chains(node, part)
            self._cache[(node, mask)] = cached = max(cached, total)
        return cached


__all__ = ["ANY", "Bound", "Navigation", "conjuncts"]
