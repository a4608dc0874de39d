"""Shared by the calibration tests (test_calibration*.py): synthetic labelled evidence."""
from __future__ import annotations

import random

from agents.brain.calibration.fit import Labelled


def synthetic(n: int = 600, seed: int = 7, suite: str = "s", app: str = "a") -> list[Labelled]:
    """Two rules; accuracy rises with the claimed score, and 'navigate' is worse."""
    rng = random.Random(seed)
    samples = []
    for _ in range(n):
        rule = rng.choice(["toggle", "navigate"])
        raw = float(rng.choice([2, 3, 4, 5]))
        p = {2: 0.3, 3: 0.6, 4: 0.85, 5: 0.98}[int(raw)] - (0.2 if rule == "navigate" else 0)
        samples.append(Labelled({"rule": rule, "raw": raw, "action": "CLICK",
                                 "strength": rng.random()}, rng.random() < p, suite, app))
    return samples
