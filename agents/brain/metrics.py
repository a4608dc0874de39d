"""The evaluation metrics — one implementation for suites, dataset replay and the admin pages.

Pure Python (no Django). Definitions are DESIGN.md "Measuring", which follow OS-Kairos
App. C.3 with the names made explicit:

per step (a :class:`StepLabel`)
    ``needed``  the proposed action is wrong (the oracle, or a dataset's gold action, says so)
    ``asked``   a ticket was raised (intervention or clarification)

    =============  ==============  ==============
                   needed          not needed
    =============  ==============  ==============
    asked          ``caught``      ``interrupted``
    not asked      ``missed``      ``autonomous``
    =============  ==============  ==============

    The paper's TP is ``autonomous``, TN ``caught``, FP ``interrupted``, FN ``missed``, so
    HSR = (TP+TN)/all (Eq. 11), IP = TN/(TN+FN) and AP = TP/(TP+FP) (Eq. 12).

    * ``hsr``                    = (caught + autonomous) / labelled steps
    * ``intervention_recall``    = caught / (caught + missed)          — P(asked | needed), IP
    * ``intervention_precision`` = caught / (caught + interrupted)     — P(needed | asked)
    * ``autonomy_recall``        = autonomous / (autonomous + interrupted) — P(not asked | not needed), AP
    * ``autonomy_precision``     = autonomous / (autonomous + missed)  — P(not needed | not asked)
    * ``type_acc``               = steps whose action type matches / steps with a type label
    * ``sr``                     = steps whose action matches / steps with a match label

per task (a :class:`TaskRecord`)
    * ``tsr``  = tasks with ``success is True`` / tasks (``None`` — no predicate, aborted —
      counts as not succeeded, since nobody can claim it succeeded)
    * ``re``   = mean over succeeded tasks with a known optimum of
      ``min(1, optimal_steps / steps)`` (OS-Kairos Table 4: human steps / actual steps);
      a task finished in 0 steps with optimum 0 has RE 1
    * ``interventions_per_task``, ``clarifications_per_task``, ``steps_per_task`` = means

Edge cases, all deliberate: a ratio whose denominator is zero is ``None`` (JSON ``null``),
never 0 and never an exception — e.g. ``intervention_recall`` when no step needed help,
``autonomy_precision`` when every step asked, everything on an empty suite. Steps whose
``needed`` is ``None`` (nobody could judge them) are left out of the confusion counts;
steps whose ``type_match``/``action_match`` is ``None`` are left out of Type/SR. Per-task
means on an empty suite are 0.0 (no task did anything), so the counts stay numbers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

# The CONTRACT key names, in the order `evaluate` prints them.
STEP_METRIC_KEYS: tuple[str, ...] = (
    "type_acc", "sr", "hsr", "intervention_recall", "intervention_precision",
    "autonomy_precision", "autonomy_recall", "asked_share",
)
TASK_METRIC_KEYS: tuple[str, ...] = (
    "tsr", "re", "interventions_per_task", "clarifications_per_task", "steps_per_task", "tasks",
)
METRIC_KEYS: tuple[str, ...] = (
    "tasks", "tsr", "type_acc", "sr", "hsr", "intervention_recall", "intervention_precision",
    "autonomy_precision", "autonomy_recall", "asked_share", "re", "interventions_per_task",
    "clarifications_per_task", "steps_per_task",
)


@dataclass(frozen=True)
class StepLabel:
    """What one step contributes to the metrics. ``None`` means "not judged"."""

    needed: bool | None
    asked: bool
    type_match: bool | None = None
    action_match: bool | None = None
    # The calibrated P(right) the gate read for this step (None: uncalibrated backend);
    # evaluation reports the expected calibration error over these.
    p_right: float | None = None


@dataclass(frozen=True)
class TaskRecord:
    """What one episode contributes: its outcome and the labels of its steps."""

    task: str
    success: bool | None
    steps: int
    interventions: int = 0
    clarifications: int = 0
    optimal_steps: int | None = None
    labels: tuple[StepLabel, ...] = field(default_factory=tuple)
    # The episode reached a state with no path to success (CONTRACT ``dead_ends``).
    dead_end: bool = False
    # Proposals that tapped an element the suite marks sensitive, and how many were asked.
    sensitive_steps: int = 0
    sensitive_asked: int = 0

    def per_task_json(self) -> dict[str, Any]:
        """The CONTRACT ``per_task`` entry (plus ``dead_end``)."""
        return {
            "task": self.task,
            "success": self.success is True,
            "steps": self.steps,
            "interventions": self.interventions,
            "clarifications": self.clarifications,
            "dead_end": self.dead_end,
        }


@dataclass(frozen=True)
class Confusion:
    """Counts of the four (asked, needed) cells over labelled steps."""

    caught: int = 0  # asked and needed (paper TN)
    interrupted: int = 0  # asked, not needed (paper FP)
    missed: int = 0  # needed, not asked (paper FN)
    autonomous: int = 0  # neither (paper TP)

    @property
    def total(self) -> int:
        return self.caught + self.interrupted + self.missed + self.autonomous

    @classmethod
    def of(cls, steps: Iterable[Any]) -> "Confusion":
        """Count steps; anything with ``needed`` and ``asked`` attributes will do."""
        caught = interrupted = missed = autonomous = 0
        for step in steps:
            needed = getattr(step, "needed", None)
            if needed is None:
                continue
            asked = bool(getattr(step, "asked", False))
            if asked and needed:
                caught += 1
            elif asked:
                interrupted += 1
            elif needed:
                missed += 1
            else:
                autonomous += 1
        return cls(caught, interrupted, missed, autonomous)


def ratio(numerator: float, denominator: float) -> float | None:
    """``numerator / denominator``, or ``None`` when the denominator is zero (undefined)."""
    if not denominator:
        return None
    return numerator / denominator


def _share(flags: Iterable[bool | None]) -> float | None:
    known = [flag for flag in flags if flag is not None]
    return ratio(sum(1 for flag in known if flag), len(known))


def step_metrics(steps: Iterable[Any]) -> dict[str, float | None]:
    """Type, SR and the HSR family over step labels (:class:`StepLabel` or duck-typed
    objects with ``needed`` and ``asked``; ``type_match``/``action_match`` are optional)."""
    steps = list(steps)
    c = Confusion.of(steps)
    return {
        "type_acc": _share(getattr(s, "type_match", None) for s in steps),
        "sr": _share(getattr(s, "action_match", None) for s in steps),
        "hsr": ratio(c.caught + c.autonomous, c.total),
        "intervention_recall": ratio(c.caught, c.caught + c.missed),
        "intervention_precision": ratio(c.caught, c.caught + c.interrupted),
        "autonomy_precision": ratio(c.autonomous, c.autonomous + c.missed),
        "autonomy_recall": ratio(c.autonomous, c.autonomous + c.interrupted),
        # The share of judged steps a person was asked about: what autonomy costs in
        # people's time (interventions per task also counts asks on unjudged steps).
        "asked_share": ratio(c.caught + c.interrupted, c.total),
    }


def relative_efficiency(task: TaskRecord) -> float | None:
    """``optimal_steps / steps`` for a succeeded task, clamped to [0, 1]; else ``None``.

    Clamped because an operator's take-over can finish in fewer agent-counted steps than
    the oracle's optimum; efficiency above the optimum is not meaningful.
    """
    if task.success is not True or task.optimal_steps is None:
        return None
    if task.steps <= 0:
        return 1.0 if task.optimal_steps <= 0 else None
    return max(0.0, min(1.0, task.optimal_steps / task.steps))


def task_metrics(tasks: Sequence[TaskRecord]) -> dict[str, float | int | None]:
    """TSR, RE and the per-task means."""
    n = len(tasks)
    efficiencies = [e for e in (relative_efficiency(t) for t in tasks) if e is not None]
    return {
        "tsr": ratio(sum(1 for t in tasks if t.success is True), n),
        "re": ratio(sum(efficiencies), len(efficiencies)),
        "interventions_per_task": ratio(sum(t.interventions for t in tasks), n) or 0.0,
        "clarifications_per_task": ratio(sum(t.clarifications for t in tasks), n) or 0.0,
        "steps_per_task": ratio(sum(t.steps for t in tasks), n) or 0.0,
        "tasks": n,
    }


def summarize(tasks: Sequence[TaskRecord]) -> dict[str, float | int | None]:
    """Every CONTRACT metric for one set of episodes (one threshold of one suite)."""
    tasks = list(tasks)
    out = task_metrics(tasks)
    out.update(step_metrics(label for task in tasks for label in task.labels))
    return {key: out[key] for key in METRIC_KEYS}


# --- proportions estimated from logged decisions ---------------------------------------

def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (95 % for z = 1.96); ``None`` when n = 0.

    Unlike the normal approximation it stays inside [0, 1] and is honest for small n and
    for proportions near 0 or 1 — the usual case for an agent that is mostly right.
    """
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be between 0 and n ({successes} of {n})")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * ((p * (1 - p) / n + z2 / (4 * n * n)) ** 0.5) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Proportion:
    """``successes`` of ``n`` with its Wilson interval (``value`` None when n = 0)."""

    successes: int
    n: int

    @property
    def value(self) -> float | None:
        return ratio(self.successes, self.n)

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson_interval(self.successes, self.n)

    def to_json(self) -> dict[str, Any]:
        low_high = self.interval
        return {"value": self.value, "successes": self.successes, "n": self.n,
                "low": low_high[0] if low_high else None,
                "high": low_high[1] if low_high else None}


