"""A screen signature that survives changing content (issue 25, LEARNING lessons 1 and 6).

Pure Python. Two observations of "the same kind of screen" — the transfer form with
another amount typed, the account page with another balance, a contact list with other
people in it — give the same signature; two different screens of one app do not.

What goes in: per node outside the system UI and outside lists, its class and resource-id
tail; its text only where the node has no resource id and is a control (a button's words
are part of the structure, a label's are content). List contents (rows of a
RecyclerView), clocks, balances and any other text under a resource id are left out.
Field state (empty or filled) is kept apart as ``fields``: a form before and after typing
needs different next steps, so the key includes it.
"""
from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from devices.uitree import UINode

SYSTEM_PACKAGES = ("com.android.systemui",)
_LIST_CLASSES = ("RecyclerView", "ListView", "ScrollView", "GridView")
_DIGITS = re.compile(r"\d+([.,]\d+)*")


def id_tail(node: UINode) -> str:
    return node.resource_id.rsplit("/", 1)[-1] if node.resource_id else ""


def short_class(node: UINode) -> str:
    return node.cls.rsplit(".", 1)[-1]


def is_editable(node: UINode) -> bool:
    return short_class(node) in ("EditText", "AutoCompleteTextView")


def is_filled(node: UINode) -> bool:
    """A field shows typed text, not its hint."""
    hint = node.extra.get("hint") if isinstance(node.extra, dict) else None
    return bool(node.text) and node.text != hint


def _inside_list(node: UINode, by_index: dict[int, UINode]) -> bool:
    parent = node.parent
    seen = 0
    while parent is not None and seen < 50:
        above = by_index.get(parent)
        if above is None:
            return False
        if short_class(above) in _LIST_CLASSES or above.scrollable:
            return True
        parent, seen = above.parent, seen + 1
    return False


@dataclass(frozen=True)
class Signature:
    """``tokens``: the structure; ``fields``: (field id, filled) in screen order;
    ``key``: a short hash of both — the lookup key (exact match)."""

    tokens: frozenset[str]
    fields: tuple[tuple[str, bool], ...]
    key: str

    def similarity(self, other: "Signature") -> float:
        """Jaccard similarity of the structure (1.0: the same kind of screen); 0 when
        the fields' state differs (a filled form is not an empty one)."""
        if self.fields != other.fields:
            return 0.0
        if not self.tokens and not other.tokens:
            return 1.0
        return len(self.tokens & other.tokens) / len(self.tokens | other.tokens)


# --- the same kind of screen for another entity ------------------------------------------
#
# Apps often name a screen's ids after what it shows: ``boots_day_save`` on the boots' day
# form is ``lamp_day_save`` on the lamp's. Two signatures whose ids differ in one segment,
# the same segment throughout (``boots`` for ``lamp``), are the same kind of screen: the
# segment is a parameter of the screen, as a list row's label is of an instruction. Found
# per pair, from the ids alone — no list of any app's names.
_SEGMENT_SPLIT = re.compile(r"[_.\-]+|(?<=[a-z0-9])(?=[A-Z])")
# A renaming counts only when this many ids agree on it: one differing id is a different
# screen (another tab selected), not another entity's copy of the same one.
MIN_RENAME_SUPPORT = 2


def id_segments(rid: str) -> tuple[str, ...]:
    return tuple(s for s in _SEGMENT_SPLIT.split(rid) if s)


def _split_token(token: str) -> tuple[str, str] | None:
    """(class, resource id) of an id token, None for a text or anonymous token."""
    cls, _, rest = token.partition(":")
    if not rest or rest.startswith(":"):
        return None
    return cls, rest


def rename_id(rid: str, rename: dict[str, str]) -> str:
    """``rid`` with its segments renamed (``{"boots": "lamp"}``); separators kept."""
    if not rename or not rid:
        return rid
    parts = re.split(r"([_.\-]+|(?<=[a-z0-9])(?=[A-Z]))", rid)
    return "".join(rename.get(p, p) for p in parts)


def _renamed_tokens(tokens: frozenset[str], rename: dict[str, str]) -> frozenset[str]:
    out = set()
    for token in tokens:
        split = _split_token(token)
        out.add(f"{split[0]}:{rename_id(split[1], rename)}" if split else token)
    return frozenset(out)


def _one_segment_out(tokens: frozenset[str]):
    """Per id token and per segment of its id: (where the segment sits — class, segment
    count, position, the other segments —, the segment)."""
    for token in tokens:
        split = _split_token(token)
        if split is None:
            continue
        segs = id_segments(split[1])
        for i, seg in enumerate(segs):
            yield (split[0], len(segs), i, segs[:i] + segs[i + 1:]), seg


@lru_cache(maxsize=65536)
def aligned(current: "Signature", stored: "Signature") -> tuple[float, tuple[tuple[str, str], ...]]:
    """How alike ``stored`` is to ``current`` once one id segment that differs throughout
    is renamed, and the renaming (stored segment → current segment; empty when none
    helps). Without a renaming this is :meth:`Signature.similarity`."""
    plain = current.similarity(stored)
    only_current = current.tokens - stored.tokens
    only_stored = stored.tokens - current.tokens
    if not only_current or not only_stored or len(current.fields) != len(stored.fields):
        return plain, ()
    index: dict[tuple, set[str]] = {}
    for place, seg in _one_segment_out(only_stored):
        index.setdefault(place, set()).add(seg)
    votes: Counter = Counter()
    for place, seg in _one_segment_out(only_current):
        for other in index.get(place, ()):
            if other != seg:
                votes[(other, seg)] += 1
    if not votes:
        return plain, ()
    (old, new), support = votes.most_common(1)[0]
    if support < MIN_RENAME_SUPPORT:
        return plain, ()
    rename = {old: new}
    tokens = _renamed_tokens(stored.tokens, rename)
    fields = tuple((rename_id(f, rename), v) for f, v in stored.fields)
    if fields != current.fields:
        return plain, ()
    union = len(tokens | current.tokens)
    similarity = len(tokens & current.tokens) / union if union else 1.0
    if similarity <= plain:
        return plain, ()
    return similarity, ((old, new),)


def screen_signature(nodes: list[UINode]) -> Signature:
    by_index = {node.index: node for node in nodes}
    tokens: set[str] = set()
    fields: list[tuple[str, bool]] = []
    for node in nodes:
        if node.package in SYSTEM_PACKAGES or _inside_list(node, by_index):
            continue
        cls, rid = short_class(node), id_tail(node)
        if is_editable(node):
            fields.append((rid or f"field{len(fields)}", is_filled(node)))
        if rid:
            tokens.add(f"{cls}:{rid}")
        elif node.clickable and (node.text or node.content_desc):
            words = _DIGITS.sub("#", (node.text or node.content_desc).strip().lower())
            tokens.add(f"{cls}::{words}")
        elif node.clickable or node.checkable:
            tokens.add(f"{cls}:")
    digest = hashlib.sha1(
        ("|".join(sorted(tokens)) + "#" + ",".join(f"{f}={int(v)}" for f, v in fields)).encode()
    ).hexdigest()[:16]
    return Signature(frozenset(tokens), tuple(fields), digest)
