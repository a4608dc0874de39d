"""Parse a model's answer into an action and its confidence score (OS-Kairos Eq. 3).

Pure Python. OS-Kairos trains the agent to emit ``action || score`` (Sec. 4.2, Eq. 3), the
critic answers ``{score: N}`` (App. C.1, Fig. 16), D-PoT plans as a JSON dictionary
(App. A.1) and RecAgent's Interaction Agent asks in JSON (App. D). Real endpoints wrap all
of these in code fences, Markdown, Python-style dicts or free prose, so the parser is
deliberately forgiving about spacing, case, quoting and order — an earlier
``score:(\\d+)`` regex silently missed ``score: 4`` and sent every step to a person.

Every public function here takes *any* value and never raises: it returns either the
parsed result or a :class:`ParseError` whose message an operator can read on the
``parse_error`` ticket.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from devices.actions import (
    Action,
    ActionError,
    POINT_TYPES,
    Screen,
    action_from_text,
    from_normalised,
    normalise_type,
    validate_action,
)

MIN_SCORE = 1.0
MAX_SCORE = 5.0
# Model answers are bounded by max_tokens; this only protects the regexes from a
# pathological multi-megabyte string.
MAX_INPUT_CHARS = 50_000


@dataclass(frozen=True)
class ScoredAction:
    """A parsed step answer: the action, its 1–5 score and the reasoning around it."""

    action: Action
    score: float | None  # None when the answer carried no usable score
    thought: str = ""
    plan: list[str] = field(default_factory=list)
    current_step: str = ""
    action_text: str = ""  # the action as the model wrote it
    notes: list[str] = field(default_factory=list)  # e.g. "no score in the answer"


@dataclass(frozen=True)
class ParseError:
    """Why a model answer could not be used."""

    message: str
    raw: str = ""

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class ClarificationRequest:
    """RecAgent App. D: ``{"need_clarification": true, "clarification_question": ...}``."""

    need: bool
    question: str = ""


# --- small tolerant helpers -----------------------------------------------------------

_FENCE_RE = re.compile(r"^[ \t]*```[A-Za-z0-9_+-]*[ \t]*$", re.MULTILINE)
_NUMBER = r"\d{1,3}(?:\.\d+)?"
# "score: 4", "Score = 4", "**Score**: 4.5", "'score': '4'", "score 4", "confidence: 4/5".
_SCORE_RE = re.compile(
    rf"\b(?:confidence[ _]score|score|confidence)\b[\"'*\s]{{0,6}}[:=]?[\"'*\s]{{0,6}}({_NUMBER})(?!\d)",
    re.IGNORECASE,
)
_LABELS = {
    "thought": "thought",
    "thoughts": "thought",
    "reasoning": "thought",
    "reason": "thought",
    "plan": "plan",
    "step list": "plan",
    "step": "step",
    "current step": "step",
    "current_step": "step",
    "current goal": "step",
    "action": "action",
    "next action": "action",
    "score": "score",
    "confidence": "score",
}
# A label opens a line (after Markdown bullets/bold/quotes) or follows "{", "," or ";"
# as in the pseudo-JSON ``{action: CLICK ..., score: 4}`` of OS-Kairos Figs. 15–16.
_LABEL_RE = re.compile(
    r"(?:^|(?<=[{,;]))[ \t]*[-*#>\"']{0,4}[ \t]*"
    r"(current[ _]step|current goal|step list|next action|thoughts?|reasoning|reason|plan|"
    r"step|action|score|confidence)"
    r"[ \t]*[\"'*]{0,3}[ \t]*[:=]",
    re.IGNORECASE | re.MULTILINE,
)
_PLAN_ITEM_RE = re.compile(r"(?:^|(?<=\s))(?:step\s*)?\d{1,2}[.):]\s+", re.IGNORECASE)


def strip_code_fences(text: str) -> str:
    """Drop Markdown code-fence lines, keeping what they enclosed."""
    return _FENCE_RE.sub("", text)


def _as_text(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    return value[:MAX_INPUT_CHARS]


def _candidate_objects(text: str) -> list[str]:
    """Balanced ``{...}`` spans, outermost first, ignoring braces inside quotes."""
    spans: list[str] = []
    depth = 0
    start = -1
    quote = ""
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "\"" and depth > 0:
            quote = ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start: i + 1])
                if len(spans) >= 8:
                    break
    return spans


def parse_json_object(text: Any) -> dict[str, Any] | None:
    """The first JSON (or Python-literal) object in ``text``, else ``None``.

    D-PoT's planner answers ``{'plan': ..., 'step': ...}`` with single quotes, which
    ``json`` refuses, so ``ast.literal_eval`` is the second attempt. Never raises.
    """
    body = strip_code_fences(_as_text(text))
    for span in _candidate_objects(body):
        for loader in (json.loads, ast.literal_eval):
            try:
                value = loader(span)
            except Exception:  # noqa: BLE001 — SyntaxError, ValueError, RecursionError, ...
                continue
            if isinstance(value, dict):
                return {str(k): v for k, v in value.items()}
    return None


def _lower_keys(data: dict[str, Any]) -> dict[str, Any]:
    return {str(k).strip().lower().replace(" ", "_"): v for k, v in data.items()}


def _labelled_fields(text: str) -> dict[str, str]:
    """``Label: value`` pairs; a value runs to the next label. First label wins."""
    found: dict[str, str] = {}
    matches = list(_LABEL_RE.finditer(text))
    for i, match in enumerate(matches):
        key = _LABELS.get(match.group(1).lower().replace("_", " "), "")
        if not key:
            key = _LABELS.get(match.group(1).lower(), "")
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        value = text[match.end(): end]
        if key and key not in found:
            found[key] = value
    return found


def _clean_value(value: str) -> str:
    value = value.strip()
    # Closing pseudo-JSON punctuation and Markdown emphasis around a value.
    value = value.rstrip(",;}").strip()
    for _ in range(3):
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`*":
            value = value[1:-1].strip()
    return value.strip("*").strip()


def split_plan(value: Any) -> list[str]:
    """A plan as a list of steps, from a list or from ``"1. a 2. b"`` / one per line."""
    if isinstance(value, (list, tuple)):
        return [str(item).strip() for item in value if str(item).strip()][:30]
    text = _clean_value(_as_text(value))
    if not text:
        return []
    parts = [p.strip(" \t\n-*;,") for p in _PLAN_ITEM_RE.split(text)]
    parts = [p for p in parts if p]
    if not _PLAN_ITEM_RE.search(text):
        lines = [line.strip(" \t-*") for line in text.splitlines()]
        parts = [line for line in lines if line]
    return parts[:30]


# --- the score -------------------------------------------------------------------------

def find_score_span(text: Any) -> tuple[int, int] | None:
    """Character span of the score's digits in ``text`` (the last score the model wrote).

    The last one wins because an answer may echo the prompt's "score from 1 to 5" scale
    before committing to a value. Used by the logprob estimator to find the score token.
    """
    body = _as_text(text)
    last = None
    for match in _SCORE_RE.finditer(body):
        last = match
    if last is None:
        return None
    return last.span(1)


def _score_value(value: Any) -> tuple[float | None, str | None]:
    """A 1–5 score from a number or string; the note says why it was refused."""
    if isinstance(value, bool):
        return None, "the score is not a number"
    number: float | None = None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        match = re.search(_NUMBER, value)
        if match:
            number = float(match.group(0))
    if number is None or number != number:
        return None, "the score is not a number"
    if not MIN_SCORE <= number <= MAX_SCORE:
        # Out of range usually means another scale (0–10, percent); guessing the scale
        # would invent confidence, so the score is dropped and a person decides.
        return None, f"score {number:g} is outside 1–5"
    return number, None


def parse_score(text: Any) -> float | ParseError:
    """The 1–5 score of a critic answer (OS-Kairos Fig. 16 ``{score: N}``). Never raises."""
    body = strip_code_fences(_as_text(text))
    data = parse_json_object(body)
    if data is not None:
        keys = _lower_keys(data)
        for name in ("score", "confidence", "confidence_score"):
            if name in keys:
                score, note = _score_value(keys[name])
                if score is not None:
                    return score
                return ParseError(note or "unusable score", body[:500])
    span = find_score_span(body)
    if span is None:
        # A bare number is a valid answer to "give a score from 1 to 5".
        bare = re.fullmatch(rf"\s*[{{(\[]?\s*({_NUMBER})\s*[}})\]]?\s*\.?\s*", body)
        if not bare:
            return ParseError("no score in the answer", body[:500])
        span = bare.span(1)
    score, note = _score_value(body[span[0]: span[1]])
    if score is None:
        return ParseError(note or "unusable score", body[:500])
    return score


# --- the action ------------------------------------------------------------------------

def _action_from_mapping(data: dict[str, Any], screen: Screen) -> Action | ActionError:
    """A canonical-JSON action whose coordinates are 0–1000 like the text form's."""
    keys = _lower_keys(data)
    kind = normalise_type(keys.get("type", keys.get("action_type", keys.get("name"))))
    if kind is None:
        return ActionError("the action object has no known 'type'", "type")
    out: dict[str, Any] = {"type": kind}
    if kind in POINT_TYPES:
        point = keys.get("point", keys.get("coordinate", keys.get("coordinates")))
        x, y = keys.get("x"), keys.get("y")
        if isinstance(point, (list, tuple)) and len(point) == 2:
            x, y = point
        try:
            nx, ny = float(x), float(y)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            return ActionError(f"{kind} needs x and y on the 0–1000 scale", "x")
        if not (0 <= nx <= 1000 and 0 <= ny <= 1000):
            return ActionError(f"{kind} point is outside 0–1000", "x")
        out["x"], out["y"] = from_normalised(nx, screen.width), from_normalised(ny, screen.height)
    for name in ("text", "direction", "app"):
        if name in keys:
            out[name] = keys[name]
    if kind == "OPENAPP" and "app" not in out and "app_name" in keys:
        out["app"] = keys["app_name"]
    return validate_action(out, screen)


