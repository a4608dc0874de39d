"""What the oracle's search tells states apart by: the apps and variables that can matter
to a task's predicate (relevance), the values of a variable that nothing can tell apart
(value classes), and a state's search key, which keeps only those.

:class:`_Abstraction` is a base of :class:`~devices.sim.oracle._Search`, which sets
``world``, ``task``, ``goal`` and ``texts`` before calling ``_relevance`` and
``_value_classes``.
"""
from __future__ import annotations

from typing import Any

from devices.sim.bound import conjuncts
from devices.sim.model import Element, conditional_names, template_names
from devices.sim.state import SimState
from devices.sim.world import _TEMPLATE_RE, World


# --- which apps and variables can matter to a predicate ---------------------------------

def _effects_rw(effects: Any, reads: set[str], writes: set[str]) -> None:
    for eff in effects or ():
        if eff.op in ("set", "toggle", "add"):
            # toggle/add read only their own variable, which matters only if it is
            # needed anyway; counting that as a read would keep every switch in the key.
            writes.add(eff.target)
            if eff.source is not None:  # {var: name}: the value comes from another variable
                reads.add(eff.source)
        elif eff.op == "if":
            reads.update(eff.cond.names)
            _effects_rw(eff.then, reads, writes)
            _effects_rw(eff.otherwise, reads, writes)


def _element_rw(el: Element, reads: set[str], writes: set[str], layout: set[str]) -> None:
    for cond in (el.visible, el.enabled):
        if cond is not None:
            reads.update(cond.names)
    for effects in (el.on_tap, el.on_long_tap, el.on_change, el.on_enter):
        _effects_rw(effects, reads, writes)
    if el.var:
        writes.add(el.var)
    if el.kind == "text":  # wrapped text: its length can move what comes below it
        layout.update(template_names(el.text))
    for item in el.items:
        _element_rw(item, reads, writes, layout)


def _app_rw(world: World, app_id: str) -> tuple[set[str], set[str], set[str]]:
    reads: set[str] = set()
    writes: set[str] = set()
    layout: set[str] = set()
    app = world.app(app_id)
    _effects_rw(app.on_open, reads, writes)
    screens = list(app.screens.values()) + [s for (a, _), s in world.layer.screens.items()
                                            if a == app_id]
    for scr in screens:
        for gate in scr.gates:
            reads.update(gate.when.names)
        for effects in (scr.on_enter, scr.on_back, scr.on_wait):
            _effects_rw(effects, reads, writes)
        for el in scr.elements + scr.toolbar:
            _element_rw(el, reads, writes, layout)
    for (a, _), gates in world.layer.gates.items():
        if a == app_id:
            for gate in gates:
                reads.update(gate.when.names)
    for (a, _), hooks in world.layer.hooks.items():
        if a == app_id:
            _effects_rw(hooks, reads, writes)
    dialogs = list(app.dialogs.values()) + [
        d for did, d in world.layer.dialogs.items() if world.layer.dialog_apps.get(did) == app_id]
    for d in dialogs:
        _effects_rw(d.on_dismiss, reads, writes)
        for el in d.elements + d.buttons:
            _element_rw(el, reads, writes, layout)
        layout.update(template_names(d.title + d.text))
    return reads, writes, layout


