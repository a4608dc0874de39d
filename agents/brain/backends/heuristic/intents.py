"""Intents: what each sub-goal of the plan asks for, and in which app.

The instruction is split into sub-goals by :func:`agents.brain.planning.split_goal` (D-PoT);
:func:`parse_intent` reads each one as opening an app, setting a toggle, typing text,
picking an option or clicking something, and :func:`app_match` names the app it happens
in — by name, or by the words the installed apps describe themselves with.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from agents.brain.backends.base import StepContext
from agents.brain.backends.evidence import app_mention
from agents.brain.text import tokens
from devices.protocol import AppInfo


_TURN = r"(?:t(?:ur|ru)n|switch|toggle|set|put)"
_TOGGLE_PATTERNS: tuple[tuple[re.Pattern[str], int, int], ...] = (
    # (pattern, group of the on/off word, group of the target)
    (re.compile(rf"\b{_TURN}\s+(on|off|of)\s+(?:the\s+)?(.+)", re.I), 1, 2),  # "turn of": a typo
    (re.compile(rf"\b(?!put\b){_TURN}\s+(?:the\s+)?(.+?)\s+(on|off)\b", re.I), 2, 1),
    # "put the wifi on", but "put 20 bucks on mila's lunch card" puts an amount somewhere
    # and "put him on her pickup list" a person on a list
    (re.compile(r"\bput\s+(?:the\s+)?(?!\$\d|\d[\d.,]*\s*(?:k|bucks|dollars|usd|gb|gigs|mb|"
                r"minutes|mins|hours|hrs|%|percent|points|credits)\b)(.+?)\s+(on|off)\b"
                r"(?!\s+(?:my|his|her|their|our|your|the|a|an|this|that|\w+'s)\b)", re.I), 2, 1),
    (re.compile(r"\b(enable|activate|disable|deactivate|unmute|mute)\s+(?:the\s+)?(.+)", re.I), 1, 2),
    # "check out" is paying, not ticking a box.
    (re.compile(r"\b(check|uncheck|tick|untick)\s+(?!out\b)(?:the\s+)?(.+)", re.I), 1, 2),
)
_ON_WORDS = {"on", "enable", "activate", "check", "tick", "mute"}
# Toggles asked for without an on/off word: (pattern, the state wanted, target group).
_PHONE = r"(?:my\s+|the\s+)?(?:phone|device|mobile|cell)"
_STATE_TOGGLES: tuple[tuple[re.Pattern[str], bool, int], ...] = (
    # "put my phone in aeroplane mode", "set the phone to silent mode"
    (re.compile(rf"\b(?:put|set|switch|turn)\s+{_PHONE}\s+(?:in|into|on|to)\s+(?:the\s+)?(.+)", re.I), True, 1),
    # "take the phone off flight mode", "get out of airplane mode"
    (re.compile(rf"\btake\s+{_PHONE}\s+(?:off|out\s+of)\s+(?:the\s+)?(.+)", re.I), False, 1),
    (re.compile(r"\b(?:get|come)\s+(?:me\s+)?out\s+of\s+(?:the\s+)?(.+)", re.I), False, 1),
    # "take do not disturb off", "kill the wifi"
    (re.compile(r"\btake\s+(?:the\s+)?(.+?)\s+off\b", re.I), False, 1),
    (re.compile(r"\bkill\s+(?:the\s+|my\s+)?(.+)", re.I), False, 1),
    # "I don't need wifi right now": a short thing not wanted is a thing to switch off
    (re.compile(r"\b(?:i|we)\s+(?:do\s*n[o']?t|dont)\s+(?:need|want)\s+(?:the\s+|my\s+|any\s+)?"
                r"((?:[\w-]+\s*){1,3}?)(?:\s+(?:right\s+)?now|\s+any\s*more|\s+on)?\s*$", re.I), False, 1),
)
# Words around a toggle's name that do not name it ("flight mode please").
_TARGET_TAIL_RE = re.compile(
    r"(?:\s*,.*|\s+(?:please|pls|plz|now|right\s+now|for\s+me|thanks|thank\s+you|asap|too|"
    r"as\s+well|while\s+you'?re\s+at\s+it))+\s*$", re.I)
_TEXT_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\b(?:saying|says|that says|with (?:the )?(?:text|message|note|body)|message)\s*[:,]?\s*[\"'“‘](.+?)[\"'”’](?:\s|$|[.,;!?])", re.I),
    re.compile(r"[\"“](.+?)[\"”]"),
    re.compile(r"(?:^|\s)'(.+?)'(?:\s|$|[.,;!?])"),
    re.compile(r"‘(.+?)’"),
    re.compile(r"\b(?:search|look up|look for)\s+(?:(?:in\s+)?the\s+\w+\s+)?(?:for\s+)?(.+?)(?:\s+(?:in|on|using|with)\s+(?:the\s+)?\w+(?:\s+app)?)?(?=\s+and\s|\s*,|\s*$)", re.I),
    re.compile(r"\b(?:saying|says|that says)\s*:?\s*(.+?)\s*$", re.I),
    re.compile(r"^\s*(?:text|message|tell|send|reply to|write to)\s+[^:\"']{1,40}?:\s*(.+?)\s*$", re.I),
    # "Text Sam that I'm running late": the message is what follows "that".
    re.compile(r"^\s*(?:text|message|tell|remind)\s+(?!me\b)(?:(?!\band\b)[^:\"']){1,40}?\s+that\s+(.+?)\s*$", re.I),
    re.compile(r"\b(?:type|enter|write|input)\s+(.+?)(?:\s+(?:in|into)\s+(?:the\s+)?.+)?\s*$", re.I),
    re.compile(r"\b(?:named|called|titled|labell?ed)\s+(.+?)\s*$", re.I),
    re.compile(r"\b(?:directions|route|navigate|way)\s+(?:to|for)\s+(?:the\s+)?(.+?)(?:\s+(?:in|on|using|with|by)\s+.+)?\s*$", re.I),
)
_OPEN_RE = re.compile(r"^\s*(?:please\s+)?(?:open|launch|start|run|go to)\s+(?:the\s+|my\s+)?(.+?)(?:\s+app(?:lication)?)?\s*$", re.I)
_SELECT_RE = re.compile(r"\b(?:select|choose|pick|set)\s+(?:the\s+)?(.+)", re.I)


@dataclass
class Intent:
    """What one sub-goal asks for."""

    text: str
    kind: str  # "open_app" | "toggle" | "type" | "select" | "click"
    target: str = ""  # words naming the element (or app)
    desired: bool | None = None  # toggles: the state the goal wants
    typed: str | None = None  # text to type
    app: AppInfo | None = None  # the app the sub-goal happens in, when known
    app_named: bool = False  # the app is named in the words (not guessed from descriptions)
    plan_apps: frozenset[str] = frozenset()  # packages of the other sub-goals' apps


def extract_text(goal: str) -> str | None:
    """The text an instruction wants typed: quoted text, "search for X", "saying X"…"""
    for pattern in _TEXT_PATTERNS:
        match = pattern.search(goal)
        if match:
            text = match.group(1).strip().strip("\"'“”‘’").strip()
            text = re.sub(r"[.!?]+$", "", text) if pattern.pattern.startswith(r"\b") else text
            if text:
                return text
    return None


# Words that point to a kind of app when the goal names none ("Get me an iced americano").
_APP_CATEGORIES: dict[str, frozenset[str]] = {
    "coffee": frozenset("latte americano cappuccino mocha espresso macchiato flat".split()),
    "alarm": frozenset("wake alarm".split()),
    "message": frozenset("text chat say tell reply".split()),
    "map": frozenset("direction route way place nearby restaurant".split()),
    "shop": frozenset("buy cart product purchase".split()),
}


def app_match(words: str, apps: tuple[AppInfo, ...]) -> tuple[AppInfo | None, bool, float]:
    """The app ``words`` name (strongly, by name) or describe (weakly), its score.

    Returns (app, named, score). Named: the app's name occurs as a whole word.
    """
    lowered = f" {normalise_words(words)} "
    # (Whether the name is said as a name or as an everyday word is evidence for the
    # calibrator, ``app_mention``; reading "a setting" as no app here was tried and made
    # the agent worse on apps it had never seen — docs/evaluation.md.)
    named = [
        app for app in apps
        if app.name and f" {normalise_words(app.name)} " in lowered
    ]
    if named:
        # Two apps named: "keyring settings" are Keyring's own settings — a name right
        # after another app's name is a page of that app —, then the one said as a name
        # ("in Settings") before one said as an everyday word, then the longer name.
        def owned(app: AppInfo) -> bool:
            return any(f" {normalise_words(other.name)} {normalise_words(app.name)} " in lowered
                       for other in others if other is not app)
        others = tuple(named)
        best = min(named, key=lambda a: (owned(a), app_mention(words, a.name) != "name",
                                         -len(a.name)))
        return best, True, 1.0
    goal_toks = set(tokens(words))
    goal_toks |= {category for category, members in _APP_CATEGORIES.items() if goal_toks & members}
    best: tuple[float, AppInfo | None] = (0.0, None)
    second = 0.0
    app_tokens = {app.package: set(tokens(f"{app.name} {app.description}")) for app in apps}
    # A word several apps describe themselves with ("search": Maps and Shop) tells them
    # apart less than one only an app uses ("email"): each shared word counts 1/apps.
    spread: dict[str, int] = {}
    for toks in app_tokens.values():
        for tok in toks:
            spread[tok] = spread.get(tok, 0) + 1
    for app in apps:
        app_toks = app_tokens[app.package]
        if not app_toks:
            continue
        overlap = sum(1 / spread[t] for t in goal_toks & app_toks) / max(1, min(len(goal_toks), 4))
        if overlap > best[0]:
            second = best[0]
            best = (overlap, app)
        elif overlap > second:
            second = overlap
    if best[1] is None or best[0] <= 0:
        return None, False, 0.0
    # Strength is the margin over the next app: a unique fit counts even if loose.
    return best[1], False, 1.0 if second == 0 else best[0] - second


def normalise_words(text: str) -> str:
    return " ".join(tokens(text, keep_stopwords=True))


def parse_intent(sub_goal: str, apps: tuple[AppInfo, ...] = ()) -> Intent:
    """Classify one sub-goal: open an app, set a toggle, type, pick an option, or click."""
    app, named, _ = app_match(sub_goal, apps)
    open_match = _OPEN_RE.match(sub_goal)
    if open_match:
        target = open_match.group(1)
        opened, opened_named, _ = app_match(target, apps)
        if opened is not None and opened_named:
            return Intent(sub_goal, "open_app", target=opened.name, app=opened, app_named=True)
    for pattern, desired, target_group in _STATE_TOGGLES:
        match = pattern.search(sub_goal)
        if match:
            target = _TARGET_TAIL_RE.sub("", match.group(target_group))
            target = _strip_app_words(target, app if named else None)
            if target:
                return Intent(sub_goal, "toggle", target=target, desired=desired,
                              app=app, app_named=named)
    for pattern, state_group, target_group in _TOGGLE_PATTERNS:
        match = pattern.search(sub_goal)
        if match:
            word = match.group(state_group).lower()
            # what follows a colon is a value or a message, not the switch's name
            target = re.split(r"(?<!\d):(?!\d)", match.group(target_group))[0]
            target = re.sub(r"\s+with\s*$", "", target, flags=re.I)
            target = _strip_app_words(target, app if named else None)
            if target:
                return Intent(
                    sub_goal, "toggle", target=target, desired=word in _ON_WORDS,
                    app=app, app_named=named,
                )
    typed = extract_text(sub_goal)
    if typed:
        target = sub_goal.replace(typed, " ")
        return Intent(sub_goal, "type", target=_strip_app_words(target, app if named else None),
                      typed=typed, app=app, app_named=named)
    select = _SELECT_RE.search(sub_goal)
    if select:
        return Intent(sub_goal, "select", target=_strip_app_words(select.group(1), app if named else None),
                      app=app, app_named=named)
    return Intent(sub_goal, "click", target=_strip_app_words(sub_goal, app if named else None),
                  app=app, app_named=named)


def _strip_app_words(text: str, app: AppInfo | None) -> str:
    text = text.strip().rstrip(".!?")
    if app is not None:
        text = re.sub(
            rf"\s*\b(?:in|on|from|using|with|via)?\s*(?:the\s+)?{re.escape(app.name)}(?:'s)?(?:\s+app)?(?:'s)?\b",
            " ", text, flags=re.I,
        )
    text = re.sub(r"\b(?:in|on)\s+(?:the\s+)?settings?\b$", " ", text, flags=re.I)
    return " ".join(text.split())


def inherit_apps(intents: list[Intent], ctx: StepContext) -> None:
    """A sub-goal that names no app happens in the app the previous sub-goal named
    ("Open Settings, then turn on Wi-Fi"); failing that, the app its words describe."""
    previous: Intent | None = None
    for intent in intents:
        if not intent.app_named and previous is not None and previous.app_named:
            intent.app, intent.app_named = previous.app, True
        previous = intent
    for intent in intents:
        intent.plan_apps = frozenset(other.app.package for other in intents
                                     if other is not intent and other.app is not None)


def capitalised_names(text: str) -> set[str]:
    """Words ``text`` capitalises where a sentence does not start: names ("Sam", "Maps")."""
    out: set[str] = set()
    for sentence in re.split(r"[.!?:;]\s+", text):
        words = re.findall(r"[\w'’-]+", sentence)
        out.update(tokens(" ".join(w for w in words[1:] if w[:1].isupper())))
    return {word for word in out if len(word) > 1}  # not the "m" of "I'm"


def verb_forms(verb: str) -> set[str]:
    """How a label states that ``verb`` was done: star → starred, pin → pinned, save →
    saved, follow → following / follows (empty for words too short to tell)."""
    if len(verb) < 3:
        return set()
    return {verb + "ed", verb + "d", verb + verb[-1] + "ed", verb + "ing", verb + "s"}