def _action_from_value(value: Any, screen: Screen) -> Action | ActionError:
    if isinstance(value, dict):
        return _action_from_mapping(value, screen)
    if not isinstance(value, str):
        return ActionError("the action is not text")
    text = _clean_value(value)
    # The score may share the action's line: "CLICK <point>[[1, 2]]</point> score: 4".
    span = find_score_span(text)
    if span is not None:
        head = text[: span[0]]
        cut = re.search(r"[,;|]?\s*[\"'*]*\s*\b(?:confidence[ _]score|score|confidence)\b", head,
                        re.IGNORECASE)
        if cut:
            text = _clean_value(text[: cut.start()])
    # An action is one line; a TYPE text that spans lines stays inside its brackets.
    if "\n" in text and not re.match(r"\s*\w+\s*\[[^\]]*\n", text):
        text = text.splitlines()[0].strip()
    return action_from_text(text, screen)


def _find_bare_action(body: str, screen: Screen) -> tuple[Action, str] | None:
    """The last line that reads as an action on its own (no ``Action:`` label)."""
    found: tuple[Action, str] | None = None
    for line in body.splitlines():
        candidate = _clean_value(line.strip().lstrip("-*>#").strip())
        if not candidate or len(candidate) > 1200:
            continue
        result = _action_from_value(candidate, screen)
        if isinstance(result, Action):
            found = (result, candidate)
    return found


