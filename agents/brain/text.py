"""Words as Kairos compares them: lower-cased, synonyms folded, stemmed, stopwords out.

Pure Python (no Django). The recommender (:mod:`agents.brain.recommend`), the planner, the
heuristic backend and the evidence every backend states all compare a goal's words with
a screen's through :func:`tokens`, so "Wi-Fi", "WLAN" and "wifi" are one word to all of
them.
"""
from __future__ import annotations

import re

__all__ = ["STOPWORDS", "normalise_text", "tokens"]


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
