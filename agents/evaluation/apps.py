from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    """Installed only so Django finds the evaluation commands (``evaluate``, ``probe``,
    ``calibrate``, ``bench``…); it has no models and production code never imports it."""

    name = "agents.evaluation"
    label = "evaluation"
    verbose_name = "Evaluation"
