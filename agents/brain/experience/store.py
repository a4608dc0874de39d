"""Experience memory's entries and stores: one remembered step (:class:`Entry`), a verified
episode (:class:`Episode`), the :class:`Store` protocol and the in-memory
:class:`MemoryStore` (the database store is ``agents/runtime/experience_store.py``).

Split out of :mod:`agents.brain.experience.memory`, which re-exports every name here.
Pure Python (no Django).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

from agents.brain.experience.screen import Signature
from agents.brain.experience.templates import ActionTemplate

CONFIRM = 1
CONTRADICT = -1
# Sources of an entry: what production recorded (LEARNING lesson 3: never the agent's own
# "finished").
SOURCES = ("approve", "edit", "takeover", "verdict", "spot_check", "import")


# --- entries and stores --------------------------------------------------------------


@dataclass
class Entry:
    """One remembered step (one row of the store)."""

    app: str
    signature: str  # Signature.key
    tokens: tuple[str, ...]
    fields: tuple[tuple[str, bool], ...]
    instruction: str
    action: ActionTemplate
    pre: dict[str, Any]
    polarity: int = CONFIRM
    source: str = "approve"
    task: str = ""
    created: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return {"app": self.app, "signature": self.signature, "tokens": list(self.tokens),
                "fields": [list(f) for f in self.fields], "instruction": self.instruction,
                "action": self.action.to_json(), "pre": self.pre, "polarity": self.polarity,
                "source": self.source, "task": self.task, "created": self.created}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Entry":
        if not isinstance(data, dict):
            raise ValueError("an entry must be an object")
        try:
            polarity = int(data.get("polarity", CONFIRM))
            if polarity not in (CONFIRM, CONTRADICT):
                raise ValueError("polarity must be 1 or -1")
            source = str(data.get("source", "import"))
            if source not in SOURCES:
                raise ValueError(f"unknown source {source!r}")
            return cls(
                app=str(data["app"]), signature=str(data["signature"]),
                tokens=tuple(str(t) for t in data.get("tokens", [])),
                fields=tuple((str(f[0]), bool(f[1])) for f in data.get("fields", [])),
                instruction=str(data["instruction"]),
                action=ActionTemplate.from_json(data["action"]),
                pre=dict(data.get("pre") or {}), polarity=polarity, source=source,
                task=str(data.get("task", "")), created=float(data.get("created", time.time())))
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            raise ValueError(f"malformed entry: {exc!r}") from None

    @property
    def screen(self) -> Signature:
        return Signature(frozenset(self.tokens), self.fields, self.signature)


@dataclass(frozen=True)
class Episode:
    """An earlier task a person verified, for a planner's prompt (D-PoT §5.5)."""

    app: str
    goal: str
    start: str  # the start screen, summarised
    actions: tuple[str, ...]  # the verified actions, in words

    def to_json(self) -> dict[str, Any]:
        return {"app": self.app, "goal": self.goal, "start": self.start,
                "actions": list(self.actions)}


class Store(Protocol):
    """Where entries live: :class:`MemoryStore` here, the database in production."""

    def add(self, entry: Entry) -> None: ...
    def candidates(self, app: str, signature: str) -> list[Entry]: ...
    def signatures(self, app: str) -> list[Signature]: ...
    def outcomes(self, kind: str) -> tuple[int, int]: ...
    def add_outcome(self, kind: str, right: bool) -> None: ...
    def add_episode(self, episode: Episode) -> None: ...
    def episodes(self, app: str | None = None) -> list[Episode]: ...


class MemoryStore:
    """Entries in a dict keyed by (app, signature): one installation's memory for
    ``evaluate --learn`` and the tests; ``export``/``load`` give the JSON format the
    admin pages use."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], list[Entry]] = {}
        self._signatures: dict[str, dict[str, Signature]] = {}
        self._outcomes: dict[str, list[int]] = {}
        self._episodes: list[Episode] = []

    def add(self, entry: Entry) -> None:
        self._entries.setdefault((entry.app, entry.signature), []).append(entry)
        self._signatures.setdefault(entry.app, {})[entry.signature] = entry.screen

    def candidates(self, app: str, signature: str) -> list[Entry]:
        return list(self._entries.get((app, signature), ()))

    def signatures(self, app: str) -> list[Signature]:
        return list(self._signatures.get(app, {}).values())

    def outcomes(self, kind: str) -> tuple[int, int]:
        right, wrong = self._outcomes.get(kind, [0, 0])
        return right, wrong

    def add_outcome(self, kind: str, right: bool) -> None:
        counts = self._outcomes.setdefault(kind, [0, 0])
        counts[0 if right else 1] += 1

    def add_episode(self, episode: Episode) -> None:
        self._episodes.append(episode)

    def episodes(self, app: str | None = None) -> list[Episode]:
        return [e for e in self._episodes if app is None or e.app == app]

    def entries(self) -> Iterable[Entry]:
        for bucket in self._entries.values():
            yield from bucket

    def forget(self, app: str) -> int:
        gone = [key for key in self._entries if key[0] == app]
        count = sum(len(self._entries.pop(key)) for key in gone)
        self._signatures.pop(app, None)
        self._episodes = [e for e in self._episodes if e.app != app]
        return count
