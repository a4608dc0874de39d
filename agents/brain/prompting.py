"""Prompt templates: ``agents/brain/prompts/<name>.txt`` with ``$name`` placeholders.

Pure Python and light to import: the openai backend renders its prompts here, and so does
``export_training``, so a model fine-tuned on the export is prompted at run time exactly
as it was trained.
"""
from __future__ import annotations

import re
import string
from functools import lru_cache
from pathlib import Path
from typing import Any

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"

# A goal about a toggle gets StaR's toggle-state note (star-toggle-state-reasoning, Sec. 3).
TOGGLE_GOAL_RE = re.compile(
    r"\b(?:turn|switch|toggle|set)\b.*\b(?:on|off)\b|\b(?:enable|disable|activate|deactivate|"
    r"check|uncheck|tick|untick|mute|unmute|toggle|switch)\b",
    re.IGNORECASE,
)


@lru_cache(maxsize=64)
def _template(path: Path, mtime_ns: int) -> string.Template:
    return string.Template(path.read_text(encoding="utf-8"))


def render_prompt(template: str, prompts_dir: Path | str = PROMPTS_DIR, **values: Any) -> str:
    """``<prompts_dir>/<template>.txt`` with its placeholders filled in (a file edited
    while the process runs is read again)."""
    path = Path(prompts_dir) / f"{template}.txt"
    filled = _template(path, path.stat().st_mtime_ns).safe_substitute(
        {k: str(v) for k, v in values.items()})
    return re.sub(r"\n{3,}", "\n\n", filled).strip() + "\n"
