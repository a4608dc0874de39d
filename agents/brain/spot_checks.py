"""Spot checks: a random share of the steps the gate would let act alone is asked anyway.

Pure Python (no Django). Only a person's decision on an *asked* step labels the agent, so
without these the steps that act alone — the ones the autonomy-precision promise is
about — are never checked. A uniform random sample of them is an unbiased label of that
precision (issue 24, item 2).

The service layer draws with ``secrets.SystemRandom`` (the operating system's entropy):
no backend sees the draw or can predict it, so a model cannot learn to behave differently
on checked steps. Tests inject a seeded ``random.Random``.
"""
from __future__ import annotations

import math
from typing import Protocol

SPOT_CHECK_NOTE = ("A spot check: a random check of a step the agent was sure of. It would "
                   "have acted alone; your decision measures how often such steps are right.")


class Draw(Protocol):
    def random(self) -> float: ...


def spot_check(share: float, rng: Draw) -> bool:
    """Ask this would-be autonomous step anyway? True with probability ``share`` (0–1).

    Call it only for a step the gate decided to execute: a step already asked for
    another reason (low confidence, a sensitive or guarded action, a question) is never
    drawn.
    """
    if share <= 0:
        return False
    if share >= 1:
        return True
    return rng.random() < share


def rate_interval(share: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % (normal-approximation) interval of the share of ``n`` draws checked."""
    half = z * math.sqrt(share * (1 - share) / n)
    return share - half, share + half


def system_rng() -> Draw:
    import secrets

    return secrets.SystemRandom()
