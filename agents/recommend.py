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
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Iterable

from devices.actions import to_normalised
from devices.uitree import UINode, node_at

__all__ = [
    "Recommendation",
    "recommend",
    "format_elements",
    "score_nodes",
    "NodeScore",
    "tokens",
    "normalise_text",
    "is_candidate",
    "is_editable",
    "is_tappable",
    "node_label",
    "row_label",
    "COMMIT_WORDS",
]

# --- text normalisation ------------------------------------------------------------

# Multi-word variants folded into one canonical token before tokenising, so the keyword
# pathway sees "wifi" whether the screen says "Wi-Fi", "WLAN" or "wireless network".
_PHRASES: tuple[tuple[str, str], ...] = (
    (r"\bwi[\s\-_]?fi\b", "wifi"),
    (r"\bwlan\b", "wifi"),
    (r"\bwireless (?:network|lan)\b", "wifi"),
    (r"\bblue[\s\-]tooth\b", "bluetooth"),
    (r"\b(?:turn|switch|toggle|flip) on\b", "enable"),
    (r"\b(?:turn|switch|toggle|flip) (?=\S+(?: \S+)? on\b)", "enable "),
    (r"\b(?:turn|switch|toggle|flip) off\b", "disable"),
    (r"\bactivate\b", "enable"),
    (r"\bdeactivate\b", "disable"),
    (r"\bdo not disturb\b", "dnd"),
    (r"\bdon'?t disturb\b", "dnd"),
    (r"\bairplane mode\b|\baeroplane mode\b|\bflight mode\b", "airplane"),
    (r"\bno sugar\b|\bwithout sugar\b|\bsugar[\s\-]free\b|\bunsweetened\b|\bnot sweet\b", "none"),
    (r"\b(?:less|low|little|half|lightly) (?:sugar|sweet(?:ened)?)\b", "less"),
    (r"\b(?:regular|normal|standard|full) (?:sugar|sweet(?:ness)?)\b", "regular"),
    (r"\blook (?:up|for)\b", "search"),
    (r"\bsign in\b|\blog in\b|\blogin\b", "signin"),
    (r"\bsign out\b|\blog out\b|\blogout\b", "signout"),
    (r"\bshopping cart\b|\bbasket\b", "cart"),
    (r"\bcheck[\s\-]out\b", "checkout"),
    (r"\btext message\b|\bsms\b", "message"),
)
_PHRASE_RES = tuple((re.compile(p, re.IGNORECASE), r) for p, r in _PHRASES)

# Single-token synonyms → canonical token.
_TOKEN_SYNONYMS: dict[str, str] = {
    "wlan": "wifi",
    "bt": "bluetooth",
    "on": "on",
    "activated": "enable",
    "enabled": "enable",
    "disabled": "disable",
    "find": "search",
    "lookup": "search",
    "unsweet": "none",
    "nosugar": "none",
    "normal": "regular",
    "standard": "regular",
    "medium": "medium",
    "remove": "delete",
    "erase": "delete",
    "trash": "delete",
    "msg": "message",
    "messages": "message",
    "sms": "message",
    "texts": "message",
    "alarms": "alarm",
    "purchase": "buy",
    "pay": "checkout",
    "basket": "cart",
    "bag": "cart",
    "compose": "new",
    "create": "new",
    "add": "add",
    "plus": "add",
    "navigate": "directions",
    "directions": "directions",
    "route": "directions",
    "dismiss": "close",
    "confirm": "ok",
    "okay": "ok",
    "done": "ok",
    "settings": "setting",
    "preferences": "setting",
    "options": "setting",
    "mobile": "phone",
    "cellular": "phone",
}

# Function words and the generic verbs of instructions: they say how, not which element.
STOPWORDS: frozenset[str] = frozenset(
    """a an the to of for in on at by with and or then it its this that is are be my me
    i you your please can could would should will from into onto up down as so all any
    some now also just off app application apps screen page button tap click press open
    go set make use using want need like let get turn switch toggle enable disable
    there here which what when where how do does current currently option""".split()
)

# Controls that commit a step; a goal rarely names them but a step often needs them.
COMMIT_WORDS: frozenset[str] = frozenset(
    """ok send save next continue submit apply search go done confirm add order buy
    checkout pay place start allow retry close cancel yes accept""".split()
)

_WORD_RE = re.compile(r"[a-z0-9]+")
_CAMEL_RE = re.compile(r"(?<=[a-z])(?=[A-Z])")


