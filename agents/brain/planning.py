"""Dynamic planning helpers (D-PoT): compact history, goal splitting, goal references.

Pure Python (no Django). D-PoT (App. A.1) re-plans every turn from the goal, the current
screen and a *compact* execution history — one line per executed step — instead of the
full ReAct dialogue of thoughts, actions and observations; D-PoT Table 1 reports the same
accuracy at about a quarter of ReAct's tokens. :func:`react_history` renders the ReAct
form of the same episode so the two can be compared (``bench tokens``).

Planning initialisation also takes the goals of the two most similar earlier episodes as
references (D-PoT §4, sentence embeddings); :class:`ReferenceIndex` ranks earlier goals
by TF-IDF cosine, or by any embedding function it is given (the product passes
:func:`agents.brain.embeddings.load_embedder`'s local model when one is installed).
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

from agents.brain.backends.base import HistoryEntry
from agents.brain.text import tokens

__all__ = [
    "compact_history",
    "react_history",
    "describe_action",
    "split_goal",
    "ReferenceIndex",
    "estimate_tokens",
    "ACTION_VERBS",
]


def describe_action(action: dict[str, Any]) -> str:
    """Plain words for an action dict: ``CLICK 'Wi-Fi'``, ``TYPE "hello"``, ``SCROLL UP``."""
    kind = str(action.get("type", "?")).upper()
    element = action.get("element")
    if kind in ("CLICK", "LONG_CLICK"):
        if element:
            return f"{kind} '{element}'"
        return f"{kind} at ({action.get('x')}, {action.get('y')})"
    if kind == "TYPE":
        return f'TYPE "{action.get("text", "")}"'
    if kind == "SCROLL":
        return f"SCROLL {action.get('direction', '')}".strip()
    if kind == "OPENAPP":
        return f"OPENAPP {action.get('app', '')}".strip()
    return kind


def _entry_text(entry: HistoryEntry) -> str:
    text = entry.summary or describe_action(entry.action)
    if entry.by == "operator":
        text += " [operator]"
    if not entry.screen_changed:
        text += " (no change)"
    return text


def compact_history(history: Sequence[HistoryEntry]) -> str:
    """The D-PoT execution history: ``step 1: CLICK 'Wi-Fi'`` one line per executed step.

    Steps are numbered from 1 in the order given. Operator steps are marked, and a step
    whose screen did not change says so — the two facts a re-planner needs to avoid
    repeating a failed action.
    """
    return "\n".join(f"step {i}: {_entry_text(entry)}" for i, entry in enumerate(history, 1))


def react_history(
    history: Sequence[HistoryEntry],
    thoughts: Sequence[str] | None = None,
    observations: Sequence[str] | None = None,
) -> str:
    """The same episode as a full ReAct dialogue (Thought / Action / Observation per turn).

    ``thoughts[i]`` and ``observations[i]`` belong to ``history[i]`` (the observation is
    the screen the step was taken on, e.g. a :func:`agents.brain.recommend.format_elements`
    list); missing ones are left out. This is what ReAct with unlimited history length
    (D-PoT Table 1, "∞") feeds the model every turn.
    """
    thoughts = list(thoughts or [])
    observations = list(observations or [])
    blocks: list[str] = []
    for i, entry in enumerate(history):
        lines = [f"Turn {i + 1}:"]
        if i < len(observations) and observations[i]:
            lines.append(f"Observation: {observations[i]}")
        if i < len(thoughts) and thoughts[i]:
            lines.append(f"Thought: {thoughts[i]}")
        lines.append(f"Action: {_entry_text(entry)}")
        lines.append(f"Action input: {entry.action}")
        lines.append(f"Result: {'the screen changed' if entry.screen_changed else 'the screen did not change'}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


_TOKEN_RE = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")


def estimate_tokens(text: str) -> int:
    """An offline token count close to BPE tokenisers on English UI text.

    Words count one token per four letters (rounded up), digit runs one per three,
    punctuation one each — within ~15% of cl100k on prompts like ours, and needs no
    download (tiktoken fetches its tables from the internet on first use).
    """
    count = 0
    for piece in _TOKEN_RE.findall(text or ""):
        if piece[0].isalpha():
            count += max(1, math.ceil(len(piece) / 4)) if len(piece) > 4 else 1
        elif piece[0].isdigit():
            count += max(1, math.ceil(len(piece) / 3))
        else:
            count += 1
    return count


# --- goal splitting ----------------------------------------------------------------

ACTION_VERBS: frozenset[str] = frozenset(
    """open launch start go navigate turn switch toggle enable disable activate deactivate
    set change select choose pick tap click press type enter write search find look send
    message text call add remove delete create make order buy book share save play pause
    stop check uncheck mark close exit return install uninstall update install clear
    reply forward scroll swipe show view display increase decrease lower raise mute
    unmute record take put move copy paste rename sort filter log sign pin unpin star
    archive block unblock cancel pay rate follow unfollow download remind
    lock unlock approve decline accept reject reveal extend renew refill reorder freeze
    unfreeze subscribe unsubscribe join invite schedule reschedule edit upload attach
    dismiss snooze reserve rent email transfer sell resell refund upgrade downgrade redeem
    withdraw donate leave""".split()
)

# Single quotes only around words: the apostrophes of "it's" and "o'clock" quote nothing.
_QUOTE_RE = re.compile(r"\"[^\"]*\"|(?<![A-Za-z])'[^']*'(?![A-Za-z])|“[^”]*”|‘[^’]*’")
# "next" orders steps only before a comma ("next, …"): "next time" and "next Friday" do not.
_THEN_RE = re.compile(r"\s*(?:,|;|\.)?\s*\b(?:and\s+then|then|after\s+that|afterwards|next(?=\s*,))\b\s*,?\s*", re.I)
_TOGGLE_HEAD_RE = re.compile(r"^\s*((?:turn|switch|toggle)\s+(?:on|off)|enable|disable|activate|deactivate)\b", re.I)


# "after you turn …", "once you've set …", "before texting …", "after having booked …":
# a clause that says which step comes first. Group 1: the connector; group 2: "you" …
# (then a plain or past verb may follow) or nothing (then only a gerund); group 3: the verb.
_TEMPORAL_RE = re.compile(
    r"\b(after|once|before)\s+(you(?:['\u2019]ve|\s+have)?\s+|having\s+)?([A-Za-z]+)", re.I)


def _verb_base(word: str) -> str | None:
    """The action verb of "turning", "saving", "setting", "paused" (None: not one)."""
    word = word.lower()
    if word in ACTION_VERBS:
        return word
    for suffix in ("ing", "ed"):
        if word.endswith(suffix):
            stem = word[:-len(suffix)]
            doubled = stem[:-1] if len(stem) > 2 and stem[-1] == stem[-2] else ""
            for candidate in (stem, stem + "e", doubled):
                if candidate in ACTION_VERBS:
                    return candidate
    return None


def _temporal_verb(match: re.Match[str]) -> str | None:
    """The base verb of a temporal clause, or None where "after" orders no step ("after
    lunch", "after you land"): without "you" / "having" only a gerund counts."""
    verb = match.group(3)
    if not match.group(2) and not verb.lower().endswith("ing"):
        return None
    return _verb_base(verb)


def _as_request(match: re.Match[str], text: str) -> str:
    """"after saving the draft" → "save the draft"."""
    return f"{_temporal_verb(match)}{text[match.end():]}".strip(" ,")


def _in_time_order(parts: list[str]) -> list[str]:
    """Sub-goals put in the order "after" / "once" / "before" say: "call Mia after booking
    the table" → ["book the table", "call Mia"]; "before you text Sam, turn the hotspot
    off" → ["turn the hotspot off", "text Sam"]."""
    out: list[str] = []
    waiting: str | None = None  # a leading "before Y": Y comes after the next step
    for n, part in enumerate(parts):
        match = _TEMPORAL_RE.search(part)
        if match is None or _temporal_verb(match) is None:
            steps = [part]
        elif not part[:match.start()].strip(" ,"):  # the clause opens the part
            clause = _as_request(match, part)
            first = match.group(1).lower() != "before"
            if not first and n + 1 < len(parts):
                waiting = clause
                continue
            if first and out and n == len(parts) - 1:
                out.insert(len(out) - 1, clause)  # "X, after Y": Y before X
                continue
            steps = [clause]
        else:
            main, clause = part[:match.start()].strip(" ,"), _as_request(match, part)
            steps = [main, clause] if match.group(1).lower() == "before" else [clause, main]
        out.extend(steps)
        if waiting is not None:
            out.append(waiting)
            waiting = None
    if waiting is not None:
        out.append(waiting)
    return out


def _with_shared_toggle(previous: str, piece: str) -> str | None:
    """``piece`` with the toggle verb of ``previous`` when it is a bare noun that shares it
    ("turn on Wi-Fi and Bluetooth" → "turn on Bluetooth"), else None."""
    head = _TOGGLE_HEAD_RE.match(previous)
    if head and piece.strip() and len(piece.split()) <= 3 and "\x00" not in piece:
        return f"{head.group(1)} {piece.strip()}"
    return None


def _first_word(text: str) -> str:
    match = re.match(r"\s*([A-Za-z]+)", text)
    return match.group(1).lower() if match else ""


def split_goal(instruction: str) -> list[str]:
    """Sub-goals of an instruction, in order.

    Splits on "then" / "and then" / "after that", on ";" and sentence ends, and on "," or
    "and" where what follows starts with an action verb ("Turn off WiFi, then enable
    bluetooth" → ["Turn off WiFi", "enable bluetooth"]; "order a latte with milk and
    sugar" stays whole). A toggle verb is shared over a bare "and" list: "turn on Wi-Fi
    and Bluetooth" → ["turn on Wi-Fi", "turn on Bluetooth"]. Quoted text is never split.
    """
    if not instruction or not instruction.strip():
        return []
    # Protect quoted text: replace it by placeholders, restore after splitting.
    quoted: list[str] = []

    def hide(match: re.Match[str]) -> str:
        quoted.append(match.group(0))
        return f"\x00{len(quoted) - 1}\x00"

    text = _QUOTE_RE.sub(hide, instruction.strip())
    # A message introduced by a colon runs to the end ("text Alex: In a meeting, call
    # you later. Call me!"), or to a sentence end where "and" / "then" … brings another
    # request ("…: Away until Jan 2. and put the phone on do not disturb"); a colon
    # between digits is a time ("9:00").
    def hide_message(match: re.Match[str]) -> str:
        message, rest = match.group(1), ""
        # "…: report attached, after saving the draft": a step, not the message's words.
        clause = _TEMPORAL_RE.search(message)
        if clause and message[:clause.start()].rstrip().endswith(",") and _temporal_verb(clause):
            message, rest = message[:clause.start()].rstrip(" ,"), " ; " + message[clause.start():]
        for end in re.finditer(r"(?<!\d)[.!?]+\s+(?=(?:and|then|also|after\s+that|afterwards)\b)",
                               message, flags=re.I):
            if _is_request(re.split(r"[.!?]", message[end.end():], maxsplit=1)[0]):
                message, rest = message[:end.start() + 1], " ; " + message[end.end():]
                break
        quoted.append(message)
        return f" \x00{len(quoted) - 1}\x00{rest}"

    text = re.sub(r"(?<=[^\d\s]:)\s*(.+)$", hide_message, text, count=1)
    # Sentences with their ends: "." (not "9.30"), "?" or "!".
    pieces = re.split(r"((?<!\d)\.(?=\s|$)|[?!]+(?=\s|$))", text)
    sentences = [(chunk, end) for chunk, end in zip(pieces[0::2], pieces[1::2] + [""])
                 if chunk.strip(" ,;")]
    asks = [n for n, (chunk, _) in enumerate(sentences) if _is_request(chunk)]
    if asks:
        # "We've landed! Take the phone off flight mode please. Thanks!": chat around a
        # request is not a sub-goal — a short exclamation, or anything after the last
        # request. A longer sentence before one may say where ("it's in my notes"): kept.
        sentences = [(chunk, end) for n, (chunk, end) in enumerate(sentences)
                     if n in asks or (n < asks[-1] and len(chunk.split()) > 3)]
    # A "." ends a sub-goal; a question or an exclamation runs on into the next sentence
    # ("is there a setting for that? switch it on").
    chunks: list[str] = []
    pending = ""
    for chunk, end in sentences:
        pending = f"{pending} {chunk.strip()}" if pending else chunk
        if end != "." and end:
            pending += end[0]
            continue
        chunks.append(pending)
        pending = ""
    if pending:
        chunks.append(pending.rstrip("?!"))
    parts: list[str] = []
    for chunk in ";".join(chunks).split(";"):
        for piece in _THEN_RE.split(chunk):
            shared = _with_shared_toggle(parts[-1], piece) if parts else None
            if shared and not _is_request(piece):
                piece = shared  # "turn off wifi and then bluetooth": over "then" too
            parts.extend(_split_on_verbs(piece))
    parts = _in_time_order(parts)
    if any(_is_request(part) for part in parts):
        # "maps can't find where I am, turn my location back on": the complaint says why,
        # the request says what; only the request is a sub-goal.
        parts = [part for part in parts if _is_request(part) or not _COMPLAINT_RE.search(part)]
    out: list[str] = []
    for part in parts:
        part = re.sub(r"\x00(\d+)\x00", lambda m: quoted[int(m.group(1))], part)
        part = part.strip(" ,.;")
        if part:
            out.append(part)
    return out


# A clause that reports a problem rather than asks ("the wifi keeps dropping", "Sam
# can't hear me", "my phone won't stop buzzing").
_COMPLAINT_RE = re.compile(
    r"\b(?:can'?t|cannot|won'?t|isn'?t|aren'?t|doesn'?t|didn'?t|wasn'?t|keeps?|kept|"
    r"stopped|broke|is\s+(?:broken|down|dead|not)|are\s+(?:broken|down|not))\b"
    .replace("'", "['\u2019]"), re.I)


# Openings that soften a request without changing it ("can you …", "ok so please …").
_POLITE_RE = re.compile(
    r"^\s*(?:(?:ok(?:ay)?|so|and|also|now|just|oh|hey|hi|please|pls|plz|kindly|then|next|"
    r"after\s+that|afterwards|finally|first|(?:you|u)\s+(?:can|may|could)|"
    r"(?:can|could|would|will)\s+(?:you|u)|i'?d\s+like\s+(?:you\s+)?to)\b[\s,]*)+", re.I)
# A sentence that asks for something although no action verb opens it.
_WISH_RE = re.compile(
    r"\b(?:i|we)\s+(?:(?:do\s*n[o']?t|dont|really|also|just)\s+)*(?:want|need|would\s+like|'d\s+like)\b"
    r"|\b(?:can|could|may)\s+(?:i|we)\s+(?:get|have|order)\b"
    r"|\bmake\s+(?:it|them|that)\b|^\s*no\s+\w|\x00", re.I)
# Verbs that open a request besides the splitting verbs (ACTION_VERBS).
_REQUEST_VERBS = ACTION_VERBS | frozenset(
    """get let remind wake tell ask pay cancel keep give bring help schedule rate tip pin
    unpin star flag archive block unblock follow unfollow download subscribe unsubscribe
    extend renew reserve rent hide unhide kill silence use leave charge transfer email
    like unlike dim brighten""".split())


def without_politeness(text: str) -> str:
    """``text`` less the openings that soften a request ("ok so please", "can you")."""
    return _POLITE_RE.sub("", text)


def _is_request(sentence: str) -> bool:
    """A sentence that asks for something: an action verb opens it (after "please",
    "can you" …), or it states a wish ("I don't need wifi right now", "no sugar")."""
    plain = without_politeness(sentence)
    return _first_word(plain) in _REQUEST_VERBS or bool(_WISH_RE.search(sentence))


_CONTEXT_WORDS = frozenset({"in", "on", "using", "from", "with", "at", "inside", "via"})


def _split_on_verbs(text: str) -> list[str]:
    pieces = re.split(r"(\s*,\s*(?:and\s+)?|\s+and\s+)", text)
    if len(pieces) == 1:
        return [text]
    out: list[str] = [pieces[0]]
    context_pending = _first_word(pieces[0]) in _CONTEXT_WORDS
    for separator, piece in zip(pieces[1::2], pieces[2::2]):
        word = _first_word(piece)
        shared = _with_shared_toggle(out[-1], piece)
        if word in ACTION_VERBS and context_pending:
            # "In the Shop, search for …": the leading phrase says where, not what.
            out[-1] = out[-1] + separator + piece
            context_pending = False
        elif word in ACTION_VERBS:
            out.append(piece)
        elif shared:
            out.append(shared)  # "turn on Wi-Fi and Bluetooth"
        else:
            out[-1] = out[-1] + separator + piece
    return out


# --- references: the most similar earlier goals -----------------------------------


class ReferenceIndex:
    """Earlier successful goals, searchable by similarity (D-PoT planning references).

    TF-IDF cosine over canonical tokens by default (pure Python); with ``embed`` given
    (any ``str -> vector`` function, e.g. a sentence-transformer), cosine over those
    vectors instead. Vectors are computed once per goal.
    """

    def __init__(
        self,
        goals: Sequence[str] = (),
        *,
        embed: Callable[[str], Sequence[float]] | None = None,
    ) -> None:
        self._goals: list[str] = []
        self._tokens: list[list[str]] = []
        self._embed = embed
        self._vectors: list[Sequence[float]] = []
        self._df: dict[str, int] = {}
        for goal in goals:
            self.add(goal)

    def __len__(self) -> int:
        return len(self._goals)

    @property
    def goals(self) -> list[str]:
        return list(self._goals)

    def add(self, goal: str) -> None:
        """Remember a goal (duplicates are kept once)."""
        if not goal or goal in self._goals:
            return
        toks = tokens(goal, keep_stopwords=False) or tokens(goal, keep_stopwords=True)
        self._goals.append(goal)
        self._tokens.append(toks)
        for tok in set(toks):
            self._df[tok] = self._df.get(tok, 0) + 1
        if self._embed is not None:
            self._vectors.append(list(self._embed(goal)))

    def most_similar(self, goal: str, k: int = 2) -> list[str]:
        """Up to ``k`` stored goals most similar to ``goal``, best first.

        The goal itself (an exact repeat) is skipped; goals sharing nothing score 0 and
        are left out.
        """
        if not self._goals or k <= 0:
            return []
        if self._embed is not None:
            query = list(self._embed(goal))
            sims = [_cosine_dense(query, vec) for vec in self._vectors]
        else:
            query_vec = self._tfidf(tokens(goal) or tokens(goal, keep_stopwords=True))
            sims = [_cosine_sparse(query_vec, self._tfidf(toks)) for toks in self._tokens]
        ranked = sorted(
            (i for i, g in enumerate(self._goals) if g.strip().lower() != goal.strip().lower()),
            key=lambda i: (-sims[i], i),
        )
        return [self._goals[i] for i in ranked if sims[i] > 0][:k]

    def _tfidf(self, toks: list[str]) -> dict[str, float]:
        n = len(self._goals)
        counts: dict[str, int] = {}
        for tok in toks:
            counts[tok] = counts.get(tok, 0) + 1
        return {
            tok: (1 + math.log(c)) * (math.log((1 + n) / (1 + self._df.get(tok, 0))) + 1)
            for tok, c in counts.items()
        }


def _cosine_sparse(a: dict[str, float], b: dict[str, float]) -> float:
    if not a or not b:
        return 0.0
    dot = sum(v * b.get(k, 0.0) for k, v in a.items())
    norm = math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values()))
    return dot / norm if norm else 0.0


def _cosine_dense(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0
