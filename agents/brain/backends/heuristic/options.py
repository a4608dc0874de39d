"""Options and questions: pick the option the goal names, or ask the user.

A radio group with nothing chosen that the goal names no option of is the user's choice
(RecAgent §3.6, App. D): the backend asks once, then guesses low. Several items that fit
a name equally ("Sam Patel", "Sam Rivera") are asked about the same way, and the answer
picks one (RecAgent Eq. 6, the refined goal).
"""
from __future__ import annotations

import re

from agents.brain.backends.base import Clarification, Proposal, StepContext
from agents.brain.backends.heuristic.choice import Choice
from agents.brain.backends.heuristic.history import history_labels
from agents.brain.backends.heuristic.intents import Intent, capitalised_names, normalise_words
from agents.brain.backends.heuristic.screen import ChoiceGroup, ScreenView, is_system_nav, related
from agents.brain.elements import is_editable, is_tappable, node_label, row_label
from agents.brain.text import tokens
from devices.actions import CLICK, Action
from devices.uitree import UINode


# How the question which app to use begins (errands.which_app asks it).
WHICH_APP = "Which app should I use for"


def open_choice(view: ScreenView, ctx: StepContext) -> Proposal | None:
    """Ask when a required choice group has no option chosen and the goal names none."""
    goal = ctx.goal
    for group in view.groups:
        if group.checked is not None:
            continue
        labels = group.labels(view.nodes)
        if _named_option(group, view.nodes, goal) is not None:
            continue  # pick_named_option picks it
        options = [label for label in labels if label]
        if not options:
            continue
        title = (group.title or "option").strip().rstrip(":").lower()
        question = f"Which {title} would you like: {_or_list([o.lower() for o in options])}?"
        if question in ctx.asked:
            continue  # never ask twice; pick_named_option guesses, low
        return Proposal(
            action=None, confidence=2.0, clarification=Clarification(question, options),
            thought=f"The screen needs a {title} choice and the instruction does not say which.",
            current_step=f"choose the {title}",
        )
    return None


def equally_valid(intent: Intent, view: ScreenView,
                  ctx: StepContext) -> Proposal | Choice | None:
    """Ask which one when several items on screen fit the goal equally and only words
    the instruction does not say tell them apart ("Text Sam…" with Sam Patel and Sam
    Rivera listed) — RecAgent §3.6: several choices equally valid. An item the
    instruction names completely ("Latte" beside "Iced latte") is no ambiguity. Once
    asked, the item the answer names is clicked (RecAgent Eq. 6, the refined goal)."""
    if intent.kind not in ("click", "type") or (intent.kind == "type" and view.editables):
        return None
    query = intent.target.replace(intent.typed, " ") if intent.typed else intent.target
    # Only a name can be under-specified this way: a word the instruction capitalises
    # mid-sentence ("Sam"), not a description ("wireless ones under $100").
    wanted = set(tokens(query)) & capitalised_names(ctx.instruction)
    if not wanted:
        return None
    said = set(tokens(ctx.instruction))
    clicked = {normalise_words(label) for label in history_labels(ctx.history)}
    fits: dict[frozenset[str], list[tuple[UINode, str, set[str]]]] = {}
    for node in view.candidates:
        label = (node.text or "").strip()
        if (not label or is_editable(node) or is_system_nav(node) or node.checkable
                or not is_tappable(node, view.nodes) or normalise_words(label) in clicked):
            continue
        words = set(tokens(label))
        hit = frozenset(words & wanted)
        if hit and len(words) <= 4:
            fits.setdefault(hit, []).append((node, label, words - said))
    if not fits:
        return None
    widest = max(len(hit) for hit in fits)
    best = [group for hit, group in fits.items() if len(hit) == widest]
    if len(best) != 1:
        return None
    items: list[tuple[UINode, str, set[str]]] = []
    for item in best[0]:
        if not any(related(item[0], kept[0], view.nodes) for kept in items):
            items.append(item)
    labels = list(dict.fromkeys(label for _, label, _ in items))
    if len(labels) < 2 or any(not extra for _, _, extra in items):
        return None
    question = f"Which one do you mean: {_or_list(labels)}?"
    if question in ctx.asked:
        answered = set(tokens(" ".join(ctx.answers)))
        named = [(node, label) for node, label, extra in items if extra <= answered]
        if len(named) != 1:
            return None  # the answer names none of them: click_best guesses, low
        node, label = named[0]
        x, y = node.center
        return Choice(Action(CLICK, x=x, y=y, element=label), 5.0,
                      f"The user chose '{label}'.", [node.key])
    return Proposal(
        action=None, confidence=2.0, clarification=Clarification(question, labels),
        thought=f"{_or_list(labels)} all fit '{intent.text}'; only the user knows which.",
        current_step=f"choose between {_or_list(labels)}",
    )


