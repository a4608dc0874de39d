"""Action matching for static datasets: StaR App. A.2 ("Evaluation of Action Match Rate").

Pure Python. :func:`actions_match` returns ``(type_match, match)`` for a predicted
:class:`~devices.actions.Action` against a :class:`GoldAction`:

* CLICK / LONG_CLICK — types equal, and the predicted point lies inside the gold
  element's bounding box **or** within a normalised distance of the gold point:
  ``sqrt((dx / width)^2 + (dy / height)^2) <= 0.14``, ``0.04`` for toggle records. The
  distance is measured on the 0–1000 grid of each axis as StaR and OS-Atlas do (StaR:
  "d <= 40 in our normalized coordinate system"), so it means the same on any screen.
* TYPE — lower-cased and trimmed texts are equal.
* OPENAPP — app names lower-cased, split into words, each word stemmed; a match when either
  normalised name is a substring of the other ("voice recorder" ~ "voice recorder-unrecorder").
* SCROLL — directions equal (finger direction on both sides; AITZ-era evaluators skipped
  this check and over-counted scrolls, OS-Kairos App. C.3 requires it).
* everything else — type equality only.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from devices.actions import OPENAPP, POINT_TYPES, SCROLL, TYPE, Action, Screen
from devices.uitree import Bounds

# StaR App. A.2: 14% for agentic benchmarks, 4% for fine-grained toggles.
CLICK_DISTANCE = 0.14
TOGGLE_CLICK_DISTANCE = 0.04


@dataclass(frozen=True)
class GoldAction:
    """A reference action, with the bounds of the element the gold click landed in."""

    action: Action
    bbox: Bounds | None = None  # left, top, right, bottom in device pixels

    @property
    def type(self) -> str:
        return self.action.type


def point_distance(
    pred: tuple[float, float], gold: tuple[float, float], screen: Screen | tuple[int, int]
) -> float:
    """Distance between two points as a fraction of the screen on each axis."""
    width, height = _size(screen)
    dx = (pred[0] - gold[0]) / width
    dy = (pred[1] - gold[1]) / height
    return math.hypot(dx, dy)


def in_bbox(x: float, y: float, bbox: Bounds) -> bool:
    """Inclusive on every edge: dataset boxes are drawn around the pixels they cover."""
    left, top, right, bottom = bbox
    return left <= x <= right and top <= y <= bottom


def normalise_text(text: str | None) -> str:
    """StaR A.2 TYPE rule: lower-case and trim."""
    return (text or "").strip().lower()


_WORD_RE = re.compile(r"[a-z0-9]+")
# Longest first; each pair is (suffix, replacement). Enough to fold tense and person
# ("opens"/"opened"/"opening"), plurals ("messages"/"message", "galleries"/"gallery")
# and agent nouns ("recorder"/"record") — what StaR A.2 asks of its stemmer.
_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("ational", "ate"), ("ization", "ize"), ("ingly", ""), ("edly", ""), ("ness", ""),
    ("ment", ""), ("ies", "y"), ("ied", "y"), ("ing", ""), ("er", ""), ("ed", ""),
    ("es", ""), ("ly", ""), ("s", ""),
)
_MIN_STEM = 3


def _strip_once(word: str) -> str:
    if word.endswith("ss") or len(word) <= _MIN_STEM:
        return word
    for suffix, replacement in _SUFFIXES:
        if not word.endswith(suffix):
            continue
        candidate = word[: -len(suffix)] + replacement
        if len(candidate) < _MIN_STEM:
            continue
        # "-es" is a plural only after a sibilant ("boxes", "watches"); "messages" is
        # "message" + "s", handled by the "-s" rule below.
        if suffix == "es" and not candidate.endswith(("s", "x", "z", "ch", "sh")):
            continue
        # "running" -> "runn" -> "run": undo the doubled consonant of -ing/-ed/-er.
        if suffix in ("ing", "ed", "er") and len(candidate) > _MIN_STEM \
                and candidate[-1] == candidate[-2] and candidate[-1] not in "lsz":
            candidate = candidate[:-1]
        return candidate
    return word


def stem(word: str) -> str:
    """A tiny suffix-stripping stemmer; never shortens a word below three letters.

    Applied until nothing changes (at most a few passes), so "recorders" and "recorder"
    both reach "record".
    """
    word = word.lower()
    for _ in range(3):
        shorter = _strip_once(word)
        if shorter == word:
            break
        word = shorter
    return word


def normalise_app(name: str | None) -> str:
    """Lower-case, split into words, stem each word, join with single spaces."""
    return " ".join(stem(word) for word in _WORD_RE.findall((name or "").lower()))


def app_names_match(pred: str | None, gold: str | None) -> bool:
    a, b = normalise_app(pred), normalise_app(gold)
    if not a or not b:
        return False
    return a in b or b in a


def actions_match(
    pred: Action | None,
    gold: GoldAction | Action,
    *,
    screen: Screen | tuple[int, int],
    toggle: bool = False,
) -> tuple[bool, bool]:
    """``(type_match, match)`` of a prediction against the gold action (StaR App. A.2).

    ``pred`` may be ``None`` (the backend produced no usable action): no match at all.
    ``screen`` is the size the coordinates of both actions are in.
    """
    if isinstance(gold, Action):
        gold = GoldAction(gold)
    if pred is None:
        return False, False
    if pred.type != gold.type:
        return False, False
    kind = gold.type
    if kind in POINT_TYPES:
        return True, click_matches(pred, gold, screen=screen, toggle=toggle)
    if kind == TYPE:
        return True, normalise_text(pred.text) == normalise_text(gold.action.text)
    if kind == OPENAPP:
        return True, app_names_match(pred.app, gold.action.app)
    if kind == SCROLL:
        return True, pred.direction is not None and pred.direction == gold.action.direction
    return True, True


def click_matches(
    pred: Action, gold: GoldAction, *, screen: Screen | tuple[int, int], toggle: bool = False
) -> bool:
    """The CLICK rule alone: inside the gold box, or near enough to the gold point."""
    if pred.x is None or pred.y is None or gold.action.x is None or gold.action.y is None:
        return False
    if gold.bbox is not None and in_bbox(pred.x, pred.y, gold.bbox):
        return True
    limit = TOGGLE_CLICK_DISTANCE if toggle else CLICK_DISTANCE
    # A hair of tolerance: points are integers, and "within 4%" must not fail on rounding.
    return point_distance((pred.x, pred.y), (gold.action.x, gold.action.y), screen) <= limit + 1e-9


def _size(screen: Screen | tuple[int, int]) -> tuple[int, int]:
    if isinstance(screen, Screen):
        width, height = screen.width, screen.height
    else:
        width, height = int(screen[0]), int(screen[1])
    if width <= 0 or height <= 0:
        raise ValueError(f"screen size must be positive, got {width}x{height}")
    return width, height


__all__ = [
    "CLICK_DISTANCE", "TOGGLE_CLICK_DISTANCE", "GoldAction",
    "actions_match", "app_names_match", "click_matches", "in_bbox", "normalise_app",
    "normalise_text", "point_distance", "stem",
]
