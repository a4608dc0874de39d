"""The ``openai`` backend's reading of answers that :mod:`agents.brain.scoring` does not
read: the element ids the LLM recommendation pathway (RecAgent §3.3) names
(:func:`parse_element_ids`).

Split out of :mod:`agents.brain.backends.openai`, which re-exports the public names here.
Pure Python (no Django).
"""
from __future__ import annotations

import json
import re
from typing import Any

from agents.brain.scoring import parse_json_object, strip_code_fences

_ID_KEYS = ("ids", "id", "element_ids", "elements", "relevant", "relevant_ids",
            "recommended", "recommendations")
_ID_RE = re.compile(r"#?\s*(\d{1,7})")
_MARK_RE = re.compile(r"#\s*(\d{1,7})\b")
_ARRAY_RE = re.compile(r"\[[^\[\]]*\]")


def parse_element_ids(text: Any, valid: set[int] | frozenset[int]) -> list[int]:
    """Element ids (``#12`` → 12) from the LLM recommendation pathway's answer, in order.

    Reads ``{"ids": [12, 3]}`` (or another list-valued key), a bare JSON list
    (``[12, "#3"]``, ``[{"id": 12}]``) and, failing those, ``#12`` mentions in prose. Ids
    not in ``valid`` are dropped, repeats kept once; anything unreadable gives ``[]``.
    Never raises.
    """
    try:
        body = strip_code_fences(text if isinstance(text, str) else "")[:20_000]
        values: Any = None
        data = parse_json_object(body)
        if data is not None:
            fields = {str(k).strip().lower().replace(" ", "_"): v for k, v in data.items()}
            values = next((fields[k] for k in _ID_KEYS if k in fields), None)
            if values is None:
                values = next((v for v in fields.values() if isinstance(v, list)), None)
        if values is None:
            for span in _ARRAY_RE.findall(body):
                try:
                    loaded = json.loads(span)
                except ValueError:
                    continue
                if isinstance(loaded, list):
                    values = loaded
                    break
        if values is None:
            values = _MARK_RE.findall(body)
        if not isinstance(values, (list, tuple)):
            values = [values]
        out: list[int] = []
        for item in values:
            if isinstance(item, dict):
                item = next((item[k] for k in ("id", "element", "index") if k in item), None)
            index = _as_id(item)
            if index is not None and index in valid and index not in out:
                out.append(index)
        return out
    except Exception:  # noqa: BLE001 — the pathway contributes nothing, the step goes on
        return []


def _as_id(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        match = _ID_RE.fullmatch(value.strip())
        return int(match.group(1)) if match else None
    return None