def under_specified(intent: Intent, view: ScreenView,
                    ctx: StepContext) -> Proposal | Choice | None:
    """Ask which one when the goal's app is open, lists items to choose from, and no
    word of the step is on the screen ("Order a coffee" in Coffee, which lists Latte,
    Cappuccino, Americano…): the instruction leaves the choice to the user (RecAgent
    §3.6, an under-specified instruction), so the user is asked rather than an operator
    handed a guess. The answer is read against the items listed (RecAgent Eq. 6)."""
    if intent.kind != "click" or intent.app is None or view.package != intent.app.package \
            or view.overlay:
        return None
    wanted = set(tokens(intent.target)) - set(tokens(intent.app.name))
    items: list[tuple[UINode, str]] = []
    for node in view.candidates:
        if wanted & set(tokens(node_label(node, view.nodes))):
            return None  # the step names something here: the other rules act on it
        # Items of a list: clickable rows made of text lines, not buttons (Filters, Sort).
        if (not node.clickable or node.text or is_editable(node) or is_system_nav(node)
                or node.checkable or not any(n.parent == node.index and n.text.strip()
                                             for n in view.nodes)):
            continue
        # A row is called by its title, its first line ("Latte", not its description).
        label = row_label(node, view.nodes).strip()
        if label and len(tokens(label)) <= 4 and not any(
                related(node, kept, view.nodes) for kept, _ in items):
            items.append((node, label))
    labels = list(dict.fromkeys(label for _, label in items))
    if not 3 <= len(labels) <= 8:
        return None
    # Whatever the user said, to this question or in the chat, is read against the items.
    answered = set(tokens(" ".join(ctx.answers)))
    named = [(node, label) for node, label in items if set(tokens(label)) <= answered]
    if len(named) == 1:
        node, label = named[0]
        x, y = node.center
        # The evidence of pick_named_option: the option the (refined) goal names.
        return Choice(Action(CLICK, x=x, y=y, element=label), 5.0,
                      f"The user chose '{label}'.", [node.key], rule="pick_named_option")
    question = f"Which one would you like: {_or_list(labels)}?"
    if question in ctx.asked:
        return None  # the answer names none of them: the rules below guess, low
    return Proposal(
        action=None, confidence=2.0, clarification=Clarification(question, labels),
        thought=f"'{intent.text}' does not say which of {_or_list(labels)}; only the "
                "user knows.",
        current_step="ask which one",
    )


def pick_named_option(view: ScreenView, ctx: StepContext) -> Choice | None:
    for group in view.groups:
        if group.checked is not None:
            continue
        named = _named_option(group, view.nodes, ctx.goal)
        labels = group.labels(view.nodes)
        title = group.title or "option"
        if named is None:
            # (the question which app to use quotes the goal — "…on Wednesday" — and
            # asks nothing about this group's "Day")
            question_asked = any(title.lower() in q.lower() for q in ctx.asked
                                 if not q.startswith(WHICH_APP))
            if question_asked and group.options:
                option = group.options[0]
                x, y = option.center
                return Choice(Action(CLICK, x=x, y=y, element=option.label), 2.0,
                              f"No {title} was named even after asking; guessing.")
            continue
        option, strength = named
        x, y = option.center
        label = option.label or row_label(option, view.nodes)
        confidence = 5.0 if strength >= 0.99 else 4.0 if strength >= 0.9 else 3.0
        why = f"The goal names '{label}' for {title}; choosing it (options: {', '.join(labels)})."
        if _names_elsewhere(view, ctx, label):
            # "the Aurora Wireless Headphones in black" on the Pulse Sport Earbuds'
            # page: Black is named, but these options belong to another item.
            confidence = min(confidence, 3.0)
            why += " The item the goal names is not on this screen, though."
        choice = Choice(Action(CLICK, x=x, y=y, element=label), confidence, why,
                        [option.key])
        choice.evidence.update(strength=round(strength, 4), fitting=len(labels))
        return choice
    return None