def logged_decision_metrics(
    decided: Iterable[tuple[bool, bool]],
) -> dict[str, Proportion]:
    """Autonomy and intervention precision from the decisions people logged.

    Each item is ``(right, would_have_acted_alone)`` for one resolved intervention: the
    person approved (right) or replaced (wrong) the agent's action, and the step's
    confidence was at or above its γ (a guard stopped it; the gate alone would have let it
    act) or below. With approve as "the agent was right" (DESIGN.md, "Confidence is
    measured"):

    * ``intervention_precision`` = P(needed | asked) = wrong / all decided handoffs
    * ``autonomy_precision`` ≈ P(right | confident enough to act alone), estimated on the
      handoffs whose confidence was ≥ γ — the only confident steps a person judged
    * ``approval_rate`` = right / all decided handoffs
    """
    asked = confident = right_asked = right_confident = 0
    for right, alone in decided:
        asked += 1
        right_asked += bool(right)
        if alone:
            confident += 1
            right_confident += bool(right)
    return {
        "intervention_precision": Proportion(asked - right_asked, asked),
        "autonomy_precision": Proportion(right_confident, confident),
        "approval_rate": Proportion(right_asked, asked),
    }


# --- StaR toggle metrics (App. A.1, Eqs. 5–12) ------------------------------------------

