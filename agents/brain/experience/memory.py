"""Experience memory: what an installation learned from its people, and matching it.

Pure Python (no Django; the database store is ``agents/runtime/experience_store.py``). An entry is
one step a person decided or confirmed: the app (package), the screen's signature
(:mod:`agents.brain.experience.screen`), the instruction, and the action bound to its element
by locators — resource-id, label, class, place among its siblings (LEARNING lesson 1;
AppAgent's element docs key on resource-id + parent + index, and orphan on a new layout,
so here each locator is kept apart and tried in turn) — never raw coordinates. Typed text
and tapped labels that came from the instruction are slots (:mod:`agents.brain.experience.slots`).
Each entry has a polarity: +1 a person confirmed this action on this screen for this
instruction, −1 a person corrected it (lesson 7: a correction demotes, the history stays).

:func:`lookup` finds the entries of the current app on the same kind of screen whose
precondition holds (the state of the switch the instruction names, the fields' state),
weighs them by how alike the instructions are, groups them by decision and re-binds the
best one to the new instruction, with its evidence. Whether that is good enough to act
alone is the calibrator's call (:mod:`agents.brain.calibration.experience`).

The parts live next to it and are re-exported here: :mod:`.templates` (elements as
locators, actions as templates, preconditions), :mod:`.step_keys` (the step before as a
key) and :mod:`.store` (entries, episodes, the stores); this module does the matching
(:func:`lookup`) and the learning (:func:`remember`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from agents.brain.experience.screen import Signature, aligned, screen_signature
from agents.brain.experience.slots import intent_similarity, shape
from agents.brain.experience.step_keys import (
    GROUP_MARK, NAMED_MARK, _renamed_key, pick_group, prev_matches, step_key, with_screen,
)
from agents.brain.experience.store import (
    CONFIRM, CONTRADICT, SOURCES, Entry, Episode, MemoryStore, Store,
)
from agents.brain.experience.templates import (
    ActionTemplate, Locator, _names_another, bind, element_label, locate, named_state,
    precondition, resolve, target_of, template_of,
)
from devices.actions import POINT_TYPES, Action
from devices.uitree import UINode

# A screen this alike (Jaccard of the structure) counts as the same kind when the exact
# signature was never seen (lesson 6: a similarity, checked per representation).
NEAR_SCREEN = 0.8
# An earlier instruction counts when it is at least this relevant (0.7 × intent-word
# similarity + 0.3 × the same numbers and names).
MIN_RELEVANCE = 0.35
# How many of the best-scored decisions are bound to the screen at each lookup.
BIND_TOP = 3
# A "strong" memory carries at least this share of the weight of every decision that fits.
STRONG_SHARE = 0.7


# --- matching ------------------------------------------------------------------------


@dataclass
class Match:
    """One remembered decision that fits the current step, with its evidence."""

    template: ActionTemplate
    action: Action | None  # re-bound to this screen and instruction; None: could not bind
    confirmed: int
    contradicted: int
    screen_similarity: float
    intent_similarity: float
    score: float
    share: float  # of the positive weight of every fitting decision
    examples: list[str] = field(default_factory=list)  # instructions it was learned from

    @property
    def kind(self) -> str:
        """The kind of memory whose outcomes are pooled (LEARNING lesson 5). "agreed": on
        exactly this kind of screen, never corrected, clearly the decision that fits best
        (``STRONG_SHARE``), re-bound, for an instruction that shares words with one it was
        learned from. Anything else is "disputed": people disagreed, or it barely fits."""
        agreed = (self.action is not None and self.confirmed >= 1 and self.contradicted == 0
                  and self.screen_similarity >= 1.0 and self.share >= STRONG_SHARE
                  and self.intent_similarity >= 0.25)
        return "agreed" if agreed else "disputed"

    def evidence(self) -> dict[str, Any]:
        return {
            "memory_screen": round(self.screen_similarity, 4),
            "memory_intent": round(self.intent_similarity, 4),
            "memory_confirmed": self.confirmed,
            "memory_contradicted": self.contradicted,
            "memory_share": round(self.share, 4),
            "memory_slots": self.template.slots,
            "memory_bound": self.action is not None,
            "memory_kind": self.kind,
        }


@dataclass
class Lookup:
    app: str
    signature: Signature
    matches: list[Match]

    @property
    def best(self) -> Match | None:
        return self.matches[0] if self.matches else None

    def for_action(self, action: Action | None, nodes: list[UINode], instruction: str
                   ) -> Match | None:
        """The remembered decision that ``action`` (another backend's proposal) is."""
        if action is None:
            return None
        template = template_of(action, nodes, instruction)
        if template is None:
            return None
        key = template.key()
        for match in self.matches:
            if match.template.key() == key:
                return match
            if match.action is not None and match.action.same_as(action):
                return match
        return None


def lookup(store: Store, app: str, nodes: list[UINode], instruction: str,
           prev: str | None = None, done: Iterable[Action] = ()) -> Lookup:
    """Every remembered decision that fits this step, best first (see the module doc).

    ``prev``: :func:`step_key` of the step before (None: not checked); ``done``: actions
    already performed in this episode — a remembered tap is not proposed twice."""
    done = list(done)
    signature = screen_signature(nodes)
    screen_sim = 1.0
    # (entry, how its ids are renamed to this screen's): this kind of screen, and the same
    # kind of screen shown for another entity (ids differing in one segment throughout)
    entries: list[tuple[Entry, dict[str, str]]] = [
        (e, {}) for e in store.candidates(app, signature.key)]
    best_sig, best_sim, best_rename = None, 0.0, {}
    for other in store.signatures(app):
        if other.key == signature.key:
            continue
        sim, rename = aligned(signature, other)
        if rename and sim >= 1.0:
            entries.extend((e, dict(rename)) for e in store.candidates(app, other.key))
        elif sim > best_sim:
            best_sig, best_sim, best_rename = other, sim, dict(rename)
    if not entries:
        if best_sig is None or best_sim < NEAR_SCREEN:
            return Lookup(app, signature, [])
        entries = [(e, best_rename) for e in store.candidates(app, best_sig.key)]
        screen_sim = best_sim
    current_named = named_state(nodes, instruction)
    if prev is not None:
        prev = with_screen(prev, nodes, instruction)
    my_shape = shape(instruction)
    groups: dict[str, dict[str, Any]] = {}
    for entry, rename in entries:
        if entry.pre.get("named") != current_named:
            continue
        if prev is not None and not prev_matches(
                _renamed_key(str(entry.pre.get("prev", "")), rename), prev):
            continue
        intent = intent_similarity(entry.instruction, instruction)
        if intent == 0.0 and _opposite(entry.instruction, instruction):
            continue
        relevance = 0.7 * intent + 0.3 * (1.0 if shape(entry.instruction) == my_shape else 0.0)
        if relevance < MIN_RELEVANCE:
            continue
        template = entry.action.renamed(rename)
        key = template.key()
        group = groups.setdefault(key, {"template": template, "plus": 0.0, "minus": 0.0,
                                        "confirmed": set(), "contradicted": set(),
                                        "intent": 0.0, "examples": [], "entries": []})
        ref = entry.task or f"{entry.instruction}@{entry.created}"
        if entry.polarity == CONFIRM:
            group["plus"] += relevance
            group["confirmed"].add(ref)
            group["intent"] = max(group["intent"], intent)
            if entry.instruction not in group["examples"]:
                group["examples"].append(entry.instruction)
            group["entries"].append(entry)
        else:
            group["minus"] += relevance
            group["contradicted"].add(ref)
    total = sum(max(0.0, g["plus"] - g["minus"]) for g in groups.values())
    matches: list[Match] = []
    ranked = sorted(groups.values(), key=lambda g: (g["plus"] - g["minus"], len(g["confirmed"])),
                    reverse=True)
    for rank, group in enumerate(ranked):
        template: ActionTemplate = group["template"]
        # Only the leading decisions are bound to this screen (binding reads the whole
        # tree); the others are listed with what people did, unbound.
        action = bind(template, nodes, instruction) if rank < BIND_TOP else None
        if action is not None and template.locator is not None:
            # the switch the person tapped was off (on): it must be off (on) again
            node = resolve(template.locator, nodes, instruction)
            wanted = next((e.pre.get("target_checked") for e in group["entries"]
                           if "target_checked" in e.pre), None)
            if node is not None and wanted is not None and node.checked != wanted:
                action = None
            if node is not None and not template.locator.named and _names_another(
                    node, nodes, instruction):
                # a remembered choice among options ("EU 42", "Cycling") is not replayed
                # where this instruction names another of them
                action = None
        if action is not None and action.type in POINT_TYPES and any(
                action.same_as(earlier) for earlier in done):
            continue  # tapped already in this episode: a replay would undo or repeat it
        score = group["plus"] - group["minus"]
        matches.append(Match(
            template=template, action=action, confirmed=len(group["confirmed"]),
            contradicted=len(group["contradicted"]), screen_similarity=screen_sim,
            intent_similarity=group["intent"], score=score,
            share=(max(0.0, score) / total) if total > 0 else 0.0,
            examples=group["examples"][:3]))
    matches.sort(key=lambda m: (m.score, m.confirmed), reverse=True)
    return Lookup(app, signature, matches)


def _opposite(a: str, b: str) -> bool:
    from agents.brain.experience.slots import direction

    da, db = direction(a), direction(b)
    return da is not None and db is not None and da != db


# --- learning ------------------------------------------------------------------------


def remember(store: Store, *, app: str, nodes: list[UINode], instruction: str,
             action: Action, polarity: int, source: str, task: str = "",
             prev: str = "") -> Entry | None:
    """Store one step a person decided (``polarity`` +1) or corrected (−1); ``prev``:
    :func:`step_key` of the step before it in its episode."""
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}")
    template = template_of(action, nodes, instruction)
    if template is None:
        return None
    signature = screen_signature(nodes)
    entry = Entry(app=app, signature=signature.key, tokens=tuple(sorted(signature.tokens)),
                  fields=signature.fields, instruction=instruction, action=template,
                  pre={**precondition(template, nodes, instruction),
                       "prev": with_screen(prev, nodes, instruction)},
                  polarity=polarity,
                  source=source, task=task)
    store.add(entry)
    return entry


