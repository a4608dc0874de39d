"""The confidence-gated step, as pure functions shared by every driver of an episode.

The Celery step task (``agents/runtime/tasks.py`` → ``agents/runtime/services/steps.py``),
``run_task`` and the evaluation runner (``agents/evaluation/episode.py``) all go through
:func:`decide` and :func:`reflect`, so the gate, the guards and retrospection behave the
same everywhere.

Order of checks (DESIGN "Data flow of one step"): model error → parse failure →
toggle-state check → sensitive action → repeated failure → no progress → clarification →
gate.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from agents.brain.backends.base import HistoryEntry, Proposal, StepContext
from agents.brain.safety import Harm, current_policy
from agents.brain.elements import row_label
from agents.brain.experience.memory import pick_group
from agents.brain.text import tokens
from devices.actions import (
    CLICK, COMPLETE, IMPOSSIBLE, LONG_CLICK, POINT_TYPES, WAIT, Action, ActionError, validate_action,
)
from devices.uitree import UINode, node_at

# Ticket reasons (mirrors agents.runtime.models.TicketReason; kept here so the core has no Django).
LOW_CONFIDENCE = "low_confidence"
SENSITIVE_ACTION = "sensitive_action"
PARSE_ERROR = "parse_error"
REPEATED_FAILURE = "repeated_failure"
MODEL_ERROR = "model_error"
DEVICE_ERROR = "device_error"
AMBIGUOUS_INTENT = "ambiguous_intent"
NO_PROGRESS = "no_progress"

EXECUTE = "execute"
TICKET = "ticket"
CLARIFY = "clarify"

# Labels of controls that retry a failed load; see is_patient.
PATIENT_LABEL = re.compile(r"\b(retry|try again|reload|refresh)\b", re.IGNORECASE)
PATIENT_REPEATS = 3
# The agent back on a screen it already left this many times since a person last decided
# is going round in circles (issue 26, item 4: scrolling up and down to the step limit).
NO_PROGRESS_VISITS = 2
TURN_ON = re.compile(r"\b(turn on|switch on|enable|activate|start)\b", re.IGNORECASE)
TURN_OFF = re.compile(r"\b(turn off|switch off|disable|deactivate|stop)\b", re.IGNORECASE)


@dataclass
class Decision:
    """What the gate decided for one proposal."""

    outcome: str  # EXECUTE | TICKET | CLARIFY
    action: Action | None = None
    reason: str | None = None
    note: str = ""
    question: str = ""
    options: list[str] = field(default_factory=list)
    target: UINode | None = None  # the element the action lands on, if any


def target_node(action: Action | None, nodes: list[UINode]) -> UINode | None:
    if action is None or action.type not in POINT_TYPES:
        return None
    assert action.x is not None and action.y is not None
    return node_at(nodes, action.x, action.y, clickable_only=True) or node_at(
        nodes, action.x, action.y
    )


def sensitive_harm(action: Action | None, nodes: list[UINode]) -> Harm | None:
    """The class of harm a tap commits (money, destruction, security, communication,
    account), recognised from the screen by the installation's policy
    (:mod:`agents.brain.safety.policy`); None for anything else."""
    if action is None or action.type not in (CLICK, LONG_CLICK):
        return None
    return current_policy().assess(target_node(action, nodes), nodes)


def display_label(action: Action | None, nodes: list[UINode]) -> str:
    """What a person calls the element ``action`` points at: its text, its description or
    its row's caption — never the words of its resource id ("thread dr lee s office")."""
    target = target_node(action, nodes)
    if target is None:
        return ""
    return target.text or target.content_desc or row_label(target, nodes)


def is_sensitive(action: Action | None, nodes: list[UINode]) -> bool:
    return sensitive_harm(action, nodes) is not None


def toggle_already_in_state(action: Action | None, goal: str, nodes: list[UINode]) -> UINode | None:
    """StaR (Fig. 12): a click on a switch already in the state the goal asks for.

    Returns the switch when the goal names it with one direction (on/off) only and the
    switch already shows that state; clicking it would undo what the user wants.
    """
    node = target_node(action, nodes)
    if node is None or not node.checkable or action is None or action.type != CLICK:
        return None
    label = (node.text or node.content_desc).lower()
    if not label or label not in goal.lower():
        return None
    wants_on, wants_off = bool(TURN_ON.search(goal)), bool(TURN_OFF.search(goal))
    if wants_on == wants_off:  # neither, or a composite goal naming both: no verdict
        return None
    return node if node.checked == wants_on else None


def is_patient(action: Action | None, target: UINode | None) -> bool:
    """Waiting, or retrying a failed load: repeating these is how they work."""
    if action is None:
        return False
    return action.type == WAIT or bool(
        target is not None and action.type in POINT_TYPES and PATIENT_LABEL.search(target.label))


def repeated_without_change(action: Action | None, history: list[HistoryEntry],
                            patient: bool = False) -> bool:
    """The same action again after it left the screen unchanged.

    Once is enough for most actions; waiting and retrying get ``PATIENT_REPEATS`` tries
    (a loading screen or a flaky network can take a few), and then a person is asked.
    """
    if action is None:
        return False
    repeats = 0
    for entry in reversed(history):
        previous = validate_action(entry.action)
        if entry.screen_changed or not isinstance(previous, Action) or not previous.same_as(action):
            break
        repeats += 1
    return repeats >= (PATIENT_REPEATS if patient else 1)


def no_progress(action: Action | None, screen_visits: int, target: UINode | None = None
                ) -> bool:
    """Going round in circles: back, again, on a screen seen ``NO_PROGRESS_VISITS`` times
    since a person last decided. Ending the task (COMPLETE / IMPOSSIBLE) and waiting or
    retrying a load are not circles."""
    if action is None or action.type in (COMPLETE, IMPOSSIBLE) or is_patient(action, target):
        return False
    return screen_visits >= NO_PROGRESS_VISITS