TOGGLE_METRIC_KEYS: tuple[str, ...] = (
    "o_tmr", "o_amr", "p_tmr", "p_amr", "p_fnr", "n_amr", "n_fptr", "n_fpr",
)


@dataclass(frozen=True)
class ToggleOutcome:
    """One toggle sample: positive (the toggle must be clicked) or negative (COMPLETE)."""

    positive: bool
    predicted_type: str | None  # None: the backend gave no usable action
    type_match: bool
    match: bool
    # Negative samples only: the prediction is the click that would wrongly flip the toggle.
    inverse_match: bool = False


def toggle_metrics(samples: Iterable[ToggleOutcome]) -> dict[str, float | int | None]:
    """O-TMR, O-AMR, P-TMR, P-AMR, P-FNR, N-AMR, N-FPTR, N-FPR as fractions in [0, 1]
    (``None`` when their sample set is empty), plus the sample counts."""
    samples = list(samples)
    pos = [s for s in samples if s.positive]
    neg = [s for s in samples if not s.positive]
    return {
        "o_tmr": ratio(sum(s.type_match for s in samples), len(samples)),
        "o_amr": ratio(sum(s.match for s in samples), len(samples)),
        "p_tmr": ratio(sum(s.type_match for s in pos), len(pos)),
        "p_amr": ratio(sum(s.match for s in pos), len(pos)),
        # Eq. 9: a positive sample answered with COMPLETE(D), the missed toggle.
        "p_fnr": ratio(sum(s.predicted_type == "COMPLETE" for s in pos), len(pos)),
        "n_amr": ratio(sum(s.match for s in neg), len(neg)),
        # Eq. 11: a negative sample answered with any CLICK.
        "n_fptr": ratio(sum(s.predicted_type == "CLICK" for s in neg), len(neg)),
        # Eq. 12: ... and that click hits the toggle, so the state really flips.
        "n_fpr": ratio(
            sum(s.predicted_type == "CLICK" and s.inverse_match for s in neg), len(neg)
        ),
        "positives": len(pos),
        "negatives": len(neg),
    }