def submit_form(view: ScreenView, ctx: StepContext) -> Choice | None:
    """Every choice on screen made, at least one by us: tap the button the goal names."""
    if not view.groups or any(g.checked is None for g in view.groups) or view.overlay_kind:
        return None
    clicked = {label.lower() for label in history_labels(ctx.history)}
    chosen_here = {(o.label or row_label(o, view.nodes)).lower()
                   for g in view.groups for o in g.options}
    if not clicked & chosen_here:
        return None
    goal_toks = set(tokens(ctx.goal))
    for node in view.candidates:
        label = node.label or ""
        # A plain Button: not a RadioButton, nor a toolbar ImageButton ("Cart").
        if (node.short_class != "Button" or not label or label.lower() in clicked
                or is_system_nav(node)):
            continue
        if set(tokens(label)) & goal_toks:
            x, y = node.center
            return Choice(Action(CLICK, x=x, y=y, element=label), 4.0,
                          f"Every choice is made; '{label}' submits what the goal asks.",
                          [node.key])
    return None


def _named_option(group: ChoiceGroup, nodes: list[UINode], goal: str) -> tuple[UINode, float] | None:
    """The option of ``group`` the goal names (exactly, or through a synonym), if one."""
    goal_toks = set(tokens(goal, keep_stopwords=True))
    hits: list[tuple[float, UINode]] = []
    for option in group.options:
        label = option.label or row_label(option, nodes)
        # Option labels carry details in brackets ("Standard (free, 3–5 days)").
        words = set(tokens(re.sub(r"\(.*?\)", " ", label), keep_stopwords=True))
        if words and all(_word_named(w, goal_toks) for w in words):
            hits.append((1.0, option))
    if len(hits) == 1:
        return hits[0][1], hits[0][0]
    if len(hits) > 1:
        # "5 stars and a $2 tip" names both "2 stars" and "5 stars" word by word; the
        # label the goal says as a phrase is the one meant.
        said = f" {normalise_words(goal)} "
        phrased = [h for h in hits
                   if f" {normalise_words(h[1].label or row_label(h[1], nodes))} " in said]
        if len(phrased) == 1:
            return phrased[0][1], 1.0
        # "large" and "extra large" both named: the longer label is the precise one.
        hits.sort(key=lambda h: -len((h[1].label or "")))
        longest = len(hits[0][1].label or "")
        tied = sum(1 for h in hits if len(h[1].label or "") == longest)
        return hits[0][1], 0.9 if tied == 1 else 0.6
    return None


def other_named_option(view: ScreenView, intent: Intent) -> UINode | None:
    """An option on screen that the toggle's own words name ("at high brightness") and
    that is not chosen, while another of its group is: the rest of the sub-goal."""
    for group in view.groups:
        chosen = group.checked
        if chosen is None:
            continue  # an open choice is open_choice's / pick_named_option's
        named = _named_option(group, view.nodes, intent.target)
        if named is not None and named[0] is not chosen and named[1] >= 0.99:
            return named[0]
    return None


def _word_named(word: str, goal_tokens: set[str]) -> bool:
    """``word`` occurs in the goal, allowing inflection ("cycle" names "Cycling")."""
    if word in goal_tokens:
        return True
    return len(word) >= 4 and any(
        len(g) >= 4 and g[:4] == word[:4] and abs(len(g) - len(word)) <= 3 for g in goal_tokens
    )


def _names_elsewhere(view: ScreenView, ctx: StepContext, option_label: str) -> bool:
    """The instruction names an item (capitalised words, less the option's own and the
    apps' names) and none of those words is on this screen: what is on it is something
    else."""
    names = capitalised_names(ctx.instruction) - set(tokens(option_label))
    for app in ctx.apps:
        names -= set(tokens(app.name))
    if not names:
        return False
    return not names & set(tokens(view.text))


def _or_list(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " or " + items[-1]


def choice_left_in(view: ScreenView, goal: str) -> bool:
    """A choice group inside the dialog has nothing chosen, or the goal names one of its
    options that is not the chosen one."""
    inside = {id(n) for n in view.overlay}
    for group in view.groups:
        if not group.options or not all(id(o) in inside for o in group.options):
            continue
        named = _named_option(group, view.nodes, goal)
        if group.checked is None or (named is not None and not named[0].checked):
            return True
    return False
