"""Shopping: walk a shop's purchase funnel for "buy X" and "add X to my cart".

Search for the item by name, open its row, then Add to cart → View cart → Checkout →
Pay, stopping where the goal stops. Pay is a sensitive action: the gate's policy still
asks a person before it.
"""
from __future__ import annotations

import re
from typing import Any

from agents.brain.backends.base import StepContext
from agents.brain.backends.heuristic.choice import Choice
from agents.brain.backends.heuristic.history import history_labels
from agents.brain.backends.heuristic.intents import Intent, normalise_words
from agents.brain.backends.heuristic.screen import (
    ScreenView, field_is_empty, is_system_nav, node_label_text, plain,
)
from agents.brain.elements import is_editable, is_tappable
from agents.brain.text import tokens
from devices.actions import CLICK, PRESS_ENTER, TYPE, Action
from devices.uitree import UINode


# A shop's purchase funnel, in order; buttons are matched by their whole label.
_FUNNEL: tuple[frozenset[str], ...] = (
    frozenset({"add to cart", "add to bag", "add to basket"}),
    frozenset({"view cart", "go to cart", "view bag", "view basket"}),
    frozenset({"checkout", "check out", "proceed to checkout"}),
    frozenset({"pay", "pay now", "place order", "buy now", "confirm order", "complete purchase"}),
)
_BUY_RE = re.compile(r"\b(buy|purchase|check\s*out|pay for)\b", re.I)
_ADD_TO_CART_RE = re.compile(r"\badd\b.*\b(?:to\s+(?:my|the)\s+)?(?:cart|bag|basket)\b", re.I)


def purchase_step(intents: list[Intent], view: ScreenView,
                  ctx: StepContext) -> Choice | None:
    """Walk a shop's purchase funnel for "buy X" / "add X to my cart".

    A person who wants to buy something searches for it by name, then goes Add to cart →
    View cart → Checkout → Pay; asked to add it to the cart, they stop after Add to
    cart. On each screen the furthest step the goal allows is taken, once every choice
    on screen is made (the options the goal names are picked by the rules before).
    Sure (4) only when the screen names the item the goal names; Pay is a sensitive
    action, so the guard still asks a person before it.
    """
    final = _funnel_goal(ctx.instruction)
    if final is None or view.overlay_kind in ("permission", "error", "loading"):
        return None
    if any(g.checked is None for g in view.groups):
        return None
    item = _item_words(ctx.instruction, ctx.apps)
    screen_words = set(tokens(" ".join(
        n.text for n in view.nodes if n.text and not n.clickable and not is_editable(n))))
    named_here = bool(item) and item <= screen_words
    clicked = {plain(label) for label in history_labels(ctx.history)}
    best: tuple[int, UINode] | None = None
    for node in view.candidates:
        if not (node.clickable and node.enabled) or is_editable(node) or is_system_nav(node):
            continue
        label = plain(node.label or "")
        stage = next((i for i, phrases in enumerate(_FUNNEL) if label in phrases), None)
        if stage is None or stage > final or label in clicked:
            continue
        if best is None or stage > best[0]:
            best = (stage, node)
    if best is not None:
        stage, node = best
        x, y = node.center
        # Sure when the screen names the item, the previous funnel step was taken, or
        # the instruction names this step itself ("check out" → Checkout).
        sure = named_here or any(
            phrase in clicked for phrases in _FUNNEL[:stage] for phrase in phrases) or \
            f" {normalise_words(node.label or '')} " in f" {normalise_words(ctx.instruction)} "
        return Choice(Action(CLICK, x=x, y=y, element=node.label), 4.0 if sure else 3.0,
                      f"Buying: '{node.label}' is the next step of the purchase"
                      + ("" if sure else ", though this screen does not name the item") + ".",
                      [node.key])
    if item:
        # A list row naming the item opens its page ("Nimbus Noise Cancelling").
        overlay = {n.key for n in view.overlay}
        rows = [n for n in view.candidates if n.text and is_tappable(n, view.nodes)
                and not is_editable(n) and n.key not in overlay
                and item <= set(tokens(n.text)) and len(set(tokens(n.text)) - item) <= 2]
        # One row, and not one already tapped: with "Visa ending 9021" tapped, its
        # lookalike "Visa ending 4417" is not "the" item just because it is left.
        if len({plain(n.text) for n in rows}) == 1 and plain(rows[0].text) not in clicked:
            x, y = rows[0].center
            return Choice(Action(CLICK, x=x, y=y, element=rows[0].text), 4.0,
                          f"'{rows[0].text}' is the item the goal names; opening it.",
                          [rows[0].key])
    if any(i.kind == "type" for i in intents):
        return None  # the instruction says what to search for itself
    return search_item(ctx, view)


def search_item(ctx: StepContext, view: ScreenView) -> Choice | None:
    """The item is not on screen but a search field is: search for it by name."""
    query = _item_query(ctx.instruction, ctx.apps)
    fields = [n for n in view.editables if "search" in node_label_text(n).lower()]
    if not query or len(fields) != 1:
        return None
    field_node = fields[0]
    last = ctx.history[-1].action if ctx.history else {}
    if not field_is_empty(field_node):
        if last.get("type") == TYPE and normalise_words(str(last.get("text", ""))) == normalise_words(query):
            return Choice(Action(PRESS_ENTER), 4.0, f"'{query}' is typed; searching.")
        return None
    words = set(tokens(query))
    shown = any(words <= set(tokens(n.text)) for n in view.nodes if n.text and not is_editable(n))
    searched = any(e.action.get("type") == TYPE and normalise_words(str(e.action.get("text", "")))
                   == normalise_words(query) for e in ctx.history)
    if shown or searched:
        return None
    return Choice(Action(TYPE, text=query, element=field_node.label or None), 4.0,
                  f"'{query}' is not on this screen; searching the shop for it.",
                  [field_node.key])


def _funnel_goal(instruction: str) -> int | None:
    """How far along the funnel the instruction goes: to Pay, to Add to cart, or not at all."""
    if _BUY_RE.search(instruction):
        return len(_FUNNEL) - 1
    if _ADD_TO_CART_RE.search(instruction):
        return 0
    return None


def _item_query(instruction: str, apps: Any) -> str:
    """The item's name as the instruction gives it: the longest run of capitalised words
    ("Pulse Sport Earbuds"), with the noun right after it ("Stride Runner shoes")."""
    app_names = {normalise_words(a.name) for a in apps or ()}
    words = re.findall(r"[\w'’$-]+", instruction)
    best: list[str] = []
    run: list[str] = []
    for i, word in enumerate(words + [""]):
        if i > 0 and word[:1].isupper() and normalise_words(word) not in app_names:
            run.append(word)
            continue
        if len(run) > len(best):
            best = run + ([word] if word and tokens(word) and word[:1].islower() else [])
        run = []
    return " ".join(best)


def _item_words(instruction: str, apps: Any) -> set[str]:
    return set(tokens(" ".join(w for w in _item_query(instruction, apps).split()
                               if w[:1].isupper())))