def _parse(text: Any, screen: Screen | tuple[int, int]) -> ScoredAction | ParseError:
    if not isinstance(screen, Screen):
        screen = Screen(int(screen[0]), int(screen[1]))
    if not isinstance(text, str):
        return ParseError("the model returned no text")
    raw = text[:MAX_INPUT_CHARS]
    body = strip_code_fences(raw).strip()
    if not body:
        return ParseError("the model returned an empty answer", raw)

    fields: dict[str, Any] = {}
    data = parse_json_object(body)
    if data is not None:
        keys = _lower_keys(data)
        for name, target in (
            ("action", "action"), ("next_action", "action"), ("score", "score"),
            ("confidence", "score"), ("confidence_score", "score"), ("thought", "thought"),
            ("thoughts", "thought"), ("reasoning", "thought"), ("plan", "plan"),
            ("step", "step"), ("current_step", "step"), ("current_goal", "step"),
        ):
            if name in keys and target not in fields:
                fields[target] = keys[name]
        if "action" not in fields and normalise_type(keys.get("type")) is not None:
            fields["action"] = data
    labelled = _labelled_fields(body)
    for key, value in labelled.items():
        fields.setdefault(key, value)

    notes: list[str] = []
    action_text = ""
    if "action" in fields:
        value = fields["action"]
        action = _action_from_value(value, screen)
        action_text = _clean_value(value) if isinstance(value, str) else json.dumps(
            value, default=str)[:300]
        if isinstance(action, ActionError):
            # "Action:" may introduce prose ("Action: I will tap Wi-Fi\nCLICK ...").
            bare = _find_bare_action(body, screen)
            if bare is None:
                return ParseError(f"could not read the action: {action.message}", raw)
            action, action_text = bare
    else:
        bare = _find_bare_action(body, screen)
        if bare is None:
            return ParseError(
                "no action in the answer; expected e.g. 'Action: CLICK <point>[[x, y]]</point>'",
                raw,
            )
        action, action_text = bare

    score: float | None = None
    if "score" in fields:
        score, note = _score_value(fields["score"])
        if note:
            notes.append(note)
    else:
        span = find_score_span(body)
        if span is not None:
            score, note = _score_value(body[span[0]: span[1]])
            if note:
                notes.append(note)
    if score is None and not notes:
        notes.append("no score in the answer")

    thought = fields.get("thought", "")
    thought = _clean_value(thought) if isinstance(thought, str) else str(thought)
    step = fields.get("step", "")
    step = _clean_value(step) if isinstance(step, str) else str(step)
    return ScoredAction(
        action=action,
        score=score,
        thought=thought[:2000],
        plan=split_plan(fields.get("plan", "")),
        current_step=step[:500],
        action_text=action_text[:300],
        notes=notes,
    )