class _Abstraction:
    """Relevance, value classes and search keys of one (world, task) search."""

    def _relevance(self) -> None:
        world = self.world
        names = set(self.goal.names)
        apps = [a.id for a in world.bundle.apps]
        rw = {a: _app_rw(world, a) for a in apps}
        relevant: set[str] = set()
        if names & {"screen", "dialog"}:
            relevant.update(apps)
        if names & {"app", "package"}:
            literals = {s.lower() for s in self.goal.strings}
            relevant.update(a.id for a in world.bundle.apps
                            if a.id.lower() in literals or a.package.lower() in literals
                            or a.name.lower() in literals)
        variables = set(world.var_index)
        needed = names & variables
        changed = True
        while changed:
            changed = False
            for a in apps:
                reads, writes, _ = rw[a]
                if a not in relevant and writes & needed:
                    relevant.add(a)
                    changed = True
                new = (reads & variables) - needed
                if a in relevant and new:
                    needed |= new
                    changed = True
        for a in relevant:
            needed |= rw[a][2] & variables
        needed |= {done for _, _, _, done in world.layer.triggers}
        self.relevant_apps = relevant
        self.keep = tuple(i for i, n in enumerate(world.var_names) if n in needed)

    def _value_classes(self) -> None:
        """Merge values of a variable that nothing can tell apart. A variable qualifies when
        every write to it is a literal (no toggle/add, no ``{var: …}`` copy, and it is copied
        nowhere), every condition and success conjunct that reads it reads nothing else, and
        it is shown only where its text cannot move or relabel a touch target (screen titles,
        subtitles, plain texts — whose height comes from the template, not the value). Its
        known values (initial, written, typed) are then grouped by the outcome of every such
        condition: e.g. a search query "earbuds" and "Pulse Sport Earbuds" both satisfy
        ``query contains "earbud"`` and nothing else, so the two states lead to the same
        places in the same number of actions. Values outside the known ones (typed key by
        key) stay distinct."""
        world = self.world
        variables = set(world.var_index)
        keep_names = {world.var_names[i] for i in self.keep}
        refused: set[str] = set()
        domain: dict[str, list[Any]] = {n: [] for n in keep_names}
        conds: dict[str, list[Any]] = {n: [] for n in keep_names}

        def add_value(var: str | None, value: Any) -> None:
            # Typed membership: True and 1 are equal in Python but not to templates.
            if var in domain and not any(v.__class__ is value.__class__ and v == value
                                         for v in domain[var]):
                domain[var].append(value)

        def condition(cond: Any) -> None:
            if cond is None:
                return
            names = cond.names & variables
            for n in names & keep_names:
                if cond.names != {n}:
                    refused.add(n)
                else:
                    conds[n].append(cond)

        def effects(effs: Any) -> None:
            for eff in effs or ():
                if eff.source is not None:
                    # a copied or added value: the target may take any value of the source,
                    # and what tells the source's values apart is the target's business
                    refused.update((eff.target, eff.source))
                elif eff.op == "set":
                    add_value(eff.target, eff.value)
                elif eff.op in ("toggle", "add"):
                    refused.add(eff.target)
                elif eff.op == "if":
                    condition(eff.cond)
                    effects(eff.then)
                    effects(eff.otherwise)

        def template(text: str, safe: bool) -> None:
            if not safe:
                refused.update(_TEMPLATE_RE.findall(text or ""))
            # A conditional text ("Locked" / "Unlocked") changes length and wording with
            # its condition: never merge the values it reads.
            refused.update(conditional_names(text or ""))

        def element(el: Element, in_dialog: bool = False) -> None:
            condition(el.visible)
            condition(el.enabled)
            for effs in (el.on_tap, el.on_long_tap, el.on_change, el.on_enter):
                effects(effs)
            if el.kind in ("switch", "checkbox", "stepper"):
                refused.add(el.var)
            elif el.kind in ("radio_group", "radio"):
                for opt in el.options:
                    add_value(el.var, opt.value)
            elif el.kind == "field":
                for text in self.texts:
                    add_value(el.var, text)
            plain = el.kind == "text" and not (el.on_tap or el.on_long_tap) and not in_dialog
            template(el.text, plain)
            template(el.desc, False)
            for item in el.items:
                element(item, in_dialog)

        for app in world.bundle.apps:
            effects(app.on_open)
        screens = [scr for app in world.bundle.apps for scr in app.screens.values()]
        screens += list(world.layer.screens.values())
        dialogs = [d for app in world.bundle.apps for d in app.dialogs.values()]
        dialogs += list(world.layer.dialogs.values())
        for scr in screens:
            for gate in scr.gates:
                condition(gate.when)
            for effs in (scr.on_enter, scr.on_back, scr.on_wait):
                effects(effs)
            for el in scr.elements + scr.toolbar:
                element(el)
        for gates in world.layer.gates.values():
            for gate in gates:
                condition(gate.when)
        for hooks in world.layer.hooks.values():
            effects(hooks)
        for d in dialogs:
            effects(d.on_dismiss)
            template(d.title + d.text, False)
            for el in d.elements + d.buttons:
                element(el, in_dialog=True)
        for atom in conjuncts(self.goal):
            condition(atom)
        refused.update(done for _, _, _, done in world.layer.triggers)  # read by the engine
        for name, value in zip(world.var_names, world.initial_values):
            add_value(name, value)
        for name, value in (self.task.state or {}).items():
            add_value(name, value)
        self.classes: list[tuple[int, dict[Any, Any]]] = []
        for j, i in enumerate(self.keep):
            name = world.var_names[i]
            if name in refused or len(domain[name]) < 2:
                continue
            groups: dict[tuple[bool, ...], Any] = {}
            mapping: dict[Any, Any] = {}
            for value in domain[name]:
                try:
                    signature = tuple(bool(c(lambda n, v=value: v)) for c in conds[name])
                    hashed = (value.__class__, value)
                    hash(hashed)
                except Exception:  # noqa: BLE001 - an odd value: keep it distinct
                    continue
                rep = groups.setdefault(signature, value)
                mapping[hashed] = rep
            if len(groups) < len(mapping):
                self.classes.append((j, mapping))

    def key(self, s: SimState) -> Any:
        values = s.values
        if not self.classes:
            return (tuple(values[i] for i in self.keep), s.app, s.stack, s.dialog, s.focus,
                    s.scroll, s.tick)
        kept = [values[i] for i in self.keep]
        for j, mapping in self.classes:
            value = kept[j]
            try:
                kept[j] = mapping.get((value.__class__, value), value)
            except TypeError:
                pass
        return (tuple(kept), s.app, s.stack, s.dialog, s.focus, s.scroll, s.tick)
