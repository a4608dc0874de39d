"""The condition language of app files and suites (``visible``, ``enabled``, ``if``, gates,
success predicates).

Grammar (keywords are lower case)::

    expr    := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | compare
    compare := atom (OP atom)?        OP: == != < <= > >= ~= contains in
    atom    := NUMBER | "string" | 'string' | true | false | null | NAME | "(" expr ")"
    NAME    := identifier ("." identifier)*

``~=`` is equality ignoring case and surrounding spaces; ``contains`` / ``in`` test a
substring ignoring case. A bare atom is true when it is truthy (``wifi`` ≡ ``wifi == true``).
Names are resolved by the caller (:func:`parse` takes a resolver) so an app file can say
``wifi`` while a suite says ``settings.wifi``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

# An evaluation environment maps a resolved name to its current value.
Env = Callable[[str], Any]
Compiled = Callable[[Env], Any]


class ExprError(ValueError):
    pass


_TOKEN_RE = re.compile(
    r"""\s*(?:
        (?P<num>-?\d+(?:\.\d+)?)
      | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<op>==|!=|<=|>=|~=|<|>|\(|\))
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
    )""",
    re.VERBOSE,
)


def top_level_words(source: str) -> list[tuple[str, int, int]] | None:
    """The keywords (``and``, ``or``, ``not`` …) outside every parenthesis of a predicate,
    with where each starts and where the text after it starts; None when the source does
    not tokenize (the parser will say why)."""
    depth, pos, out = 0, 0, []
    while pos < len(source) and source[pos:].strip():
        match = _TOKEN_RE.match(source, pos)
        if not match or match.end() == pos:
            return None
        text = match.group(0).strip()
        start = match.end() - len(text)
        pos = match.end()
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
        elif depth == 0 and match.group("name") is not None:
            out.append((text.lower(), start, pos))
    return out


def has_top_level_or(source: str) -> bool:
    """An ``or`` outside every parenthesis: ``and`` binds tighter, so appending "and …"
    to such a predicate needs parentheses around it."""
    words = top_level_words(source)
    return words is None or any(word == "or" for word, _, _ in words)
_WORD_OPS = {"contains", "in"}
_KEYWORDS = {"and", "or", "not", "true", "false", "null", "none"} | _WORD_OPS


@dataclass(frozen=True)
class Expr:
    """A parsed condition: its source, the names it reads, its string literals."""

    source: str
    names: frozenset[str]
    strings: tuple[str, ...]
    fn: Compiled

    def __call__(self, env: Env) -> bool:
        return bool(self.fn(env))

    def value(self, env: Env) -> Any:
        return self.fn(env)


def _tokenize(source: str) -> list[tuple[str, Any]]:
    tokens: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(source):
        if source[pos:].strip() == "":
            break
        match = _TOKEN_RE.match(source, pos)
        if not match or match.end() == pos:
            raise ExprError(f"cannot read '{source[pos:].strip()[:20]}' in '{source}'")
        pos = match.end()
        if match.group("num") is not None:
            text = match.group("num")
            tokens.append(("lit", float(text) if "." in text else int(text)))
        elif match.group("str") is not None:
            raw = match.group("str")[1:-1]
            tokens.append(("lit", re.sub(r"\\(.)", r"\1", raw)))
        elif match.group("op") is not None:
            tokens.append(("op", match.group("op")))
        else:
            word = match.group("name")
            low = word.lower()
            if low in ("true", "false"):
                tokens.append(("lit", low == "true"))
            elif low in ("null", "none"):
                tokens.append(("lit", None))
            elif low in ("and", "or", "not"):
                tokens.append(("kw", low))
            elif low in _WORD_OPS:
                tokens.append(("op", low))
            else:
                tokens.append(("name", word))
    return tokens


def _compare(op: str, left: Any, right: Any) -> bool:
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    if op == "~=":
        return str(left).strip().lower() == str(right).strip().lower() if left is not None and right is not None else left == right
    if op == "contains":
        return left is not None and right is not None and str(right).lower() in str(left).lower()
    if op == "in":
        return left is not None and right is not None and str(left).lower() in str(right).lower()
    try:
        if op == "<":
            return left < right
        if op == "<=":
            return left <= right
        if op == ">":
            return left > right
        if op == ">=":
            return left >= right
    except TypeError:
        return False
    raise ExprError(f"unknown operator {op}")


def parse(source: Any, resolve: Callable[[str], str] | None = None) -> Expr:
    """Parse ``source``; ``resolve`` maps each NAME to its canonical name or raises
    :class:`ExprError` (unknown variable). Booleans are accepted as constant conditions."""
    if isinstance(source, bool):
        value = source
        return Expr(str(source).lower(), frozenset(), (), lambda env: value)
    if not isinstance(source, str) or not source.strip():
        raise ExprError("a condition must be a non-empty string")
    tokens = _tokenize(source)
    names: set[str] = set()
    strings: list[str] = []
    pos = 0

    def peek() -> tuple[str, Any] | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> tuple[str, Any]:
        nonlocal pos
        if pos >= len(tokens):
            raise ExprError(f"'{source}' ends too early")
        pos += 1
        return tokens[pos - 1]

    def parse_or() -> Compiled:
        parts = [parse_and()]
        while peek() == ("kw", "or"):
            take()
            parts.append(parse_and())
        if len(parts) == 1:
            return parts[0]
        return lambda env: any(p(env) for p in parts)

    def parse_and() -> Compiled:
        parts = [parse_not()]
        while peek() == ("kw", "and"):
            take()
            parts.append(parse_not())
        if len(parts) == 1:
            return parts[0]
        return lambda env: all(p(env) for p in parts)

    def parse_not() -> Compiled:
        if peek() == ("kw", "not"):
            take()
            inner = parse_not()
            return lambda env: not inner(env)
        return parse_compare()

    def parse_compare() -> Compiled:
        left = parse_atom()
        token = peek()
        if token and token[0] == "op" and token[1] not in ("(", ")"):
            op = take()[1]
            right = parse_atom()
            return lambda env: _compare(op, left(env), right(env))
        return left

    def parse_atom() -> Compiled:
        kind, value = take()
        if kind == "lit":
            if isinstance(value, str):
                strings.append(value)
            return lambda env: value
        if kind == "name":
            name = resolve(value) if resolve else value
            names.add(name)
            return lambda env: env(name)
        if (kind, value) == ("op", "("):
            inner = parse_or()
            if take() != ("op", ")"):
                raise ExprError(f"missing ')' in '{source}'")
            return inner
        raise ExprError(f"unexpected '{value}' in '{source}'")

    fn = parse_or()
    if pos != len(tokens):
        raise ExprError(f"unexpected '{tokens[pos][1]}' in '{source}'")
    return Expr(source.strip(), frozenset(names), tuple(strings), fn)
