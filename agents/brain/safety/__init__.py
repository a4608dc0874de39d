"""Safety policies of the agent's brain: which actions a person must approve whatever
the agent's confidence (:mod:`agents.brain.safety.policy`). Pure Python."""
from agents.brain.safety.policy import (
    CONFIRMATION, Harm, HarmClass, PolicyError, SensitivePolicy, current_policy, load_policy,
)

__all__ = [
    "CONFIRMATION", "Harm", "HarmClass", "PolicyError", "SensitivePolicy", "current_policy",
    "load_policy",
]
