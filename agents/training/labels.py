"""What a person's decision says about the agent's proposal (pure Python)."""
from __future__ import annotations

# OS-Kairos Eq. 3 ("action || score", Sec. 4.2): an approved action is a full-score example,
# a replaced one (edit, take over) a low-score example; answers and aborts say nothing
# about the proposed action, so they carry no label.
SCORE_RIGHT = 5
SCORE_WRONG = 1
_LABELS = {"approve": SCORE_RIGHT, "edit": SCORE_WRONG, "takeover": SCORE_WRONG}

LABEL_MEANINGS = {
    SCORE_RIGHT: "the agent was right (a person approved its action)",
    SCORE_WRONG: "the agent was wrong (a person replaced its action)",
}


def score_label(decision: str | None) -> int | None:
    """The Eq. 3 score for a decision: 5 approve, 1 edit / take over, None otherwise."""
    return _LABELS.get(decision or "")


def agent_was_right(decision: str | None) -> bool | None:
    """approve → True, edit / take over → False, anything else → None (not judged)."""
    label = score_label(decision)
    return None if label is None else label == SCORE_RIGHT


def label_meaning(label: int | None) -> str:
    return LABEL_MEANINGS.get(label, "no label (a question answered, or the task aborted)")
