"""Component Recommendation: shrink a screen's UI-element list to what the goal needs.

Pure Python (no Django). RecAgent §3.3 treats the current sub-goal as a query and the UI
elements as candidate items, recalls candidates through several independent pathways and
takes their union (Eq. 2):

* **keyword** — token overlap between the goal and a node's text, content-desc and
  resource-id tail (after synonym folding: "Wi-Fi"/"wifi"/"WLAN", "turn on"/"enable"), plus
  the generic commit controls a step often needs without naming them ("OK", "Next",
  "Send", a focused text field);
* **semantic** — fuzzy similarity (difflib ratio and character tri-gram overlap) between
  the node's label and the goal's word windows, for near-misses the keyword pathway
  cannot see ("Bluetooth" vs "blue tooth", "alarms" vs "alarm clock");
* **llm** — optional: a callable ``(nodes, goal) -> [node key]`` (RecAgent's intent
  pathway), used as is.

The union is ranked by a combined score and cut to the top ``k``. Keys in ``excluded``
— elements that failed earlier in the episode — are removed first (RecAgent §3.5
retrospection: a failed element is never offered again).

Words are compared as :mod:`agents.brain.text` folds them; what an element is called and
whether a tap lands on it come from :mod:`agents.brain.elements`.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Iterable

from agents.brain.elements import (
    id_tail, is_candidate, is_editable, is_tappable, node_label, owner_of,
)
from agents.brain.text import tokens
from devices.actions import to_normalised
from devices.uitree import UINode

__all__ = [
    "Recommendation",
    "recommend",
    "format_elements",
    "score_nodes",
    "NodeScore",
    "COMMIT_WORDS",
]


# Controls that commit a step; a goal rarely names them but a step often needs them.
COMMIT_WORDS: frozenset[str] = frozenset(
    """ok send save next continue submit apply search go done confirm add order buy
    checkout pay place start allow retry close cancel yes accept""".split()
)


# --- scoring -----------------------------------------------------------------------


@dataclass
class NodeScore:
    node: UINode
    keyword: float = 0.0
    semantic: float = 0.0
    commit: bool = False

    @property
    def total(self) -> float:
        return max(self.keyword, 0.9 * self.semantic)


def _keyword_score(node_tokens: list[str], goal_tokens: set[str], weights: dict[str, float]) -> float:
    """How much of the node's label the goal names, scaled by how much of the goal it covers.

    A node fully named by the goal scores high ("Wi-Fi" for "turn on Wi-Fi"); a longer
    label that only shares one word ("Wi-Fi preferences") scores about half — that gap
    is the margin the heuristic backend's confidence reads.
    """
    if not node_tokens or not goal_tokens:
        return 0.0
    unique = list(dict.fromkeys(node_tokens))
    matched = [t for t in unique if t in goal_tokens]
    if not matched:
        return 0.0
    node_weight = sum(weights.get(t, 1.0) for t in unique)
    matched_weight = sum(weights.get(t, 1.0) for t in matched)
    goal_weight = sum(weights.get(t, 1.0) for t in goal_tokens)
    node_cover = matched_weight / node_weight
    goal_cover = matched_weight / goal_weight
    return node_cover * (0.6 + 0.4 * min(1.0, goal_cover * 2))


def _trigrams(text: str) -> set[str]:
    text = f" {text} "
    return {text[i: i + 3] for i in range(len(text) - 2)}


def _semantic_score(label: str, goal: str, goal_words: list[str]) -> float:
    """Best fuzzy similarity between the label and any goal window of the same length."""
    label_norm = " ".join(tokens(label, keep_stopwords=True))
    if not label_norm or not goal_words:
        return 0.0
    width = max(1, len(label_norm.split()))
    best = 0.0
    label_grams = _trigrams(label_norm)
    for size in {width, width + 1, max(1, width - 1)}:
        for start in range(0, max(1, len(goal_words) - size + 1)):
            window = " ".join(goal_words[start: start + size])
            if not window:
                continue
            ratio = difflib.SequenceMatcher(None, label_norm, window).ratio()
            grams = _trigrams(window)
            jaccard = len(label_grams & grams) / max(1, len(label_grams | grams))
            best = max(best, 0.5 * ratio + 0.5 * jaccard, jaccard)
    return best


def _token_weights(goal_tokens: Iterable[str], nodes: list[UINode]) -> dict[str, float]:
    """Inverse screen frequency: a word on every row ("Settings") says little."""
    counts: dict[str, int] = {}
    for node in nodes:
        for tok in set(tokens(node.text + " " + node.content_desc)):
            counts[tok] = counts.get(tok, 0) + 1
    weights: dict[str, float] = {}
    for tok in set(goal_tokens):
        weights[tok] = 1.0 / (1.0 + 0.5 * max(0, counts.get(tok, 0) - 1))
    return weights


def score_nodes(nodes: list[UINode], goal: str) -> list[NodeScore]:
    """Keyword and semantic scores (0–1) for every candidate node, in document order."""
    goal_tokens = set(tokens(goal))
    goal_words = tokens(goal, keep_stopwords=True)
    weights = _token_weights(goal_tokens, nodes)
    out: list[NodeScore] = []
    for node in nodes:
        if not is_candidate(node):
            continue
        label = node_label(node, nodes)
        node_toks = tokens(label)
        score = NodeScore(node)
        score.keyword = _keyword_score(node_toks, goal_tokens, weights)
        score.semantic = _semantic_score(node.label if node.label else label, goal, goal_words)
        own = set(tokens(node.text + " " + node.content_desc + " " + id_tail(node), keep_stopwords=True))
        score.commit = _is_essential(node, own)
        out.append(score)
    return out


def _is_essential(node: UINode, own_words: set[str]) -> bool:
    """Elements a step often needs although the goal does not name them (RecAgent's
    keyword pathway lists "search", "submit", "open"): text fields, plain buttons
    (Send, Sign in, View cart), choice options, the toolbar's up arrow, launcher icons.
    Each is one short line, and leaving one out can leave a model no right answer."""
    if not node.enabled:
        return False
    if is_editable(node):
        return True
    if not (node.clickable or node.checkable):
        return False
    return (
        bool(own_words & COMMIT_WORDS)
        or node.short_class in ("Button", "RadioButton")
        or (node.content_desc or "").strip().lower() == "navigate up"
        or "launcher" in node.package
    )


@dataclass
class Recommendation:
    """The recommended elements, best first, and why each was recalled."""

    nodes: list[UINode]
    scores: dict[str, float] = field(default_factory=dict)
    by_pathway: dict[str, list[str]] = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        return [node.key for node in self.nodes]

    @property
    def elements(self) -> list[UINode]:
        """The ranked elements only (at most ``k``), without the texts folded into them."""
        return [node for node in self.nodes if node.key in self.scores]


SEMANTIC_THRESHOLD = 0.62


def recommend(
    nodes: list[UINode],
    goal: str,
    *,
    k: int = 10,
    excluded: Collection[str] = (),
    llm_pathway: Callable[[list[UINode], str], list[str]] | None = None,
) -> Recommendation:
    """Recall the elements relevant to ``goal`` through every pathway; union; top ``k``.

    ``excluded`` keys are removed before recall. A clickable container and the passive
    texts it owns (a settings row, its title and summary) are one element: it is ranked
    once, by its best-matching part, and its texts follow it in ``nodes`` without
    counting towards ``k`` (:func:`format_elements` folds them into the container's
    line). If no pathway recalls anything, the ``k`` most actionable elements are
    returned so a caller always has something to show. The LLM pathway's failures are
    swallowed: it is one pathway among several.
    """
    excluded_set = set(excluded)
    pool = [n for n in nodes if n.key not in excluded_set]
    scored = score_nodes(pool, goal)
    owners: dict[int, int] = {}
    for s in scored:
        owner = owner_of(s.node, pool)
        if owner is not None and owner.key not in excluded_set:
            owners[s.node.index] = owner.index
    by_index = {s.node.index: s for s in scored}

    def unit(index: int) -> int:
        return owners.get(index, index)

    keyword = [s.node.index for s in scored if s.keyword > 0.0]
    semantic = [s.node.index for s in scored if s.semantic >= SEMANTIC_THRESHOLD]
    commit = [s.node.index for s in scored if s.commit]
    recalled: dict[str, list[int]] = {
        "keyword": _dedupe([unit(i) for i in keyword + commit]),
        "semantic": _dedupe([unit(i) for i in semantic]),
    }
    llm_units: list[int] = []
    if llm_pathway is not None:
        try:
            llm_keys = {str(key) for key in (llm_pathway(pool, goal) or [])}
        except Exception:  # one pathway failing must not lose the others (Eq. 2 union)
            llm_keys = set()
        llm_units = _dedupe([unit(s.node.index) for s in scored if s.node.key in llm_keys])
        recalled["llm"] = llm_units

    unit_score: dict[int, float] = {}
    for s in scored:
        u = unit(s.node.index)
        value = s.total
        if s.commit:
            value = max(value, 0.3)
        unit_score[u] = max(unit_score.get(u, 0.0), value)
    for u in llm_units:
        unit_score[u] = max(unit_score.get(u, 0.0), 0.75)

    union: set[int] = set().union(*recalled.values())
    union = {u for u in union if u in by_index}
    if not union:
        # Nothing named: keep the most actionable elements rather than an empty prompt.
        units = _dedupe([unit(s.node.index) for s in scored])
        units = [u for u in units if u in by_index]
        fallback = sorted(units, key=lambda u: (not _actionable(by_index[u].node), u))[:k]
        union = set(fallback)
        for u in fallback:
            unit_score[u] = 0.0
        recalled["fallback"] = fallback

    # Ties go to what a tap can act on: a row before a screen title.
    order = sorted(
        union,
        key=lambda u: (-unit_score[u], not is_tappable(by_index[u].node, pool), u),
    )[: max(0, k)]
    chosen: list[UINode] = []
    scores: dict[str, float] = {}
    for u in order:
        chosen.append(by_index[u].node)
        chosen.extend(by_index[i].node for i in sorted(owners) if owners[i] == u)
        key = by_index[u].node.key
        scores[key] = max(scores.get(key, 0.0), round(unit_score[u], 4))
    by_pathway = {
        name: _dedupe([by_index[u].node.key for u in units if u in by_index])
        for name, units in recalled.items()
    }
    return Recommendation(nodes=chosen, scores=scores, by_pathway=by_pathway)


def _actionable(node: UINode) -> bool:
    return node.clickable or node.checkable or is_editable(node)


def _dedupe(items: list[Any]) -> list[Any]:
    return list(dict.fromkeys(items))


# --- prompt form -------------------------------------------------------------------


def format_elements(nodes: list[UINode], width: int, height: int) -> str:
    """One line per element for a prompt: id, class, label, state and OS-Atlas centre.

    ``#12 Switch "Wi-Fi" ON @(884,117)`` — the id is the node's index in the observation,
    so a model's answer maps back to the node; coordinates are 0–1000 (OS-Atlas). Passive
    texts whose clickable container is also listed are folded into the container's line
    (``#3 LinearLayout "Network & internet · Wi-Fi On" @(500,157)``): they are one
    element to tap, and one line costs fewer tokens.
    """
    listed = {n.index: n for n in nodes}
    folded: dict[int, list[str]] = {}
    skip: set[int] = set()
    for node in nodes:
        if node.parent is None or not (node.text or node.content_desc):
            continue
        owner = owner_of(node, nodes)
        if owner is not None and owner.index in listed and owner.index != node.index:
            folded.setdefault(owner.index, []).append(node.text or node.content_desc)
            skip.add(node.index)
    lines: list[str] = []
    for node in nodes:
        if node.index in skip:
            continue
        own = (node.text or node.content_desc).strip()
        parts_text = ([own] if own else []) + folded.get(node.index, [])
        label = " · ".join(" ".join(p.split()) for p in parts_text if p.strip())
        if not label:
            label = id_tail(node).replace("_", " ")
        if len(label) > 60:
            label = label[:57] + "..."
        x, y = node.center
        nx, ny = to_normalised(x, max(1, width)), to_normalised(y, max(1, height))
        parts = [f"#{node.index}", node.short_class]
        if label:
            parts.append(f'"{label}"')
        if node.checkable:
            parts.append("ON" if node.checked else "OFF")
        if is_editable(node) and node.focused:
            parts.append("focused")
        if not node.enabled:
            parts.append("disabled")
        if node.scrollable:
            parts.append("scrollable")
        parts.append(f"@({nx},{ny})")
        lines.append(" ".join(parts))
    return "\n".join(lines)
