"""UI nodes in the schema of ``uiautomator dump``, and a parser for its XML.

Pure Python. Every device (the simulator, an adb phone) describes its screen as a flat,
document-ordered list of :class:`UINode`; ``parent`` links rebuild the tree when needed.
The JSON form uses uiautomator's own attribute names (``class``, ``content-desc``,
``resource-id``, ``bounds`` as ``[l,t][r,b]``) so a dump from a phone and a simulated
screen look the same to an agent, a prompt and a training record.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any, Iterable

Bounds = tuple[int, int, int, int]  # left, top, right, bottom in device pixels

_BOUNDS_RE = re.compile(r"\[\s*(-?\d+)\s*,\s*(-?\d+)\s*\]\s*\[\s*(-?\d+)\s*,\s*(-?\d+)\s*\]")

BOOL_ATTRS: tuple[str, ...] = (
    "checkable", "checked", "clickable", "enabled", "focusable", "focused",
    "scrollable", "long-clickable", "password", "selected",
)


class UITreeError(ValueError):
    pass


def parse_bounds(text: str) -> Bounds:
    match = _BOUNDS_RE.fullmatch(text.strip()) if isinstance(text, str) else None
    if not match:
        raise UITreeError(f"bad bounds '{text}': expected '[left,top][right,bottom]'")
    left, top, right, bottom = (int(v) for v in match.groups())
    return left, top, right, bottom


def format_bounds(bounds: Bounds) -> str:
    left, top, right, bottom = bounds
    return f"[{left},{top}][{right},{bottom}]"


@dataclass
class UINode:
    index: int  # position in document order (the flat list)
    cls: str = "android.view.View"
    text: str = ""
    content_desc: str = ""
    resource_id: str = ""
    package: str = ""
    bounds: Bounds = (0, 0, 0, 0)
    checkable: bool = False
    checked: bool = False
    clickable: bool = False
    enabled: bool = True
    focusable: bool = False
    focused: bool = False
    scrollable: bool = False
    long_clickable: bool = False
    password: bool = False
    selected: bool = False
    parent: int | None = None
    depth: int = 0
    naf: bool = False  # "Not Accessibility Friendly": clickable without text or description
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """A stable name for the node: its resource id, else ``node-<index>``."""
        return self.resource_id or f"node-{self.index}"

    @property
    def label(self) -> str:
        """What a person would call it: text, else content description, else id tail."""
        if self.text:
            return self.text
        if self.content_desc:
            return self.content_desc
        if self.resource_id:
            return self.resource_id.rsplit("/", 1)[-1].replace("_", " ")
        return ""

    @property
    def center(self) -> tuple[int, int]:
        left, top, right, bottom = self.bounds
        return (left + right) // 2, (top + bottom) // 2

    @property
    def area(self) -> int:
        left, top, right, bottom = self.bounds
        return max(0, right - left) * max(0, bottom - top)

    def contains(self, x: int, y: int) -> bool:
        left, top, right, bottom = self.bounds
        return left <= x < right and top <= y < bottom

    @property
    def short_class(self) -> str:
        return self.cls.rsplit(".", 1)[-1]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "class": self.cls,
            "text": self.text,
            "content-desc": self.content_desc,
            "resource-id": self.resource_id,
            "package": self.package,
            "bounds": format_bounds(self.bounds),
        }
        for attr in BOOL_ATTRS:
            out[attr] = getattr(self, attr.replace("-", "_"))
        out["parent"] = self.parent
        out["depth"] = self.depth
        if self.naf:
            out["NAF"] = True
        if self.extra:
            out["extra"] = self.extra
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "UINode":
        kwargs: dict[str, Any] = {
            "index": int(data.get("index", 0)),
            "cls": str(data.get("class", "android.view.View")),
            "text": str(data.get("text", "") or ""),
            "content_desc": str(data.get("content-desc", "") or ""),
            "resource_id": str(data.get("resource-id", "") or ""),
            "package": str(data.get("package", "") or ""),
            "bounds": parse_bounds(data["bounds"]) if isinstance(data.get("bounds"), str)
            else tuple(data.get("bounds", (0, 0, 0, 0))),
            "parent": data.get("parent"),
            "depth": int(data.get("depth", 0)),
            "naf": bool(data.get("NAF", False)),
            "extra": dict(data.get("extra", {}) or {}),
        }
        for attr in BOOL_ATTRS:
            kwargs[attr.replace("-", "_")] = _as_bool(data.get(attr, attr == "enabled"))
        return cls(**kwargs)

    def describe(self) -> str:
        """One line for prompts and operator lists."""
        state = ""
        if self.checkable:
            state = " [ON]" if self.checked else " [OFF]"
        label = self.label or self.short_class
        return f"{self.short_class} '{label}'{state} {format_bounds(self.bounds)}"


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def nodes_to_json(nodes: Iterable[UINode]) -> list[dict[str, Any]]:
    return [node.to_json() for node in nodes]


def nodes_from_json(data: Iterable[dict[str, Any]]) -> list[UINode]:
    return [UINode.from_json(item) for item in data]


def parse_uiautomator_xml(xml_text: str | bytes) -> list[UINode]:
    """Parse a ``uiautomator dump`` into a flat, document-ordered node list.

    Handles the AOSP attribute list, nested ``node`` elements, ``bounds`` strings and the
    ``NAF`` marker. Raises :class:`UITreeError` with a readable message on bad input.
    """
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise UITreeError(f"not a uiautomator dump: {exc}") from None
    if root.tag == "node":
        top_level = [root]
    elif root.tag == "hierarchy":
        top_level = [child for child in root if child.tag == "node"]
    else:
        raise UITreeError(f"not a uiautomator dump: root element is <{root.tag}>")

    nodes: list[UINode] = []

    def visit(element: ET.Element, parent: int | None, depth: int) -> None:
        attrs = element.attrib
        bounds_text = attrs.get("bounds", "[0,0][0,0]")
        node = UINode(
            index=len(nodes),
            cls=attrs.get("class", "android.view.View"),
            text=attrs.get("text", ""),
            content_desc=attrs.get("content-desc", ""),
            resource_id=attrs.get("resource-id", ""),
            package=attrs.get("package", ""),
            bounds=parse_bounds(bounds_text),
            parent=parent,
            depth=depth,
            naf=_as_bool(attrs.get("NAF", "false")),
        )
        for attr in BOOL_ATTRS:
            if attr in attrs:
                setattr(node, attr.replace("-", "_"), _as_bool(attrs[attr]))
        nodes.append(node)
        for child in element:
            if child.tag == "node":
                visit(child, node.index, depth + 1)

    for element in top_level:
        visit(element, None, 0)
    return nodes


# Tails of resource ids that open a window over the app (checked by ``is_dialog_root``).
_DIALOG_ID_PREFIXES = ("dialog", "popup", "pop_up", "alert", "permission_dialog", "modal", "snackbar")


def is_dialog_root(node: UINode) -> bool:
    """The top node of a window over the app: an AlertDialog, a pop-up, a permission prompt.

    Only the id's *tail* and the class are read: content ids are often derived from the
    text ("…/apps_with_the_location_permission…") and must not look like a dialog.
    """
    tail = node.resource_id.rsplit("/", 1)[-1].lower()
    if tail.startswith(_DIALOG_ID_PREFIXES) or "Dialog" in node.cls:
        return True
    if node.parent is None and "permissioncontroller" in node.package:
        return True
    window = str(node.extra.get("window", "") or node.extra.get("layer", "")).lower()
    return window in {"dialog", "popup", "overlay", "permission"} or bool(node.extra.get("dialog"))


def descendants(root: UINode, nodes: list[UINode]) -> list[UINode]:
    """Every node below ``root`` in the flat, document-ordered list."""
    inside: set[int] = {root.index}
    out: list[UINode] = []
    for node in nodes:  # document order: a parent precedes its children
        if node.parent is not None and node.parent in inside:
            inside.add(node.index)
            out.append(node)
    return out


def node_at(nodes: list[UINode], x: int, y: int, *, clickable_only: bool = False) -> UINode | None:
    """The deepest (smallest) node under a point, as a touch would hit it."""
    best: UINode | None = None
    for node in nodes:
        if not node.contains(x, y):
            continue
        if clickable_only and not (node.clickable or node.long_clickable or node.checkable):
            continue
        if best is None or node.area <= best.area:
            best = node
    return best


def nodes_to_uiautomator_xml(nodes: list[UINode], rotation: int = 0) -> str:
    """The node list as ``uiautomator dump`` writes it: the inverse of the parser above.

    Used by the fake adb phone of the tests (a simulated screen seen through adb); nodes
    nest by their ``parent`` links, attributes in AOSP's order.
    """
    root = ET.Element("hierarchy", rotation=str(rotation))
    elements: dict[int, ET.Element] = {}
    for node in nodes:
        parent = elements.get(node.parent) if node.parent is not None else None
        attrs = {
            "index": str(sum(1 for n in nodes[:node.index] if n.parent == node.parent)),
            "text": node.text, "resource-id": node.resource_id, "class": node.cls,
            "package": node.package, "content-desc": node.content_desc,
        }
        for attr in BOOL_ATTRS:
            attrs[attr] = "true" if getattr(node, attr.replace("-", "_")) else "false"
        attrs["bounds"] = format_bounds(node.bounds)
        if node.naf:
            attrs["NAF"] = "true"
        elements[node.index] = ET.SubElement(parent if parent is not None else root, "node",
                                             attrs)
    return "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>" + ET.tostring(
        root, encoding="unicode")

SYSTEM_UI_PACKAGE = "com.android.systemui"


def screen_signature(nodes: Iterable[UINode]) -> tuple:
    """What makes two screens the same screen for an action decided on one of them: every
    app node's kind, texts, id, place and state. The system UI (status bar clock, battery,
    navigation bar) is left out: it changes by itself while a ticket waits. Frame numbers
    are not compared either: they restart with the device host."""
    return tuple((n.cls, n.text, n.content_desc, n.resource_id, tuple(n.bounds), n.checked,
                  n.enabled, n.selected, n.focused) for n in nodes
                 if n.package != SYSTEM_UI_PACKAGE
                 and not n.resource_id.startswith(SYSTEM_UI_PACKAGE + ":"))