def count_visits(screens: list, current: object) -> int:
    """How many of the earlier ``screens`` (signatures, devices.uitree.screen_signature)
    are ``current``."""
    return sum(1 for screen in screens if screen == current)


def names_an_option(reply: str, labels: list[str]) -> list[str]:
    """The options a person's free-text reply names: those all of whose words it says
    ("A latte please, medium" names 'Latte' and 'Medium', not 'Flat white'). No wording
    of any app: the reply is read against the options offered."""
    said = set(tokens(reply))
    named = []
    for label in labels:
        words = set(tokens(label))
        if words and words <= said and label not in named:
            named.append(label)
    return named


def decide(proposal: Proposal, ctx: StepContext, threshold: float) -> Decision:
    """Apply the guards and the confidence gate (OS-Kairos 4.2, Eq. 4) to one proposal."""
    nodes = ctx.observation.nodes
    if proposal.model_error:
        return Decision(TICKET, reason=MODEL_ERROR, note=proposal.model_error)
    if proposal.clarification is not None and proposal.action is None:
        if proposal.clarification.question in ctx.asked:
            return Decision(
                TICKET, reason=AMBIGUOUS_INTENT,
                note="the agent asked the same question again; a person should decide",
                question=proposal.clarification.question,
            )
        return Decision(
            CLARIFY, reason=AMBIGUOUS_INTENT, question=proposal.clarification.question,
            options=list(proposal.clarification.options),
        )
    if proposal.error or proposal.action is None:
        return Decision(TICKET, reason=PARSE_ERROR, note=proposal.error or "no action proposed")
    checked = validate_action(proposal.action, (ctx.observation.width, ctx.observation.height))
    if isinstance(checked, ActionError):
        return Decision(TICKET, reason=PARSE_ERROR, note=checked.message)
    action = checked
    target = target_node(action, nodes)
    switch = toggle_already_in_state(action, ctx.goal, nodes)
    if switch is not None:
        state = "on" if switch.checked else "off"
        return Decision(
            TICKET, action=action, reason=LOW_CONFIDENCE, target=target,
            note=f"'{switch.label}' is already {state}; clicking would undo it",
        )
    harm = sensitive_harm(action, nodes)
    if harm is not None:
        # Asked whatever the confidence and γ: money, destruction, security,
        # communication and account changes are for a person to approve.
        return Decision(
            TICKET, action=action, reason=SENSITIVE_ACTION, target=target,
            note=harm.describe(target.label if target else action.describe()),
        )
    if repeated_without_change(action, ctx.history, is_patient(action, target)):
        return Decision(
            TICKET, action=action, reason=REPEATED_FAILURE, target=target,
            note="the same action did not change the screen last time",
        )
    if no_progress(action, ctx.screen_visits, target):
        # Whatever the confidence and γ: at caution 0 the agent otherwise scrolls to the
        # step limit instead of asking anyone.
        return Decision(
            TICKET, action=action, reason=NO_PROGRESS, target=target,
            note=f"no progress: the agent has been on this screen {ctx.screen_visits} times "
                 f"before without getting further; a person should decide the way on",
        )
    confidence = proposal.confidence if proposal.confidence is not None else 0.0
    if confidence < threshold:
        # On the 1–5 scale to one decimal, as the console shows it ("3.9586" read as noise).
        note = f"confidence {confidence:.1f} is below the threshold {threshold:g}"
        if action.type == IMPOSSIBLE:
            # The person must know what they are asked to confirm: the agent's belief and
            # its reason, not only a score.
            note = (f"the agent believes this task cannot be done: "
                    f"{proposal.thought or 'no reason given'} ({note})")
        return Decision(TICKET, action=action, reason=LOW_CONFIDENCE, target=target, note=note)
    return Decision(EXECUTE, action=action, target=target)


def reflect(action: Action, changed: bool, target: UINode | None, excluded: set[str]) -> bool:
    """Retrospection (RecAgent 3.5): an element whose tap changed nothing is excluded.

    The next proposal then sees the element list without it, which bounds the retries:
    each element fails at most once, and the repeated-failure guard stops the rest.
    Returns True when the element was newly excluded.
    """
    if changed or target is None or action.type not in POINT_TYPES or target.key in excluded:
        return False
    if is_patient(action, target):
        return False  # a Retry that failed once is still the way out of an error screen
    excluded.add(target.key)
    return True


_INTERNAL_ID = re.compile(r"^node-\d+$")


def shown_name(action: Action, nodes: list[UINode]) -> Action:
    """``action`` with its element named as the phone shows it (text, content
    description, the row's caption), never an internal id such as ``node-2`` or a
    resource id (issue 24, item 1): the console's element picker sends the node's key,
    and logs, histories and exports read the name."""
    if action.type not in POINT_TYPES:
        return action
    name = display_label(action, nodes)
    element = action.element
    if name:
        element = name[:200]
    elif element and (_INTERNAL_ID.match(element) or
                      any(element in (n.key, n.resource_id) for n in nodes)):
        element = None
    return action if element == action.element else replace(action, element=element)


def history_entry(index: int, action: Action, by: str, changed: bool,
                  target: UINode | None = None,
                  nodes: list[UINode] | None = None) -> HistoryEntry:
    """One executed step for the history; ``nodes``: the screen it was decided on (then a
    pick among siblings is recorded as such)."""
    summary = action.describe()
    if target is not None and target.label and action.type in POINT_TYPES:
        summary = f"{action.type} '{target.label}'"
    return HistoryEntry(index=index, action=action.to_json(), by=by, summary=summary,
                        screen_changed=changed, pick=pick_group(action, nodes))
