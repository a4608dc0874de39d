"""Everything that changes a task, a step or a ticket: one module per kind of change.

``check_*`` validates and authorises, ``do``-style functions perform. Every status change
is a conditional UPDATE (``filter(status=…).update(…)``): a race has exactly one winner
and a redelivered Celery task does nothing twice. Events go out after commit.

* :mod:`.access` — who may see a task, who may handle a ticket (on :mod:`access.roles`);
* :mod:`.validation` — the ``check_*`` helpers: text, instructions, γ, the queue's room,
  backends, suites, a phone online; ``default_threshold``, ``devices_json``;
* :mod:`.lifecycle` — a task created, queued, started, its steps scheduled, finished or
  aborted; the next queued task started; a phone reset to its home screen;
* :mod:`.labels` — what approvals, edits, take-over inputs and verdicts teach the
  experience memory, the training record of each resolved ticket, a take-over's label;
* :mod:`.tickets` — tickets opened, claimed, released, reassigned and resolved (also as
  the simulator's oracle would);
* :mod:`.chat` — messages, the agent's and operators' questions to the user, and the
  escalation of unanswered questions to operators;
* :mod:`.steps` — a step proposed, executed, the cursor advanced, a step a dead worker
  left recovered;
* :mod:`.takeover` — an operator's inputs in control of a phone, the hand-back, idle
  take-overs lapsing;
* :mod:`.verdicts` — the owner's verdict on a finished task, and what it keeps out of
  learning.

Each module imports only those listed before it, never one after (no circle, lazy
imports included): validation ← lifecycle ← tickets ← chat ← steps ← takeover;
labels ← tickets, takeover, verdicts; validation ← tickets, chat, verdicts; access
stands alone. Import a function from the module that owns it; this package re-exports
nothing. Celery's wrappers (``agents/runtime/tasks.py``) import these modules; these
enqueue work by the registered task name and never import the tasks module.
"""