def parse_scored_action(text: Any, screen: Screen | tuple[int, int]) -> ScoredAction | ParseError:
    """Read ``action || score`` (plus optional thought, plan and step) from a model answer.

    Accepts the OS-Kairos/OS-Atlas text form with any spacing and case (``score:4``,
    ``Score: 4``), the pseudo-JSON ``{action: CLICK <point>[[1,2]]</point>, score: 4}``,
    real JSON objects, ``Action: ... Score: ...`` blocks and code fences. Coordinates are
    0–1000 and come back in device pixels of ``screen``. Never raises, for any input.
    """
    try:
        return _parse(text, screen)
    except Exception as exc:  # noqa: BLE001 — last line of defence: a step must not crash
        return ParseError(f"unreadable answer ({type(exc).__name__})", _as_text(text))


def parse_plan(text: Any) -> tuple[list[str], str] | ParseError:
    """D-PoT App. A.1's ``{'plan': '1. ...', 'step': '...'}`` → (steps, current step)."""
    try:
        body = strip_code_fences(_as_text(text)).strip()
        data = parse_json_object(body)
        fields: dict[str, Any] = _lower_keys(data) if data is not None else {}
        if not fields:
            fields = dict(_labelled_fields(body))
        plan = split_plan(fields.get("plan", ""))
        step = fields.get("step", fields.get("current_step", ""))
        step = _clean_value(step) if isinstance(step, str) else str(step)
        if not plan and not step:
            return ParseError("no plan in the answer; expected {'plan': ..., 'step': ...}", body)
        return plan, step[:500]
    except Exception as exc:  # noqa: BLE001
        return ParseError(f"unreadable plan ({type(exc).__name__})", _as_text(text))


_TRUE_RE = re.compile(r"[\"']?need_clarification[\"']?\s*[:=]\s*[\"']?(true|yes|1)\b", re.I)
_QUESTION_RE = re.compile(
    r"[\"']?clarification_question[\"']?\s*[:=]\s*(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')", re.I)


def parse_clarification(text: Any) -> ClarificationRequest | None:
    """RecAgent App. D's JSON verdict, when the answer contains one; else ``None``.

    Returns ``need=True`` only with a non-empty question: a request to clarify that asks
    nothing cannot be shown to a user. Never raises.
    """
    try:
        body = strip_code_fences(_as_text(text))
        if "need_clarification" not in body.lower():
            return None
        data = parse_json_object(body)
        if data is not None:
            keys = _lower_keys(data)
            if "need_clarification" in keys:
                need = keys["need_clarification"]
                if isinstance(need, str):
                    need = need.strip().lower() in ("true", "yes", "1")
                question = str(keys.get("clarification_question") or "").strip()
                return ClarificationRequest(bool(need) and bool(question), question[:500])
        question = ""
        match = _QUESTION_RE.search(body)
        if match:
            question = match.group(1)[1:-1].strip()
        need = bool(_TRUE_RE.search(body))
        return ClarificationRequest(need and bool(question), question[:500])
    except Exception:  # noqa: BLE001
        return None


def with_element(scored: ScoredAction, element: str | None) -> ScoredAction:
    """The same answer with the action attributed to a UI element."""
    if not element or scored.action.element:
        return scored
    return replace(scored, action=replace(scored.action, element=element[:200]))
