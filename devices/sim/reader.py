"""Reading app files: the located error (:class:`SimLoadError`), parsing YAML/JSON, and the
checks every value of an app file goes through — mappings, texts, variable names (qualified
to their app), conditions, and display templates with their conditional texts.

:class:`~devices.sim.loader._AppReader` reads an app's structure (effects, elements,
screens, dialogs) on top of these checks.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

import devices.sim.expr as expr_mod
from devices.sim.model import TEMPLATE_RE, register_conditional

BUNDLED_APPS_DIR = Path(__file__).resolve().parent / "apps"
_TEMPLATE_RE = TEMPLATE_RE
_QUOTED = r"\"[^\"]*\"|'[^']*'"
# What an unquoted branch may hold besides plain text: ``{var}`` and a conditional already
# compiled to its ``{?<key>}`` placeholder (nested conditionals compile inside out).
_BRANCH_TOKEN = r"\{[A-Za-z_][A-Za-z0-9_.]*\}|\{\?[0-9a-f]{16}\}"
_CONDITIONAL_TEXT_RE = re.compile(
    r"\{\s*(?P<cond>[^{}?]+?)\s*\?\s*(?P<then>" + _QUOTED + r"|(?:" + _BRANCH_TOKEN
    + r"|[^{}:\"'])*?)\s*:\s*"
    r"(?P<else>" + _QUOTED + r"|(?:" + _BRANCH_TOKEN + r"|[^{}\"'])*?)\s*\}")
_BRANCH_TOKEN_RE = re.compile(_BRANCH_TOKEN)


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _yaml_bool(value: bool) -> str:
    """Why a word in a file became true/false, and what to write instead."""
    words = ("yes", "on", "true") if value else ("no", "off", "false")
    return (f"{str(value).lower()} is YAML's reading of an unquoted {words[0]}, {words[1]} or "
            f"{words[2]}; put the word in quotes")


class SimLoadError(ValueError):
    """An app or suite file could not be loaded; the message names the file and the place."""


def display_path(path: str | Path) -> str:
    """How a file is named in messages: relative to the bundle, the cwd, or as given."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(BUNDLED_APPS_DIR.parent))
    except ValueError:
        pass
    try:
        return str(p.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def read_data_file(path: str | Path) -> tuple[Any, str]:
    """Parse a YAML/JSON file; returns (data, display name). Raises :class:`SimLoadError`."""
    shown = display_path(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SimLoadError(f"{shown}: cannot read the file ({exc.strerror or exc})") from None
    try:
        if str(path).endswith(".json"):
            return json.loads(text), shown
        return yaml.safe_load(text), shown
    except json.JSONDecodeError as exc:
        raise SimLoadError(f"{shown}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        place = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SimLoadError(f"{shown}{place}: not valid YAML: {problem}") from None


class _ValueChecks:
    """The located value checks of an app file's reader (a base of
    :class:`~devices.sim.loader._AppReader`, which sets ``shown``, ``app_id``, ``state`` and
    ``foreign``)."""

    def fail(self, where: str, message: str) -> SimLoadError:
        return SimLoadError(f"{self.shown}: {where}: {message}" if where else f"{self.shown}: {message}")

    # --- small checks -------------------------------------------------------------
    def mapping(self, value: Any, where: str, allowed: set[str] | None = None) -> dict[str, Any]:
        if isinstance(value, bool):
            raise self.fail(where, f"expected a mapping, but {_yaml_bool(value)}")
        if not isinstance(value, dict):
            raise self.fail(where, f"expected a mapping, got {type(value).__name__}")
        if allowed is not None:
            for key in value:
                if isinstance(key, bool):
                    raise self.fail(where, f"the key {_yaml_bool(key)}")
                if key not in allowed:
                    raise self.fail(
                        where, f"unknown key '{key}'; allowed: {', '.join(sorted(allowed))}"
                    )
        return value

    def string(self, value: Any, where: str, *, required: bool = False) -> str:
        if value is None:
            if required:
                raise self.fail(where, "is required")
            return ""
        if isinstance(value, bool):
            raise self.fail(where, f"expected text, but {_yaml_bool(value)}")
        if not isinstance(value, (str, int, float)):
            raise self.fail(where, f"expected text, got {type(value).__name__}")
        return str(value)

    def var_name(self, name: Any, where: str) -> str:
        """Qualify a variable name used in this app; record references to other apps."""
        if isinstance(name, bool):
            raise self.fail(where, f"expected a variable name, but {_yaml_bool(name)}")
        if not isinstance(name, str) or not name:
            raise self.fail(where, "expected a variable name")
        if "." in name:
            head = name.split(".", 1)[0]
            if head == self.app_id:
                if name not in self.state:
                    raise self.fail(where, f"unknown variable '{name}'")
            else:
                self.foreign.append((where, name))
            return name
        qualified = f"{self.app_id}.{name}"
        if qualified not in self.state:
            known = ", ".join(sorted(k.split(".", 1)[1] for k in self.state)) or "none"
            raise self.fail(where, f"unknown variable '{name}' (declared in state: {known})")
        return qualified

    def condition(self, source: Any, where: str) -> expr_mod.Expr:
        def resolve(name: str) -> str:
            if name in ("app", "screen", "dialog", "package"):
                return name
            return self.var_name(name, where)

        try:
            return expr_mod.parse(source, resolve)
        except expr_mod.ExprError as exc:
            raise self.fail(where, f"bad condition: {exc}") from None

    def template(self, text: str, where: str) -> str:
        """Check ``{var}`` references in display text and qualify them; compile each
        ``{cond ? Then : Else}`` (a label that depends on state) into a placeholder. A
        branch is a template too: it may show ``{var}`` and hold another conditional
        (compiled inside out, so an unquoted outer one matches once its inner ones are
        placeholders)."""
        def conditional(match: re.Match[str]) -> str:
            cond = self.condition(match.group("cond").strip(), where)
            then, otherwise = (self.branch(_unquote(match.group(g)), where)
                               for g in ("then", "else"))
            return register_conditional(cond, then, otherwise, self.app_id)

        def repl(match: re.Match[str]) -> str:
            return "{" + self.var_name(match.group(1), where) + "}"

        if "?" in text:
            while True:
                compiled = _CONDITIONAL_TEXT_RE.sub(conditional, text)
                if compiled == text:
                    break
                text = compiled
        return _TEMPLATE_RE.sub(repl, text)

    def branch(self, text: str, where: str) -> str:
        """One branch of a conditional text, compiled as a template of its own; braces
        other than ``{var}`` and conditionals are refused (they would show as typed)."""
        if "{" not in text and "}" not in text:
            return text
        compiled = self.template(text, where)
        rest = _BRANCH_TOKEN_RE.sub("", compiled)
        if "{" in rest or "}" in rest:
            raise self.fail(where, "a conditional text's branch holds plain text, {var} and "
                            f"other conditionals only; a lone brace in '{text}'")
        return compiled
