from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured


class AgentsConfig(AppConfig):
    name = "agents"

    def ready(self) -> None:
        # A broken KAIROS_SENSITIVE_POLICY must stop the server at start, not let the
        # first sensitive tap through or crash a step later.
        from agents.safety import PolicyError, current_policy

        try:
            current_policy()
        except PolicyError as exc:
            raise ImproperlyConfigured(f"KAIROS_SENSITIVE_POLICY: {exc}") from None
