"""Parameters of an instruction, and binding them (issue 25; LEARNING lesson 2).

Pure Python. What a person typed or tapped that came from the instruction is stored as
*that part of the instruction* — a slot — never as the literal: "send Alex $40" stores
"type the instruction's number" and "tap the row the instruction names", so "transfer $75
to Jordan" binds 75 and Jordan. Where a slot cannot be bound from the new instruction
(no number, two numbers where one was, no row named), the memory does not propose: it
asks (AWM's "{variables}", browser-use's variable detection, Mobile-Agent-E's
``arguments_map``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

NUMBER = "number"
NAME = "name"

_NUMBER_RE = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])\d+(?:\.\d+)?")
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+(?:\.\d+)?")
# Words that carry no intent; "on", "off", "not" are NOT here: they decide what to do.
STOPWORDS = frozenset(
    "a an the my me i to of for in at by from with and or please can could you would "
    "is it its be this that these those now just so some any our your we us".split())
# Everyday verbs of asking that say nothing about which thing is wanted ("turn", "set",
# "make"): general English, not any app's wording. With the direction words they are left
# out of the intent words (the direction is compared on its own, see intent_similarity).
GENERIC_VERBS = frozenset(
    "turn switch set make change put get go do want need let like".split())
_ON = frozenset({"on", "enable", "activate", "start"})
_OFF = frozenset({"off", "disable", "deactivate", "stop"})


def norm(word: str) -> str:
    """A word as compared: lower case, one apostrophe, no hyphen ("Wi-Fi" is "wifi",
    "e-mail" is "email": general English spelling, not any app's wording)."""
    return word.lower().replace("’", "'").replace("-", "")


def words(text: str) -> list[str]:
    """Lower-cased words and numbers, unstemmed ("heating" is not "heat")."""
    return [norm(w) for w in _WORD_RE.findall(text or "")]


def numbers(text: str) -> list[str]:
    """The instruction's numbers in order, thousands separators dropped ("$2,500" → 2500)."""
    return list(_numbers(text or ""))


@lru_cache(maxsize=4096)
def _numbers(text: str) -> tuple[str, ...]:
    return tuple(m.group(0).replace(",", "") for m in _NUMBER_RE.finditer(text))


def names(text: str) -> list[str]:
    """Capitalised words inside a sentence (not its first word): people and places the
    instruction names ("send Alex $40" → Alex)."""
    return list(_names(text or ""))


@lru_cache(maxsize=4096)
def _names(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for sentence in re.split(r"[.!?;:]\s+", text):
        tokens = re.findall(r"[A-Za-z][A-Za-z'-]*", sentence)
        for token in tokens[1:]:
            if token[0].isupper() and not token.isupper() and token.lower() not in STOPWORDS:
                out.append(token)
    return tuple(out)


@lru_cache(maxsize=4096)
def direction(text: str) -> str | None:
    """"on", "off" or None: which way the instruction wants a thing switched."""
    ws = set(words(text))
    on, off = bool(ws & _ON), bool(ws & _OFF)
    if on == off:
        return None
    return "on" if on else "off"


_ANSWERS = re.compile(r"\s*\([^()]*\)\s*$")


def asked_for(goal: str) -> str:
    """The instruction without the answers to clarifying questions that a goal carries at
    its end ("… (Less sweet; No preference)"): what was asked for, for comparing intents."""
    return _ANSWERS.sub("", goal or "") or (goal or "")


@lru_cache(maxsize=4096)
def intent_words(text: str) -> frozenset[str]:
    """The instruction's words without its parameters and stopwords: what is wanted, not
    for whom or how much (answers to clarifying questions left out)."""
    text = asked_for(text)
    params = {norm(n) for n in names(text)} | set(numbers(text))
    return frozenset(w for w in words(text) if w not in STOPWORDS and w not in params
                     and w not in GENERIC_VERBS and w not in _ON and w not in _OFF
                     and not w.replace(".", "").isdigit())


@lru_cache(maxsize=65536)
def intent_similarity(a: str, b: str) -> float:
    """Jaccard similarity of two instructions' intent words (answers to clarifying
    questions left out); 0 when they want opposite directions ("turn on" against "turn
    off"), halved when only one has a direction."""
    a, b = asked_for(a), asked_for(b)
    da, db = direction(a), direction(b)
    if da is not None and db is not None and da != db:
        return 0.0
    # one switches something on or off, the other does not: probably not the same wish
    return _word_similarity(a, b) * (0.5 if (da is None) != (db is None) else 1.0)


def _word_similarity(a: str, b: str) -> float:
    wa, wb = intent_words(a), intent_words(b)
    # A capitalised word is a parameter ("send Alex …") unless the other instruction names
    # it too, capitalised or not: then it is what is wanted ("Turn on Wi-Fi" and "switch
    # the wifi on" both want the wifi).
    na, nb = {norm(n) for n in names(a)}, {norm(n) for n in names(b)}
    wa, wb = wa | (na & (nb | wb)), wb | (nb & (na | wa))
    union = len(wa | wb)
    return 1.0 if not union else len(wa & wb) / union


@lru_cache(maxsize=4096)
def shape(text: str) -> tuple[int, int]:
    """How many numbers and names the instruction carries."""
    text = asked_for(text)
    return len(numbers(text)), len(names(text))


@dataclass(frozen=True)
class TextTemplate:
    """Typed text as literal pieces and slots: ``("lit", "Hi ")``, ``("slot", "number", 0)``."""

    parts: tuple[tuple, ...]

    @property
    def slots(self) -> list[tuple[str, int]]:
        return [(p[1], int(p[2])) for p in self.parts if p[0] == "slot"]

    def bind(self, instruction: str) -> str | None:
        values = {NUMBER: numbers(instruction), NAME: names(instruction)}
        out = []
        for part in self.parts:
            if part[0] == "lit":
                out.append(part[1])
                continue
            kind, index = part[1], int(part[2])
            learned_count = part[3] if len(part) > 3 else None
            found = values[kind]
            if learned_count is not None and len(found) != learned_count:
                return None  # two amounts where one was: which is which is a guess
            if index >= len(found):
                return None
            out.append(found[index])
        return "".join(out)

    def to_json(self) -> list:
        return [list(p) for p in self.parts]

    @classmethod
    def from_json(cls, data: list) -> "TextTemplate":
        return cls(tuple(tuple(p) for p in data))


def text_template(text: str, instruction: str) -> TextTemplate:
    """``text`` as a template over ``instruction``'s numbers and names."""
    nums, nms = numbers(instruction), names(instruction)
    stripped = text.strip()
    plain = stripped.replace(",", "")
    if plain in nums:
        return TextTemplate((("slot", NUMBER, nums.index(plain), len(nums)),))
    for i, name in enumerate(nms):
        if stripped.lower() == name.lower():
            return TextTemplate((("slot", NAME, i, len(nms)),))
    parts: list[tuple] = []
    pattern = "|".join(re.escape(v) for v in sorted(set(nums + nms), key=len, reverse=True))
    if pattern:
        last = 0
        for m in re.finditer(rf"(?<![\w]){pattern}(?![\w])", text):
            if m.start() > last:
                parts.append(("lit", text[last:m.start()]))
            value = m.group(0)
            kind, index, count = ((NUMBER, nums.index(value), len(nums)) if value in nums
                                  else (NAME, nms.index(value), len(nms)))
            parts.append(("slot", kind, index, count))
            last = m.end()
        if last < len(text):
            parts.append(("lit", text[last:]))
        if any(p[0] == "slot" for p in parts):
            return TextTemplate(tuple(parts))
    return TextTemplate((("lit", text),))


# Days and months as people write them and as screens show them ("friday", "Fri"; "4th",
# "4"): general English, not any app's wording.
_CALENDAR = {
    **{d: d[:3] for d in ("monday", "tuesday", "wednesday", "thursday", "friday",
                          "saturday", "sunday")},
    "tues": "tue", "thur": "thu", "thurs": "thu", "weds": "wed",
    **{m: m[:3] for m in ("january", "february", "march", "april", "june", "july",
                          "august", "september", "october", "november", "december")},
    "sept": "sep",
}
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")


def name_word(word: str) -> str:
    """A word as compared when an instruction names an on-screen option: its calendar
    form ("friday" → "fri", "4th" → "4") or itself."""
    m = _ORDINAL.match(word)
    if m:
        return m.group(1)
    return _CALENDAR.get(word, word)


def _name_words(text: str) -> set[str]:
    return {name_word(w) for w in words(text) if w not in STOPWORDS}


def singled_out(labels: list[str], instruction: str,
                checked: list[bool | None] | None = None) -> int | None:
    """The index of the one label among siblings (list rows, options) that the instruction
    names, or None (none, or several alike).

    A label is named by all its words (:func:`label_named`) or by the words only it has
    among its siblings ("my hiking boots" names "Hiking boots - Trailhead Outfitters";
    "friday" names "Fri Dec 4" among the other days). Where two are named equally and one
    of them is the option already chosen (``checked``), the instruction names where it is
    and where it should go ("it's coming wednesday, move it to friday"): the other one."""
    if len(labels) < 2:
        return None
    top = named_equally(labels, instruction)
    if len(top) > 1 and checked is not None:
        top = [i for i in top if not checked[i]] or top
    return top[0] if len(top) == 1 else None


def named_equally(labels: list[str], instruction: str) -> list[int]:
    """The indexes of the labels the instruction names best, all equally (see
    :func:`singled_out`); empty when it names none."""
    said = _name_words(instruction) | set(numbers(instruction))
    sets = [_name_words(label) for label in labels]
    scores = []
    for i, own in enumerate(sets):
        others = set().union(*(sets[:i] + sets[i + 1:]))
        full = bool(own) and own <= said
        scores.append((2 if full else 0, len((own - others) & said)))
    best = max(scores, default=(0, 0))
    if best == (0, 0):
        return []
    return [i for i, score in enumerate(scores) if score == best]


def label_named(label: str, instruction: str) -> bool:
    """Does the instruction name this element (all of its words, ignoring case and %)?"""
    label_words = _name_words(label)
    if not label_words:
        return False
    return label_words <= (_name_words(instruction) | set(numbers(instruction)))
