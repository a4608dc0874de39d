"""The experience memory's storage (issue 25): what an installation learned from people.

Imported by :mod:`agents.runtime.models`. The pure matching is ``agents.brain.experience``;
the store that reads and writes these rows is ``agents.runtime.experience_store``. Rows are never updated in
place: a correction is a new row with polarity −1 (LEARNING lesson 7: the history stays,
so an admin can see why the agent did something), and forgetting an app deletes its rows.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models


class ExperienceEntry(models.Model):
    """One step a person decided or confirmed (polarity +1) or corrected (−1)."""

    app = models.CharField(max_length=128)  # the package
    signature = models.CharField(max_length=32)  # agents.brain.experience.screen.Signature.key
    tokens = models.JSONField(default=list)  # the signature's structure
    fields = models.JSONField(default=list)  # [[field id, filled], …]
    instruction = models.TextField()
    action = models.JSONField()  # agents.brain.experience.memory.ActionTemplate.to_json()
    action_key = models.CharField(max_length=255)
    pre = models.JSONField(default=dict)  # precondition: named state, target state, prev
    polarity = models.SmallIntegerField(default=1)
    source = models.CharField(max_length=16)  # approve | edit | takeover | verdict | …
    task = models.ForeignKey("agents.Task", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                           on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["app", "signature"], name="experience_lookup")]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.app}: {self.action_key} ({self.polarity:+d})"


class ExperienceScreen(models.Model):
    """Each kind of screen an app's entries were learned on, once: the near-match scan
    (a screen never seen exactly) reads these instead of every entry."""

    app = models.CharField(max_length=128)
    signature = models.CharField(max_length=32)
    tokens = models.JSONField(default=list)
    fields = models.JSONField(default=list)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["app", "signature"],
                                               name="experience_screen_once")]


class ExperienceOutcome(models.Model):
    """Judged proposals that came from memory, per kind ("agreed", "disputed"): what
    the calibrator's bound reads (``agents.brain.calibration.experience``)."""

    kind = models.CharField(max_length=32, unique=True)
    right = models.PositiveIntegerField(default=0)
    wrong = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.kind}: {self.right} right, {self.wrong} wrong"


class ExperienceEpisode(models.Model):
    """A task its end user confirmed, as a reference episode for planners (D-PoT §5.5)."""

    app = models.CharField(max_length=128)
    goal = models.TextField()
    start = models.TextField(blank=True)
    actions = models.JSONField(default=list)
    task = models.ForeignKey("agents.Task", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["app"], name="experience_episode_app")]
        ordering = ["id"]
