"""What a person's decision says about the agent's proposal (pure Python)."""
from __future__ import annotations

from typing import Any

# OS-Kairos Eq. 3 ("action || score", Sec. 4.2): an approved action is a full-score example,
# a replaced one (edit, take over) a low-score example; answers and aborts say nothing
# about the proposed action, so they carry no label.
SCORE_RIGHT = 5
SCORE_WRONG = 1
_LABELS = {"approve": SCORE_RIGHT, "edit": SCORE_WRONG, "takeover": SCORE_WRONG}

LABEL_MEANINGS = {
    SCORE_RIGHT: "the agent was right (a person approved its action or did the same)",
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


def same_action(proposed: Any, performed: Any, ui_nodes: Any = None) -> bool:
    """Does ``performed`` (a person's action) do what ``proposed`` (the agent's) would?

    The same action ignoring the element label, or — for taps — a tap of the same type
    on the same element of the step's screen (a person picks an element by its centre,
    the agent by its own point inside it).
    """
    from agents.brain.loop import target_node
    from devices.actions import POINT_TYPES, Action, validate_action
    from devices.uitree import nodes_from_json

    a = validate_action(proposed) if isinstance(proposed, dict) else None
    b = validate_action(performed) if isinstance(performed, dict) else None
    if not isinstance(a, Action) or not isinstance(b, Action):
        return False
    if a.same_as(b):
        return True
    if a.type != b.type or a.type not in POINT_TYPES or not ui_nodes:
        return False
    nodes = nodes_from_json(ui_nodes)
    target = target_node(a, nodes)
    return target is not None and target is target_node(b, nodes)


def judge(decision: str | None, agent_action: Any = None, human_action: Any = None,
          ui_nodes: Any = None) -> bool | None:
    """The label a decision gives the agent's proposal (issue 24, item 1).

    approve → right; an edit → right when the edited action is the proposal
    (``same_action``), else wrong; a take-over → labelled by its first input (right when
    it performs the proposed action), wrong until one is known; answer / abort → None.
    """
    if decision == "approve":
        return True
    if decision in ("edit", "takeover"):
        if human_action is None:
            return False
        return same_action(agent_action, human_action, ui_nodes)
    return None


def score_of(right: bool | None) -> int | None:
    """A stored label (``Ticket.agent_right``) as its Eq. 3 score: 5, 1 or None."""
    return None if right is None else (SCORE_RIGHT if right else SCORE_WRONG)
