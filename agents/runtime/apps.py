from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured


class AgentsConfig(AppConfig):
    """The runtime is the Django app; its label stays ``agents``, so the tables
    (``agents_task``…), the migration history and the content types are those of before."""

    name = "agents.runtime"
    label = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        # The devices app asks who uses a phone through this (devices/occupancy.py).
        from agents.runtime.occupancy import TaskOccupancy
        from devices.occupancy import register

        register(TaskOccupancy())

        # A broken KAIROS_SENSITIVE_POLICY must stop the server at start, not let the
        # first sensitive tap through or crash a step later.
        from agents.brain.safety import PolicyError, current_policy

        try:
            current_policy()
        except PolicyError as exc:
            raise ImproperlyConfigured(f"KAIROS_SENSITIVE_POLICY: {exc}") from None