def screen_summary(nodes: list[UINode], limit: int = 8) -> str:
    """A start screen in a few words: its title and controls (for a planner's prompt)."""
    seen: list[str] = []
    for node in nodes:
        if node.package == "com.android.systemui":
            continue
        label = node.text or node.content_desc
        if not label or not (node.clickable or "title" in node.resource_id):
            continue
        if label not in seen:
            seen.append(label)
        if len(seen) >= limit:
            break
    return ", ".join(seen)


def similar_episodes(store: Store, instruction: str, app: str | None, k: int = 3
                     ) -> list[Episode]:
    """The ``k`` verified episodes whose goals are most like ``instruction`` (D-PoT
    §5.5: the planner sees earlier goals *and their executed actions*)."""
    scored = [(intent_similarity(e.goal, instruction), i, e)
              for i, e in enumerate(store.episodes(app))]
    scored = [s for s in scored if s[0] > 0]
    scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
    return [e for _, _, e in scored[:k]]


__all__ = [
    "ActionTemplate", "CONFIRM", "CONTRADICT", "Entry", "Episode", "Locator", "Lookup",
    "Match", "MemoryStore", "SOURCES", "Store", "bind", "locate", "lookup", "named_state",
    "pick_group", "remember", "resolve", "screen_summary", "similar_episodes", "step_key",
    "template_of",
    # re-exported from .templates, .step_keys and .screen (callers import them from here)
    "GROUP_MARK", "NAMED_MARK", "Signature", "element_label", "precondition", "prev_matches",
    "target_of", "with_screen",
]
