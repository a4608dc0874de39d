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
from dataclasses import dataclass

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
