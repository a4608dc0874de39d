"""The offline baseline backend: rules over the UI tree, with an evidence-based confidence.

Pure Python (no Django). Used whenever no model endpoint is configured. It sees only the
:class:`~agents.brain.backends.base.StepContext` — instruction, clarification answers, the
current screen's UI nodes, the compact history, the installed apps — never a task id, a
gold path or the oracle.

The modules are arranged by what they decide (docs/heuristic.md, "Where the rules live"):

- :mod:`.screen` — reading the screen: elements, overlays, radio groups;
- :mod:`.intents` — what each sub-goal asks for, and in which app;
- :mod:`.history` — what the episode has done so far;
- :mod:`.choice` — what a rule returns, its confidence and evidence;
- :mod:`.dialogs` — pop-ups, permission prompts, errors, confirmations;
- :mod:`.options` — options the goal names, and questions for the user;
- :mod:`.errands` — which app each part happens in, and when to switch;
- :mod:`.shopping` — the purchase funnel;
- :mod:`.forms` — sign-in, steppers, form fields, typing and submitting;
- :mod:`.toggles` — switches and controls that show their state;
- :mod:`.progress` — which sub-goals are done and which is next;
- :mod:`.targets` — the element to tap when nothing more specific applies;
- :mod:`.backend` — :class:`HeuristicBackend`, the rules in priority order.

The product asks a person below γ (default 4), so 4–5 are reserved for steps the rules
have direct evidence for (OS-Kairos §4.2, Eq. 4).
"""
from agents.brain.backends.heuristic.backend import HeuristicBackend
from agents.brain.backends.heuristic.choice import match_confidence
from agents.brain.backends.heuristic.intents import Intent, extract_text, parse_intent
from agents.brain.backends.heuristic.screen import ScreenView, read_screen

__all__ = [
    "HeuristicBackend", "Intent", "ScreenView", "extract_text", "match_confidence", "parse_intent",
    "read_screen",
]
