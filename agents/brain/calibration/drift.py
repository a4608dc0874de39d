"""Drift: an app whose confident steps are now wrong too often goes back to asking
(issue 24, item 5). Pure Python.

The rule, bounded and stated (docs/models.md, "Drift"): take the app's most recent
``WINDOW`` (20) *confident-step labels* — spot checks, handoffs of steps whose confidence
was at or above their γ (stopped by a guard, or asked because of drift), acted-alone steps
an end user confirmed — oldest first. With at least ``MIN_LABELS`` (5) of them, the app
has **drifted** when the one-sided 95 % upper Wilson bound (z = 1.645) of their share
right is below the target autonomy precision (0.95): the labels show, beyond chance,
that its confident steps are right less often than the target allows. While it has
drifted every step on it asks a person, whatever its confidence; each of those answers
is a new confident-step label, so the app acts alone again as soon as the window no
longer shows drift.

What it takes, worst case (:func:`labels_to_trigger`, checked by the tests): at the
target 0.95 a full window of 20 triggers at 3 wrong labels (the bound of 17/20 is 0.938;
of 18/20, 0.966), a window of 5–13 at 2. So when every confident step after a change is
wrong, the app asks again after at most 3 post-change labels once it had 2 or more earlier
labels (2 when it had 3–11), and after at most 5 in any case (an app with no earlier
labels waits for ``MIN_LABELS``). Recovery: a drifted window holds at least 3 wrong labels among its
newest; 18 right labels in a row push all but 2 of them out, so at most 18 consecutive
right labels bring the app back. False alarms are possible by design (an app right
exactly 95 % of the time shows 3 or more wrong in 20 about 7.5 % of the time) and cost
only extra questions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from agents.brain.calibration.calibrator import wilson_interval

WINDOW = 20
MIN_LABELS = 5
Z_ONE_SIDED_95 = 1.645
DEFAULT_TARGET = 0.95


@dataclass(frozen=True)
class DriftState:
    app: str
    labels: int  # in the window
    right: int
    upper: float | None  # one-sided 95 % upper bound of the share right; None: too few
    target: float
    drifted: bool

    @property
    def wrong(self) -> int:
        return self.labels - self.right

    def describe(self) -> str:
        if self.upper is None:
            return f"{self.app}: {self.labels} confident-step labels, too few to judge"
        verdict = "below" if self.drifted else "not below"
        return (f"{self.app}: its last {self.labels} confident steps were right "
                f"{self.right} times (upper bound {self.upper:.3f}, {verdict} the target "
                f"{self.target:g})")


def drift_state(app: str, newest_first: Sequence[bool], *, target: float = DEFAULT_TARGET,
                window: int = WINDOW, min_labels: int = MIN_LABELS) -> DriftState:
    """Judge ``app`` from its confident-step labels (True = right), newest first; only
    the first ``window`` are read."""
    recent = list(newest_first[:window])
    right = sum(1 for r in recent if r)
    if len(recent) < min_labels:
        return DriftState(app, len(recent), right, None, target, False)
    upper = wilson_interval(right, len(recent), Z_ONE_SIDED_95)[1]
    return DriftState(app, len(recent), right, upper, target, upper < target)


def labels_to_trigger(earlier_right: int, *, target: float = DEFAULT_TARGET,
                      window: int = WINDOW, min_labels: int = MIN_LABELS) -> int:
    """How many wrong labels in a row, after ``earlier_right`` right ones, flag drift."""
    history = [True] * earlier_right
    for k in range(1, window + min_labels + 1):
        labels = [False] * k + history  # newest first
        if drift_state("app", labels, target=target, window=window,
                       min_labels=min_labels).drifted:
            return k
    raise AssertionError("the rule never triggers")  # pragma: no cover


def right_labels_to_recover(wrong_in_a_row: int, *, target: float = DEFAULT_TARGET,
                            window: int = WINDOW, min_labels: int = MIN_LABELS) -> int:
    """How many right labels in a row, after ``wrong_in_a_row`` wrong ones (and a full
    window of right ones before them), clear the drift."""
    history = [False] * wrong_in_a_row + [True] * window
    for k in range(0, window + 1):
        labels = [True] * k + history
        if not drift_state("app", labels, target=target, window=window,
                           min_labels=min_labels).drifted:
            return k
    raise AssertionError("the rule never clears")  # pragma: no cover
