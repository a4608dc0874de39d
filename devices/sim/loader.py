"""Load app files (YAML or JSON) into :class:`AppSpec` and bundles of them.

Every mistake in a file is reported as :class:`SimLoadError` whose message names the file
and the place inside it, e.g.
``apps/coffee.yaml: screens.order.elements[3]: unknown element kind 'buton'``.
The schema is documented, with examples, in ``docs/simulator.md``.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import devices.sim.expr as expr_mod
from devices.sim.model import (
    EFFECT_OPS, ELEMENT_KINDS, LAUNCHER, RESERVED_NAMES, AppSpec, Dialog, Effect, Element, Gate,
    Option, Screen, number_value,
)
from devices.sim.reader import (  # SimLoadError is re-exported: callers import it from here
    BUNDLED_APPS_DIR, SimLoadError, _ValueChecks, _yaml_bool, read_data_file,
)

_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ITEM_RE = re.compile(r"\{item(?:\.([A-Za-z_][A-Za-z0-9_]*))?\}")


_COMMON_KEYS = {"kind", "id", "visible", "enabled", "on_tap", "on_long_tap", "text", "desc"}
_KIND_KEYS: dict[str, set[str]] = {
    "text": {"style"},
    "button": {"style"},
    "icon": {"glyph", "color"},
    "image": {"color", "height"},
    "row": {"subtitle", "glyph"},
    "switch": {"var", "on_change", "subtitle", "confirm"},
    "checkbox": {"var", "on_change", "confirm"},
    "radio_group": {"var", "options", "on_change"},
    "field": {"var", "hint", "password", "on_enter"},
    "list": {"items", "rows"},
    "tabs": {"items"},
    "spacer": {"height"},
    "stepper": {"var", "min", "max", "step", "on_change"},
    "radio": {"var", "value", "on_change", "subtitle"},
}
_TEXT_STYLES = {"", "title", "heading", "body", "caption"}
_BUTTON_STYLES = {"", "primary", "secondary", "text"}


def slug(text: str) -> str:
    out = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    return out or "item"


class _AppReader(_ValueChecks):
    """Turns one app file's data into an :class:`AppSpec`, with located errors."""

    def __init__(self, shown: str):
        self.shown = shown
        self.app_id = ""
        self.state: dict[str, Any] = {}
        self.foreign: list[tuple[str, str]] = []
        self.opens: list[tuple[str, str]] = []
        self.screen_refs: list[tuple[str, str]] = []
        self.dialog_refs: list[tuple[str, str]] = []
        self.confirm_dialogs: dict[str, Dialog] = {}  # made for switches with `confirm`

    # --- effects ------------------------------------------------------------------
    def effects(self, value: Any, where: str) -> tuple[Effect, ...]:
        if value is None:
            return ()
        items = value if isinstance(value, list) else [value]
        return tuple(self.effect(item, f"{where}[{i}]" if isinstance(value, list) else where)
                     for i, item in enumerate(items))

    def effect(self, item: Any, where: str) -> Effect:
        if isinstance(item, str):
            if item in ("back", "home", "close"):
                return Effect(item)
            raise self.fail(where, f"unknown effect '{item}'; expected one of {', '.join(EFFECT_OPS)}")
        data = self.mapping(item, where)
        if "if" in data:
            self.mapping(data, where, {"if", "then", "else"})
            return Effect(
                "if", cond=self.condition(data["if"], f"{where}.if"),
                then=self.effects(data.get("then"), f"{where}.then"),
                otherwise=self.effects(data.get("else"), f"{where}.else"),
            )
        if len(data) != 1:
            raise self.fail(where, f"an effect has exactly one key, got {', '.join(map(str, data))}")
        op, arg = next(iter(data.items()))
        if op not in EFFECT_OPS:
            raise self.fail(where, f"unknown effect '{op}'; expected one of {', '.join(EFFECT_OPS)}")
        if op in ("back", "home", "close"):
            return Effect(op)
        if op == "go":
            target = self.string(arg, f"{where}.go", required=True)
            self.screen_refs.append((f"{where}.go", target))
            return Effect("go", target)
        if op == "open":
            target = self.string(arg, f"{where}.open", required=True)
            self.dialog_refs.append((f"{where}.open", target))
            return Effect("open", target)
        if op == "open_app":
            target = self.string(arg, f"{where}.open_app", required=True)
            self.opens.append((f"{where}.open_app", target))
            return Effect("open_app", target)
        if op == "toggle":
            return Effect("toggle", self.var_name(arg, f"{where}.toggle"))
        # set / add: a mapping of variable -> value; several become several effects via if
        pairs = self.mapping(arg, f"{where}.{op}")
        if not pairs:
            raise self.fail(f"{where}.{op}", "names no variable")
        out = []
        for name, val in pairs.items():
            qualified = self.var_name(name, f"{where}.{op}.{name}")
            if isinstance(val, dict):  # {var: other}: the other variable's current value
                source = self.value_source(val, op, f"{where}.{op}.{name}")
                out.append(Effect(op, qualified, source=source))
                continue
            if op == "add" and (isinstance(val, bool) or not isinstance(val, (int, float))):
                raise self.fail(f"{where}.add.{name}", "add needs a number or {var: name}")
            if op == "set" and not (val is None or isinstance(val, (bool, int, float, str))):
                raise self.fail(f"{where}.set.{name}", "a value is text, a number, true/false, "
                                "null or {var: name}")
            out.append(Effect(op, qualified, val))
        if len(out) == 1:
            return out[0]
        return Effect("if", cond=expr_mod.parse(True), then=tuple(out))

    def value_source(self, value: dict[str, Any], op: str, where: str) -> str:
        """``{var: name}`` as the value of ``set`` / ``add``: the variable (qualified) whose
        current value is written or added. A mapping, so no literal text can mean it."""
        if set(value) != {"var"}:
            raise self.fail(where, "a value taken from another variable is written "
                            "{var: name}, with no other key")
        source = self.var_name(value["var"], f"{where}.var")
        initial = self.state.get(source)
        if op == "add" and source in self.state and number_value(initial) is None and initial != "":
            raise self.fail(f"{where}.var", f"'{value['var']}' starts as {json.dumps(initial)}; "
                            "add needs a variable that holds a number")
        return source

    def confirm(self, spec: Any, kw: dict[str, Any], where: str) -> tuple[str, expr_mod.Expr]:
        """Confirm-before-change on a switch: the tap opens "are you sure?" and only its
        confirm button flips the switch (and runs ``on_change``)."""
        if isinstance(spec, str):
            spec = {"title": spec}
        spec = self.mapping(spec, where, {"when", "title", "text", "button", "cancel"})
        when = spec.get("when", "always")
        if isinstance(when, bool):  # YAML reads a bare on/off as true/false
            when = "on" if when else "off"
        var = kw["var"]
        conditions = {"always": "true", "off": var, "on": f"not {var}"}
        if when not in conditions:
            raise self.fail(f"{where}.when", "expected on, off or always (the change that asks)")
        title = self.string(spec.get("title"), f"{where}.title", required=True)
        dialog_id = f"confirm_{kw['id']}"
        go_ahead = Element(
            "button", f"{kw['id']}_confirm",
            text=self.string(spec.get("button"), f"{where}.button") or "OK",
            on_tap=(Effect("toggle", var),) + kw.get("on_change", ()), where=f"{where}.button")
        cancel = Element("button", f"{kw['id']}_cancel",
                         text=self.string(spec.get("cancel"), f"{where}.cancel") or "Cancel",
                         where=f"{where}.cancel")
        self.confirm_dialogs[dialog_id] = Dialog(
            id=dialog_id, title=self.template(title, f"{where}.title"),
            text=self.template(self.string(spec.get("text"), f"{where}.text"), f"{where}.text"),
            buttons=(cancel, go_ahead), where=where)
        return dialog_id, expr_mod.parse(conditions[when])

    # --- elements -----------------------------------------------------------------
    def element(self, item: Any, where: str, default_kind: str | None = None) -> Element:
        data = self.mapping(item, where)
        kind = data.get("kind", default_kind)
        if kind is None:
            raise self.fail(where, "an element needs a 'kind'")
        if kind not in _KIND_KEYS:
            raise self.fail(
                where, f"unknown element kind '{kind}'; expected one of {', '.join(ELEMENT_KINDS)}"
            )
        self.mapping(data, where, _COMMON_KEYS | _KIND_KEYS[kind])
        text = self.template(self.string(data.get("text"), f"{where}.text"), f"{where}.text")
        raw_id = data.get("id")
        if raw_id is not None and (not isinstance(raw_id, str) or not _IDENT_RE.match(raw_id)):
            raise self.fail(f"{where}.id", f"'{raw_id}' is not a valid id (letters, digits, _)")
        kw: dict[str, Any] = {
            "kind": kind,
            "id": raw_id or slug(text or str(data.get("desc") or kind)),
            "text": text,
            "desc": self.string(data.get("desc"), f"{where}.desc"),
            "where": where,
        }
        if kind in ("field", "list") and raw_id is None:
            raise self.fail(where, f"a {kind} needs an 'id'")
        for key in ("visible", "enabled"):
            if key in data:
                kw[key] = self.condition(data[key], f"{where}.{key}")
        for key in ("on_tap", "on_long_tap", "on_change", "on_enter"):
            if key in data:
                kw[key] = self.effects(data[key], f"{where}.{key}")
        if "subtitle" in data:
            kw["subtitle"] = self.template(
                self.string(data["subtitle"], f"{where}.subtitle"), f"{where}.subtitle")
        if "style" in data:
            style = self.string(data["style"], f"{where}.style")
            allowed = _TEXT_STYLES if kind == "text" else _BUTTON_STYLES
            if style not in allowed:
                raise self.fail(f"{where}.style", f"unknown style '{style}'; expected one of "
                                f"{', '.join(s for s in sorted(allowed) if s)}")
            kw["style"] = style
        for key in ("glyph", "color", "hint"):
            if key in data:
                kw[key] = self.string(data[key], f"{where}.{key}")
        if "password" in data:
            kw["password"] = bool(data["password"])
        for key in ("rows", "height"):
            if key in data:
                value = data[key]
                if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                    raise self.fail(f"{where}.{key}", "expected a positive whole number")
                kw[key] = value
        if kind == "stepper":
            for key, name in (("min", "minimum"), ("max", "maximum"), ("step", "step")):
                if key in data:
                    value = data[key]
                    if isinstance(value, bool) or not isinstance(value, (int, float)):
                        raise self.fail(f"{where}.{key}", "expected a number")
                    kw[name] = value
            if kw.get("step", 1) <= 0:
                raise self.fail(f"{where}.step", "expected a number above 0")
            if ("minimum" in kw and "maximum" in kw and kw["minimum"] > kw["maximum"]):
                raise self.fail(f"{where}.min", "min is above max")
        if kind == "radio":
            # One choice of a radio group whose options are rows of a list (too many for a
            # radio_group, or each with its own row); checked when var == value.
            if "value" not in data:
                raise self.fail(where, "a radio needs the 'value' it sets")
            value = data["value"]
            if value is not None and not isinstance(value, (str, bool, int, float)):
                raise self.fail(f"{where}.value", "a value is text, a number, true/false or null")
            kw["options"] = (Option(value, text),)
        if kind in ("switch", "checkbox", "radio_group", "field", "stepper", "radio"):
            if "var" not in data:
                raise self.fail(where, f"a {kind} needs a 'var' to hold its state")
            kw["var"] = self.var_name(data["var"], f"{where}.var")
            initial = self.state.get(kw["var"])
            if kind in ("switch", "checkbox") and kw["var"] in self.state and not isinstance(initial, bool):
                raise self.fail(f"{where}.var", f"'{data['var']}' must start as true or false")
            if kind == "stepper" and kw["var"] in self.state and (
                    isinstance(initial, bool) or not isinstance(initial, (int, float))):
                raise self.fail(f"{where}.var", f"'{data['var']}' must start as a number")
        if "confirm" in data:
            kw["confirm"], kw["confirm_when"] = self.confirm(data["confirm"], kw, f"{where}.confirm")
        if kind == "radio_group":
            options = data.get("options")
            if not isinstance(options, list) or not options:
                raise self.fail(f"{where}.options", "a radio_group needs a list of options")
            opts = []
            for i, opt in enumerate(options):
                owhere = f"{where}.options[{i}]"
                if isinstance(opt, dict):
                    self.mapping(opt, owhere, {"value", "text"})
                    if "value" not in opt:
                        raise self.fail(owhere, "an option needs a 'value'")
                    opts.append(Option(opt["value"], self.string(opt.get("text", opt["value"]), owhere)))
                elif isinstance(opt, (str, int, float)) and not isinstance(opt, bool):
                    opts.append(Option(str(opt).lower() if isinstance(opt, str) else opt, str(opt)))
                elif isinstance(opt, bool):
                    raise self.fail(owhere, f"an option is text or {{value, text}}, but "
                                    f"{_yaml_bool(opt)}")
                else:
                    raise self.fail(owhere, "an option is text or {value, text}")
            kw["options"] = tuple(opts)
        if kind == "list":
            items = data.get("items")
            if not isinstance(items, list):
                raise self.fail(f"{where}.items", "a list needs 'items' (a list of elements)")
            kw["items"] = tuple(
                self.element(it, at, default_kind="row")
                for at, it in self.expand_list(items, f"{where}.items")
            )
            for it in kw["items"]:
                if it.kind in ("list", "tabs", "field", "radio_group"):
                    raise self.fail(it.where, f"a {it.kind} cannot be a list item")
        if kind == "tabs":
            items = data.get("items")
            if not isinstance(items, list) or not items:
                raise self.fail(f"{where}.items", "tabs need 'items' ({text, screen} each)")
            tabs = []
            for i, it in enumerate(items):
                twhere = f"{where}.items[{i}]"
                tab = self.mapping(it, twhere, {"text", "screen", "id"})
                screen = self.string(tab.get("screen"), f"{twhere}.screen", required=True)
                self.screen_refs.append((f"{twhere}.screen", screen))
                label = self.string(tab.get("text"), f"{twhere}.text", required=True)
                tabs.append(Element("row", tab.get("id") or slug(label) + "_tab", text=label,
                                    screen=screen, on_tap=(Effect("go", screen),), where=twhere))
            kw["items"] = tuple(tabs)
        if kind == "icon" and not (kw.get("desc") or text):
            raise self.fail(where, "an icon needs a 'desc' (its content description)")
        return Element(**kw)

    def elements(self, value: Any, where: str) -> tuple[Element, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.fail(where, "expected a list of elements")
        out = tuple(self.element(item, at) for at, item in self.expand_list(value, where))
        stateful = [e.id for e in out if e.kind in ("field", "list")]
        for ident in stateful:
            if stateful.count(ident) > 1:
                raise self.fail(where, f"two elements have the id '{ident}'")
        return out

    # --- parameterised screens, dialogs and elements ------------------------------------
    def for_each(self, data: Any, where: str) -> list[tuple[str, dict[str, Any], Any]] | None:
        """``for_each: {key: {field: value, ...}, ...}`` (or a list of keys): one copy of
        ``data`` per key, with ``{item}`` replaced by the key and ``{item.field}`` by the
        field's value in every text of the copy. None when ``data`` has no ``for_each``."""
        if not isinstance(data, dict) or "for_each" not in data:
            return None
        spec = data["for_each"]
        if isinstance(spec, list):
            for key in spec:
                if isinstance(key, bool):
                    raise self.fail(f"{where}.for_each", f"the item key {_yaml_bool(key)}")
            spec = {str(key): {} for key in spec}
        if not isinstance(spec, dict) or not spec:
            raise self.fail(f"{where}.for_each", "expected a mapping of item keys to fields, "
                            "or a list of keys")
        body = {k: v for k, v in data.items() if k != "for_each"}
        copies = []
        for key, fields in spec.items():
            if isinstance(key, bool):
                raise self.fail(f"{where}.for_each", f"the item key {_yaml_bool(key)}")
            if not isinstance(key, str) or not _IDENT_RE.match(key):
                raise self.fail(f"{where}.for_each", f"'{key}' is not a valid item key")
            if fields is None:
                fields = {}
            if not isinstance(fields, dict):
                raise self.fail(f"{where}.for_each.{key}", "expected a mapping of fields")
            for field_name in fields:
                if isinstance(field_name, bool):
                    raise self.fail(f"{where}.for_each.{key}",
                                    f"the field name {_yaml_bool(field_name)}")
            copies.append((key, fields, self._substitute(body, key, fields, f"{where}.for_each.{key}")))
        return copies

    def _substitute(self, value: Any, key: str, fields: dict[str, Any], where: str) -> Any:
        if isinstance(value, str):
            def repl(match: re.Match[str]) -> str:
                name = match.group(1)
                if name is None:
                    return key
                if name not in fields:
                    raise self.fail(where, f"no field '{name}' for item '{key}'")
                return str(fields[name])

            return _ITEM_RE.sub(repl, value)
        if isinstance(value, list):
            return [self._substitute(v, key, fields, where) for v in value]
        if isinstance(value, dict):
            return {self._substitute(k, key, fields, where) if isinstance(k, str) else k:
                    self._substitute(v, key, fields, where) for k, v in value.items()}
        return value

    def expand_mapping(self, data: dict[str, Any], where: str) -> dict[str, Any]:
        """Screens or dialogs: ``camera`` with ``for_each: {front: …, backyard: …}``
        becomes ``camera_front`` and ``camera_backyard``."""
        out: dict[str, Any] = {}
        for ident, body in data.items():
            copies = self.for_each(body, f"{where}.{ident}")
            if copies is None:
                out[ident] = body
                continue
            for key, _fields, copy in copies:
                name = f"{ident}_{key}"
                if name in data or name in out:
                    raise self.fail(f"{where}.{ident}.for_each", f"'{name}' is already defined")
                out[name] = copy
        return out

    def expand_list(self, items: list[Any], where: str) -> list[tuple[str, Any]]:
        """Elements or list items; one with ``for_each`` stands for one per key."""
        out: list[tuple[str, Any]] = []
        for i, item in enumerate(items):
            copies = self.for_each(item, f"{where}[{i}]")
            if copies is None:
                out.append((f"{where}[{i}]", item))
            else:
                out.extend((f"{where}[{i}].for_each.{key}", copy) for key, _f, copy in copies)
        return out

    # --- the file -------------------------------------------------------------------
    def app(self, data: Any) -> AppSpec:
        data = self.mapping(data, "", {"app", "state", "screens", "dialogs", "on_open"})
        head = self.mapping(data.get("app"), "app",
                            {"id", "name", "package", "description", "start", "icon"})
        name = self.string(head.get("name"), "app.name", required=True)
        self.app_id = self.string(head.get("id"), "app.id") or slug(name)
        if not _IDENT_RE.match(self.app_id) or self.app_id in RESERVED_NAMES | {LAUNCHER}:
            raise self.fail("app.id", f"'{self.app_id}' cannot be an app id")
        package = self.string(head.get("package"), "app.package") or f"com.kairos.{self.app_id}"
        icon = self.mapping(head.get("icon", {}), "app.icon", {"color", "glyph"})
        state_data = data.get("state") or {}
        self.mapping(state_data, "state")
        for key, value in state_data.items():
            if isinstance(key, bool):
                raise self.fail("state", f"the variable name {_yaml_bool(key)}")
            if not isinstance(key, str) or not _IDENT_RE.match(key) or key in RESERVED_NAMES:
                raise self.fail(f"state.{key}", f"'{key}' cannot be a variable name")
            if not (value is None or isinstance(value, (bool, int, float, str))):
                raise self.fail(f"state.{key}", "a value is text, a number, true/false or null")
            self.state[f"{self.app_id}.{key}"] = value
        screens_data = self.expand_mapping(self.mapping(data.get("screens"), "screens"), "screens")
        if not screens_data:
            raise self.fail("screens", "an app needs at least one screen")
        screens: dict[str, Screen] = {}
        for sid, sdata in screens_data.items():
            where = f"screens.{sid}"
            if not isinstance(sid, str) or not _IDENT_RE.match(sid):
                raise self.fail(where, f"'{sid}' is not a valid screen id")
            s = self.mapping(sdata, where, {"title", "elements", "toolbar", "on_enter", "on_back",
                                            "on_wait", "gates", "up"})
            gates = []
            for i, g in enumerate(s.get("gates") or []):
                gwhere = f"{where}.gates[{i}]"
                g = self.mapping(g, gwhere, {"when", "screen"})
                target = self.string(g.get("screen"), f"{gwhere}.screen", required=True)
                self.screen_refs.append((f"{gwhere}.screen", target))
                gates.append(Gate(self.condition(g.get("when"), f"{gwhere}.when"), target))
            screens[sid] = Screen(
                id=sid,
                title=self.template(self.string(s.get("title"), f"{where}.title"), f"{where}.title"),
                elements=self.elements(s.get("elements"), f"{where}.elements"),
                toolbar=self.elements(s.get("toolbar"), f"{where}.toolbar"),
                on_enter=self.effects(s.get("on_enter"), f"{where}.on_enter"),
                on_back=self.effects(s["on_back"], f"{where}.on_back") if "on_back" in s else None,
                on_wait=self.effects(s.get("on_wait"), f"{where}.on_wait"),
                gates=tuple(gates),
                up=bool(s["up"]) if "up" in s else None,
                where=where,
            )
            for el in screens[sid].toolbar:
                if el.kind not in ("icon", "button"):
                    raise self.fail(el.where, "a toolbar holds icons and buttons only")
        dialogs: dict[str, Dialog] = {}
        dialogs_data = self.expand_mapping(self.mapping(data.get("dialogs") or {}, "dialogs"),
                                           "dialogs")
        for did, ddata in dialogs_data.items():
            where = f"dialogs.{did}"
            d = self.mapping(ddata, where, {"title", "text", "elements", "buttons", "cancelable",
                                            "on_dismiss"})
            buttons = []
            for i, b in enumerate(d.get("buttons") or []):
                bwhere = f"{where}.buttons[{i}]"
                if isinstance(b, str):
                    b = {"text": b}
                b = dict(self.mapping(b, bwhere))
                b.setdefault("kind", "button")
                if b["kind"] != "button":
                    raise self.fail(bwhere, "dialog buttons are buttons")
                buttons.append(self.element(b, bwhere))
            dialogs[did] = Dialog(
                id=did,
                title=self.template(self.string(d.get("title"), f"{where}.title"), f"{where}.title"),
                text=self.template(self.string(d.get("text"), f"{where}.text"), f"{where}.text"),
                elements=self.elements(d.get("elements"), f"{where}.elements"),
                buttons=tuple(buttons),
                cancelable=bool(d.get("cancelable", True)),
                on_dismiss=self.effects(d.get("on_dismiss"), f"{where}.on_dismiss"),
                where=where,
            )
        for did, dialog in self.confirm_dialogs.items():
            if did in dialogs:
                raise self.fail(dialog.where, f"the confirmation dialog '{did}' clashes with a "
                                "dialog of that id")
            dialogs[did] = dialog
        start = self.string(head.get("start"), "app.start") or next(iter(screens))
        if start not in screens:
            raise self.fail("app.start", f"no screen '{start}'")
        for where, target in self.screen_refs:
            if target not in screens:
                raise self.fail(where, f"no screen '{target}' (screens: {', '.join(screens)})")
        for where, target in self.dialog_refs:
            if target not in dialogs:
                raise self.fail(where, f"no dialog '{target}' (dialogs: {', '.join(dialogs) or 'none'})")
        return AppSpec(
            id=self.app_id, name=name, package=package,
            description=self.string(head.get("description"), "app.description"),
            start=start,
            icon_color=self.string(icon.get("color"), "app.icon.color") or "#3F51B5",
            icon_glyph=self.string(icon.get("glyph"), "app.icon.glyph") or name[:1].upper(),
            state=dict(self.state), screens=screens, dialogs=dialogs,
            on_open=self.effects(data.get("on_open"), "on_open"),
            path=self.shown, foreign=tuple(self.foreign), opens=tuple(self.opens),
        )


def load_app_data(data: Any, shown: str = "<app>") -> AppSpec:
    """Build an app from already-parsed data (``shown`` names it in messages)."""
    return _AppReader(shown).app(data)


def load_app(path: str | Path) -> AppSpec:
    """Load one app file (``.yaml``, ``.yml`` or ``.json``)."""
    data, shown = read_data_file(path)
    return load_app_data(data, shown)


class AppBundle:
    """The apps installed on a simulated phone. Checks references between apps."""

    def __init__(self, apps: Iterable[AppSpec]):
        self.apps: tuple[AppSpec, ...] = tuple(apps)
        self.by_id: dict[str, AppSpec] = {}
        for app in self.apps:
            if app.id in self.by_id:
                raise SimLoadError(
                    f"{app.path}: app.id: '{app.id}' is already used by {self.by_id[app.id].path}")
            self.by_id[app.id] = app
        self.state: dict[str, Any] = {}
        for app in self.apps:
            self.state.update(app.state)
        for app in self.apps:
            for where, name in app.foreign:
                if name not in self.state:
                    raise SimLoadError(f"{app.path}: {where}: unknown variable '{name}'")
            for where, target in app.opens:
                if self.find(target) is None:
                    raise SimLoadError(f"{app.path}: {where}: no installed app '{target}'")

    def find(self, name: str) -> AppSpec | None:
        """An app by id, name or package (case-insensitive), else by a unique partial name."""
        key = name.strip().lower()
        for app in self.apps:
            if key in (app.id.lower(), app.name.lower(), app.package.lower()):
                return app
        key = re.sub(r"\b(the|app)\b", "", key).strip()
        if not key:
            return None
        partial = [a for a in self.apps if key in a.name.lower() or a.name.lower() in key]
        return partial[0] if len(partial) == 1 else None

    def with_apps(self, extra: Iterable[AppSpec]) -> "AppBundle":
        extra = list(extra)
        replaced = {a.id for a in extra}
        return AppBundle([a for a in self.apps if a.id not in replaced] + extra)

    def __iter__(self):
        return iter(self.apps)

    def __len__(self) -> int:
        return len(self.apps)


def load_apps(paths: Iterable[str | Path]) -> AppBundle:
    """Load app files, or every ``*.yaml``/``*.yml``/``*.json`` in given folders."""
    files: list[Path] = []
    for path in paths:
        p = Path(path)
        if p.is_dir():
            files.extend(sorted(f for f in p.iterdir() if f.suffix in (".yaml", ".yml", ".json")))
        else:
            files.append(p)
    return AppBundle(load_app(f) for f in files)


@lru_cache(maxsize=1)
def bundled_apps() -> AppBundle:
    """The apps installed on every simulated phone (``devices/sim/apps/``)."""
    return load_apps([BUNDLED_APPS_DIR])