def normalise_text(text: str) -> str:
    """Lower-case ``text`` and fold multi-word synonyms into canonical tokens."""
    text = _CAMEL_RE.sub(" ", text or "")
    text = text.replace("_", " ").lower()
    for pattern, replacement in _PHRASE_RES:
        text = pattern.sub(replacement, text)
    return text


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokens(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """Canonical, stemmed tokens of ``text``; stopwords dropped unless asked to keep."""
    out: list[str] = []
    for raw in _WORD_RE.findall(normalise_text(text)):
        word = _TOKEN_SYNONYMS.get(raw, raw)
        word = _TOKEN_SYNONYMS.get(_stem(word), _stem(word))
        if not keep_stopwords and word in STOPWORDS:
            continue
        out.append(word)
    return out


# --- which nodes can be candidates -------------------------------------------------

_EDIT_CLASSES = ("EditText", "AutoCompleteTextView", "SearchView")


def is_editable(node: UINode) -> bool:
    return any(name in node.cls for name in _EDIT_CLASSES) or bool(node.extra.get("editable"))


def is_candidate(node: UINode) -> bool:
    """Actionable or informative: clickable, checkable, editable, scrollable, or has text."""
    if not node.enabled and not node.text:
        return False
    if node.area <= 0:
        return False
    return (
        node.clickable or node.long_clickable or node.checkable or node.scrollable
        or is_editable(node) or bool(node.text.strip()) or bool(node.content_desc.strip())
    )


def is_tappable(node: UINode, nodes: list[UINode]) -> bool:
    """A tap at the node's centre lands on something enabled and clickable."""
    if node.clickable or node.checkable or is_editable(node):
        return node.enabled
    x, y = node.center
    hit = node_at(nodes, x, y, clickable_only=True)
    if hit is None or not (hit.clickable or hit.checkable) or not hit.enabled:
        return False
    # The tap must land on the node's own container, not on a child of it (a RadioGroup's
    # centre is one of its options, which is a different element).
    left, top, right, bottom = node.bounds
    h_left, h_top, h_right, h_bottom = hit.bounds
    return h_left <= left and h_top <= top and h_right >= right and h_bottom >= bottom


def _id_tail(node: UINode) -> str:
    return node.resource_id.rsplit("/", 1)[-1] if node.resource_id else ""


def row_label(node: UINode, nodes: list[UINode]) -> str:
    """The text a person reads next to an unlabelled control (a Switch in a settings row).

    A container's own text children come first (a clickable row → its title); otherwise
    the nearest text node whose vertical centre lies inside the control's row (Android
    rows put the label in a sibling TextView).
    """
    children = [n for n in nodes if n.parent == node.index and n.text.strip()]
    if children:
        return children[0].text
    _, top, _, bottom = node.bounds
    cy = (top + bottom) / 2
    best: tuple[float, str] | None = None
    for other in nodes:
        if other.index == node.index or not other.text.strip() or other.checkable:
            continue
        if not (node.bounds[0] - 2 <= other.center[0] or other.bounds[2] <= node.bounds[2] + 2):
            continue
        o_top, o_bottom = other.bounds[1], other.bounds[3]
        o_cy = (o_top + o_bottom) / 2
        if top - 8 <= o_cy <= bottom + 8 or o_top - 8 <= cy <= o_bottom + 8:
            distance = abs(other.center[0] - node.center[0]) + 4 * abs(o_cy - cy)
            if other.parent == node.parent:
                distance /= 2
            if best is None or distance < best[0]:
                best = (distance, other.text)
    return best[1] if best else ""


def owner_of(node: UINode, nodes: list[UINode]) -> UINode | None:
    """The clickable container a passive text node belongs to (a row owns its title and
    summary): tapping the text taps the row, so the two are one element."""
    if node.clickable or node.checkable or is_editable(node) or node.scrollable:
        return None
    by_index = {n.index: n for n in nodes} if len(nodes) < 64 else None
    current = node.parent
    for _ in range(3):
        if current is None:
            return None
        parent = by_index.get(current) if by_index is not None else _find(nodes, current)
        if parent is None:
            return None
        if parent.clickable or parent.checkable:
            return parent
        current = parent.parent
    return None


def _find(nodes: list[UINode], index: int) -> UINode | None:
    if 0 <= index < len(nodes) and nodes[index].index == index:
        return nodes[index]
    return next((n for n in nodes if n.index == index), None)


def contained_texts(node: UINode, nodes: list[UINode]) -> list[str]:
    """Texts of the passive nodes a container owns, in document order."""
    return [
        n.text or n.content_desc for n in nodes
        if n.parent is not None and (n.text or n.content_desc) and n.index != node.index
        and (owner := owner_of(n, nodes)) is not None and owner.index == node.index
    ]


def node_label(node: UINode, nodes: list[UINode] | None = None) -> str:
    """The words that describe a node: text, content-desc, id tail, row label for controls."""
    parts = [node.text, node.content_desc, _id_tail(node).replace("_", " ")]
    if nodes is not None and not node.text and not node.content_desc and (
        node.checkable or is_editable(node) or node.clickable
    ):
        inner = contained_texts(node, nodes)
        parts.extend(inner if inner else [row_label(node, nodes)])
    if is_editable(node):
        hint = node.extra.get("hint")
        if isinstance(hint, str):
            parts.append(hint)
    return " ".join(p for p in parts if p)


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
        own = set(tokens(node.text + " " + node.content_desc + " " + _id_tail(node), keep_stopwords=True))
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
            label = _id_tail(node).replace("_", " ")
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
