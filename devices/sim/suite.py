"""Task suites as data: instructions, initial state, success predicates, hidden
preferences and perturbations. Schema and examples: ``docs/simulator.md``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import devices.sim.expr as expr_mod
from devices.sim.loader import AppBundle, bundled_apps, load_app
from devices.sim.perturb import Perturbation, perturbation_vars
from devices.sim.reader import SimLoadError, read_data_file
from devices.sim.world import world_for

BUNDLED_SUITES_DIR = Path(__file__).resolve().parent / "suites"
PERTURBATION_KINDS: tuple[str, ...] = (
    "popup", "permission", "network_failure", "logged_out", "loading",
)
_PERTURBATION_KEYS: dict[str, set[str]] = {
    "popup": {"title", "text", "button", "close", "at_step"},
    "permission": {"permission", "text"},
    "network_failure": {"failures"},
    "logged_out": {"account", "password"},
    "loading": {"waits"},
}
_NO_PREFERENCE = "No preference — whatever you think is best."


@dataclass(frozen=True)
class Preference:
    """A hidden user preference: what the user answers when asked about ``about``."""

    answer: str
    about: tuple[str, ...] = ()


@dataclass(frozen=True)
class Start:
    app: str
    screen: str | None = None


@dataclass
class SimTask:
    id: str
    instruction: str
    success: expr_mod.Expr | None = None
    state: dict[str, Any] = field(default_factory=dict)
    start: Start | None = None
    preferences: tuple[Preference, ...] = ()
    inputs: tuple[str, ...] = ()
    perturbations: tuple[Perturbation, ...] = ()
    max_steps: int = 20
    tags: tuple[str, ...] = ()
    suite: str = ""
    # Ids of the elements whose tap commits a harm the user must approve (test material
    # for the sensitive-action policy; the agent never sees it).
    sensitive: tuple[str, ...] = ()

    @property
    def has_predicate(self) -> bool:
        return self.success is not None

    @property
    def is_ambiguous(self) -> bool:
        """The instruction leaves a choice open that only the user can settle."""
        return bool(self.preferences)

    def answer(self, question: str) -> str:
        """The user's answer to a clarification question (the hidden preference)."""
        words = set(re.findall(r"[a-z0-9]+", question.lower()))
        for pref in self.preferences:
            if any(k.lower() in words or k.lower() in question.lower() for k in pref.about):
                return pref.answer
        for p in self.perturbations:
            if p.kind == "logged_out" and p.param("password") and words & {
                    "password", "login", "log", "sign", "signin", "credentials", "account"}:
                return f"My password is {p.param('password')}"
        if self.preferences:
            return " ".join(p.answer for p in self.preferences)
        return _NO_PREFERENCE

    def type_candidates(self) -> tuple[str, ...]:
        """Texts the oracle may TYPE: ``inputs``, string literals of the predicate, and a
        logged-out perturbation's password."""
        out: list[str] = list(self.inputs)
        if self.success is not None:
            out.extend(s for s in self.success.strings if s.strip())
        for p in self.perturbations:
            if p.kind == "logged_out" and p.param("password"):
                out.append(str(p.param("password")))
        return tuple(dict.fromkeys(out))


@dataclass
class Suite:
    name: str
    path: str
    tasks: list[SimTask]
    bundle: AppBundle
    description: str = ""

    def task(self, task_id: str) -> SimTask:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(f"suite '{self.name}' has no task '{task_id}' "
                       f"(tasks: {', '.join(t.id for t in self.tasks)})")


def _fail(shown: str, where: str, message: str) -> SimLoadError:
    return SimLoadError(f"{shown}: {where}: {message}")


