"""Steppers — a number with − / + buttons — and the number a goal wants in one.

Pure Python (no Django), used by the heuristic backend. Every app author of the held-out
suites drew one (servings, bags, guests, a charge limit in %, minutes before the vault
locks, dollars to add), and the heuristic had no rule for them: on the development suites'
teacher paths it proposed the right tap on a stepper once in 31 tries, pressing back or
tapping the look-alike "Decrease" where "Increase" was due (docs/heuristic.md).

A stepper on screen is a container holding a "Decrease …" and an "Increase …" button (the
content descriptions the simulator gives its steppers, and Android's own NumberPicker
"decrement" / "increment") and a text that reads as a number. The goal's number for it is
the one said next to the stepper's words or its unit ("cap her at 3 GB" → "Limit in GB";
"20 bucks" → "Amount to add ($)"; "an extra hour" → "Extra hours"); numbers that are times,
dates, ages, card endings or the value being replaced ("… instead of 15") are not
candidates.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from agents.brain.text import tokens
from devices.uitree import UINode

__all__ = ["Stepper", "find_steppers", "stepper_target", "stepper_move"]

_DOWN_RE = re.compile(r"^\s*(?:decrease|decrement|minus|fewer|less|subtract)\b\s*(.*)$", re.I)
_UP_RE = re.compile(r"^\s*(?:increase|increment|plus|more|add one)\b\s*(.*)$", re.I)
_VALUE_RE = re.compile(r"^\D{0,3}?(-?\d[\d,]*(?:\.\d+)?)\s*(?:%|[a-z]{0,8}\.?)?$", re.I)


@dataclass(frozen=True)
class Stepper:
    label: str  # what it counts: "Servings", "Charge limit (%)"
    value: float
    decrease: UINode
    increase: UINode

    @property
    def keys(self) -> frozenset[str]:
        return frozenset({self.decrease.key, self.increase.key})


def _number(text: str) -> float | None:
    match = _VALUE_RE.match(text.strip())
    if not match:
        return None
    try:
        return float(match.group(1).replace(",", ""))
    except ValueError:
        return None


def find_steppers(nodes: list[UINode]) -> list[Stepper]:
    """The steppers on a screen: per container, one decrease and one increase button and
    the number shown between them."""
    by_parent: dict[int | None, list[UINode]] = {}
    for n in nodes:
        by_parent.setdefault(n.parent, []).append(n)
    found: list[Stepper] = []
    for parent, children in by_parent.items():
        if parent is None:
            continue
        down = [(n, m.group(1)) for n in children if n.clickable and n.enabled
                for m in [_DOWN_RE.match(n.content_desc or n.text)] if m]
        up = [(n, m.group(1)) for n in children if n.clickable and n.enabled
              for m in [_UP_RE.match(n.content_desc or n.text)] if m]
        values = [v for n in children if not n.clickable and n.text
                  for v in [_number(n.text)] if v is not None]
        if len(down) != 1 or len(up) != 1 or len(values) != 1:
            continue
        title = next((n.text for n in children if n.text and _number(n.text) is None
                      and not n.clickable), "")
        label = down[0][1].strip() or up[0][1].strip() or title
        found.append(Stepper(label=label, value=values[0], decrease=down[0][0],
                             increase=up[0][0]))
    return found


# -- the goal's number ---------------------------------------------------------------

_WORD_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a": 1, "an": 1, "single": 1,
    "couple": 2, "pair": 2,
}
# A number followed by one of these is not a count: a time, a date, an age.
_NOT_COUNTS = re.compile(
    r"^(?::\d|\s*(?:am|pm|a\.m|p\.m|o'?clock)\b|(?:st|nd|rd|th)\b|\s*(?:-\s*)?(?:years?|yrs?|months?)"
    r"[\s-]*old\b)", re.I)
# … and one preceded by these is not the one wanted ("instead of 15", "ending 4471").
_NOT_WANTED_BEFORE = re.compile(
    r"(?:instead\s+of|rather\s+than|not|from|ending(?:\s+in)?|until|till|over)\s*$",
    re.I)
_UNITS: dict[str, tuple[str, ...]] = {
    "%": ("%", "percent", "pct"),
    "$": ("$", "dollar", "dollars", "buck", "bucks", "usd"),
    "gb": ("gb", "gig", "gigs", "gigabyte", "gigabytes"),
    "min": ("min", "mins", "minute", "minutes"),
    "hour": ("hour", "hours", "hr", "hrs"),
}
_TOKEN_RE = re.compile(r"\$|%|\d[\d,]*(?:\.\d+)?k?|[a-z]+(?:'[a-z]+)?", re.I)


def _unit_of(word: str) -> str | None:
    word = word.lower().strip("()")
    return next((unit for unit, forms in _UNITS.items() if word in forms), None)


def _label_units(label: str) -> set[str]:
    return {u for w in _TOKEN_RE.findall(label) for u in [_unit_of(w)] if u}


@dataclass(frozen=True)
class _Candidate:
    value: float
    score: int


def _candidates(text: str, label: str) -> list[_Candidate]:
    label_words = {t for t in tokens(label) if not any(c.isdigit() for c in t)}
    units = _label_units(label)
    spans = list(_TOKEN_RE.finditer(text))
    words = [m.group(0).lower() for m in spans]
    out: list[_Candidate] = []
    for i, match in enumerate(spans):
        word = words[i]
        digits = word[0].isdigit()
        if digits:
            value = float(word.rstrip("k").replace(",", "")) * (1000 if word.endswith("k") else 1)
            if _NOT_COUNTS.match(text[match.end():]):
                continue
            if len(word.rstrip("k")) >= 4 and "," not in word and not word.endswith("k"):
                continue  # a plate, a card ending, a PIN: not an amount
        elif word in _WORD_NUMBERS:
            value = float(_WORD_NUMBERS[word])
        else:
            continue
        if _NOT_WANTED_BEFORE.search(text[:match.start()]):
            continue
        after = words[i + 1:i + 4]
        before = words[max(0, i - 4):i]
        near = set(tokens(" ".join(after + before)))
        score = len(near & label_words)
        # the unit right after or right before it: "20 bucks", "$20", "80%"
        unit_here = {u for w in words[i + 1:i + 2] + words[max(0, i - 1):i]
                     for u in [_unit_of(w)] if u}
        if units & unit_here:
            score += 2
        if not digits:
            # "a", "an", "one" count only right before what the stepper counts ("a checked
            # bag", "an extra hour", "one guest"), never on their own.
            if not (set(tokens(" ".join(words[i + 1:i + 3]))) & label_words):
                continue
        out.append(_Candidate(value=value, score=score))
    return out


def stepper_target(text: str, label: str) -> float | None:
    """The number ``text`` (the goal) wants in the stepper ``label``: the one said next to
    the stepper's words or unit. None: the goal says no number for it, or two equally.

    A bare number with nothing of the stepper beside it is not taken, even on a screen with
    one stepper: "spin at 6 tonight", "start charging at 1", "the 2 step thing" were each
    read as a count that way on the development suites."""
    named = [c for c in _candidates(text, label) if c.score > 0]
    if not named:
        return None
    best = max(c.score for c in named)
    values = {c.value for c in named if c.score == best}
    return values.pop() if len(values) == 1 else None


def stepper_move(stepper: Stepper, target: float, pressed: list[str]) -> UINode | None:
    """The button that brings ``stepper`` towards ``target``; None once it is there, or
    once the last two presses on it went opposite ways (a step that cannot land on the
    target: stop beside it rather than rock back and forth). ``pressed``: the labels of
    the agent's taps so far, oldest first."""
    if stepper.value == target:
        return None
    names = {stepper.decrease.label: "down", stepper.increase.label: "up"}
    mine = [names[label] for label in pressed if label in names]
    if len(mine) >= 2 and mine[-1] != mine[-2]:
        return None
    return stepper.increase if stepper.value < target else stepper.decrease
