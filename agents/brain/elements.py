"""UI elements as a person sees them: what they are called and whether a tap lands.

Pure Python (no Django). A switch with no text of its own is called by its row's
caption; a row's title is the row; an element is a candidate when it can be acted on or
says something. Shared by the recommender (:mod:`agents.brain.recommend`), the agent loop, the
heuristic backend and the evidence every backend states.
"""
from __future__ import annotations

from devices.uitree import UINode, node_at

__all__ = [
    "contained_texts", "id_tail", "is_candidate", "is_editable", "is_tappable", "node_label",
    "owner_of", "row_label",
]


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


def id_tail(node: UINode) -> str:
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
    parts = [node.text, node.content_desc, id_tail(node).replace("_", " ")]
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