def _check_keys(shown: str, where: str, data: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise _fail(shown, where, f"expected a mapping, got {type(data).__name__}")
    for key in data:
        if key not in allowed:
            raise _fail(shown, where, f"unknown key '{key}'; allowed: {', '.join(sorted(allowed))}")
    return data


def _text(shown: str, where: str, value: Any, required: bool = False) -> str:
    if value is None:
        if required:
            raise _fail(shown, where, "is required")
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _fail(shown, where, "expected text")
    return str(value)


def _perturbation(shown: str, where: str, data: Any, bundle: AppBundle) -> Perturbation:
    if not isinstance(data, dict) or "kind" not in data:
        raise _fail(shown, where, "a perturbation is a mapping with a 'kind'")
    kind = data["kind"]
    if kind not in PERTURBATION_KINDS:
        raise _fail(shown, where, f"unknown perturbation kind '{kind}'; expected one of "
                    f"{', '.join(PERTURBATION_KINDS)}")
    _check_keys(shown, where, data, {"kind", "app", "screen"} | _PERTURBATION_KEYS[kind])
    app_name = data.get("app")
    app_id = None
    if app_name is not None:
        app = bundle.find(str(app_name))
        if app is None:
            raise _fail(shown, f"{where}.app", f"no installed app '{app_name}'")
        app_id = app.id
        screen = data.get("screen")
        if screen is not None and screen not in app.screens:
            raise _fail(shown, f"{where}.screen", f"app '{app.id}' has no screen '{screen}'")
    elif not (kind == "popup" and "at_step" in data):
        raise _fail(shown, where, f"a {kind} perturbation needs an 'app'")
    for key in ("at_step", "failures", "waits"):
        if key in data and (isinstance(data[key], bool) or not isinstance(data[key], int)
                            or data[key] < 1):
            raise _fail(shown, f"{where}.{key}", "expected a whole number ≥ 1")
    if kind == "permission" and not re.match(r"^[a-z_]+$", str(data.get("permission", ""))):
        raise _fail(shown, f"{where}.permission", "name the permission, e.g. 'location'")
    params = tuple(sorted((k, v) for k, v in data.items() if k not in ("kind", "app", "screen")))
    return Perturbation(kind, app_id, data.get("screen"), params, where)


def _task(shown: str, where: str, data: Any, bundle: AppBundle, suite_name: str) -> SimTask:
    data = _check_keys(shown, where, data, {
        "id", "instruction", "success", "state", "start", "preference", "preferences",
        "inputs", "perturbations", "max_steps", "tags", "sensitive", "unchanged"})
    task_id = _text(shown, f"{where}.id", data.get("id"), required=True)
    instruction = _text(shown, f"{where}.instruction", data.get("instruction"), required=True)
    perturbations = tuple(
        _perturbation(shown, f"{where}.perturbations[{i}]", p, bundle)
        for i, p in enumerate(data.get("perturbations") or []))
    # Names a predicate may use: every app variable, the perturbations' variables and
    # the screen facts; an unknown one is a typo worth failing on.
    known = set(bundle.state) | set(perturbation_vars(perturbations))

    def resolve(name: str) -> str:
        if name in ("app", "screen", "dialog", "package") or name in known:
            return name
        raise expr_mod.ExprError(f"unknown variable '{name}'")

    state = _check_keys(shown, f"{where}.state", data.get("state") or {}, known)
    success = None
    if data.get("success") is not None:
        try:
            success = expr_mod.parse(data["success"], resolve)
        except expr_mod.ExprError as exc:
            raise _fail(shown, f"{where}.success", str(exc)) from None
        if data.get("unchanged") is not None:
            source = _with_unchanged(shown, f"{where}.unchanged", data["unchanged"], success,
                                     bundle, state)
            success = expr_mod.parse(source, resolve)
    elif data.get("unchanged") is not None:
        raise _fail(shown, f"{where}.unchanged", "needs a success predicate to add to")
    start = None
    if data.get("start") is not None:
        sdata = data["start"]
        if isinstance(sdata, str):
            sdata = {"app": sdata}
        sdata = _check_keys(shown, f"{where}.start", sdata, {"app", "screen"})
        app = bundle.find(_text(shown, f"{where}.start.app", sdata.get("app"), required=True))
        if app is None:
            raise _fail(shown, f"{where}.start.app", f"no installed app '{sdata.get('app')}'")
        if sdata.get("screen") is not None and sdata["screen"] not in app.screens:
            raise _fail(shown, f"{where}.start.screen", f"app '{app.id}' has no screen "
                        f"'{sdata['screen']}'")
        start = Start(app.id, sdata.get("screen"))
    prefs_data = data.get("preferences") or ([data["preference"]] if data.get("preference") else [])
    preferences = []
    for i, p in enumerate(prefs_data):
        pwhere = f"{where}.preferences[{i}]"
        if isinstance(p, str):
            p = {"answer": p}
        p = _check_keys(shown, pwhere, p, {"answer", "about"})
        about = p.get("about") or []
        if isinstance(about, str):
            about = [about]
        preferences.append(Preference(_text(shown, f"{pwhere}.answer", p.get("answer"), True),
                                      tuple(str(a) for a in about)))
    inputs = data.get("inputs") or []
    if not isinstance(inputs, list):
        raise _fail(shown, f"{where}.inputs", "expected a list of texts")
    sensitive = data.get("sensitive") or []
    if not isinstance(sensitive, list) or not all(isinstance(x, str) for x in sensitive):
        raise _fail(shown, f"{where}.sensitive", "expected a list of element ids")
    ids = _element_ids(bundle)
    for i, element_id in enumerate(sensitive):
        if element_id not in ids:
            raise _fail(shown, f"{where}.sensitive[{i}]", f"no app has an element '{element_id}'")
    max_steps = data.get("max_steps", 20)
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise _fail(shown, f"{where}.max_steps", "expected a whole number ≥ 1")
    return SimTask(
        id=task_id, instruction=instruction, success=success, state=dict(state), start=start,
        preferences=tuple(preferences), inputs=tuple(str(x) for x in inputs),
        perturbations=perturbations, max_steps=max_steps,
        tags=tuple(str(t) for t in data.get("tags") or []), suite=suite_name,
        sensitive=tuple(sensitive),
    )


def _literal(value: Any) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _with_unchanged(shown: str, where: str, spec: Any, success: expr_mod.Expr,
                    bundle: AppBundle, state: dict[str, Any]) -> str:
    """``success`` and "nothing else changed": every variable of the named apps that the
    predicate does not read keeps its value from the task's start. ``spec``: a list of
    app ids, or ``{apps: [...], except: [qualified variables]}`` for side effects the
    task may have (a search query typed on the way)."""
    if isinstance(spec, list):
        spec = {"apps": spec}
    if not isinstance(spec, dict) or set(spec) - {"apps", "except"}:
        raise _fail(shown, where, "expected a list of app ids, or {apps: [...], except: [...]}")
    apps, exempt = spec.get("apps") or [], spec.get("except") or []
    if not isinstance(apps, list) or not apps or not isinstance(exempt, list):
        raise _fail(shown, where, "apps must be a non-empty list and except a list")
    for i, app_id in enumerate(apps):
        if bundle.by_id.get(str(app_id)) is None:
            raise _fail(shown, f"{where}.apps[{i}]", f"no installed app '{app_id}'")
    for i, name in enumerate(exempt):
        if name not in bundle.state:
            raise _fail(shown, f"{where}.except[{i}]", f"unknown variable '{name}'")
    kept = [name for name in sorted(bundle.state)
            if name.split(".", 1)[0] in apps and name not in success.names
            and name not in exempt]
    if not kept:
        return success.source
    extra = " and ".join(f"{name} == {_literal(state.get(name, bundle.state[name]))}"
                         for name in kept)
    # Keep the task's own conjuncts at the top level (the oracle's bound reads them
    # one by one) unless its predicate has a top-level "or".
    head = f"({success.source})" if expr_mod.has_top_level_or(success.source) else success.source
    return f"{head} and {extra}"


def _element_ids(bundle: AppBundle) -> set[str]:
    """Every element and dialog-button id of the bundle's apps."""
    ids: set[str] = set()

    def walk(elements: Any) -> None:
        for el in elements:
            if el.id:
                ids.add(el.id)
            walk(el.items)

    for app in bundle.apps:
        for scr in app.screens.values():
            walk(scr.elements + scr.toolbar)
        for dialog in app.dialogs.values():
            walk(dialog.elements + dialog.buttons)
    return ids


def load_suite(path: str | Path, apps: AppBundle | None = None) -> Suite:
    """Load a suite file. Its ``apps`` (paths relative to the file) are installed next to
    ``apps`` (default: the bundled apps)."""
    data, shown = read_data_file(path)
    data = _check_keys(shown, "", data, {"suite", "description", "apps", "tasks"}) if data else None
    if not data:
        raise SimLoadError(f"{shown}: the file is empty")
    bundle = apps or bundled_apps()
    extra = data.get("apps") or []
    if not isinstance(extra, list):
        raise _fail(shown, "apps", "expected a list of app file paths")
    if extra:
        base = Path(path).resolve().parent
        bundle = bundle.with_apps(load_app(base / str(p)) for p in extra)
    name = _text(shown, "suite", data.get("suite")) or Path(path).stem
    tasks_data = data.get("tasks")
    if not isinstance(tasks_data, list) or not tasks_data:
        raise _fail(shown, "tasks", "a suite needs a list of tasks")
    tasks = [_task(shown, f"tasks[{i}]", t, bundle, name) for i, t in enumerate(tasks_data)]
    seen: set[str] = set()
    for i, t in enumerate(tasks):
        if t.id in seen:
            raise _fail(shown, f"tasks[{i}].id", f"the id '{t.id}' is used twice")
        seen.add(t.id)
    # Build each task's world once so a bad perturbation target fails here, not mid-run.
    for i, t in enumerate(tasks):
        try:
            world_for(bundle, t.perturbations)
        except SimLoadError as exc:
            raise _fail(shown, f"tasks[{i}].perturbations", str(exc)) from None
    return Suite(name, str(Path(path).resolve()), tasks, bundle,
                 _text(shown, "description", data.get("description")))


def bundled_suite_names() -> list[str]:
    return sorted(p.stem for p in BUNDLED_SUITES_DIR.glob("*.yaml"))


def find_suite(name_or_path: str | Path, apps: AppBundle | None = None) -> Suite:
    """A bundled suite by name (``toggles``, ``complex``, ``everyday``) or any file path."""
    text = str(name_or_path)
    candidate = BUNDLED_SUITES_DIR / f"{text}.yaml"
    if "/" not in text and "\\" not in text and candidate.exists():
        return load_suite(candidate, apps)
    if Path(text).exists():
        return load_suite(text, apps)
    raise SimLoadError(f"no suite '{text}': not a file, and the bundled suites are "
                       f"{', '.join(bundled_suite_names())}")
