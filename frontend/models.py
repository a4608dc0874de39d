from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token for the JSON API. Only its hash is stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="api_tokens")
    token_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=8)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @classmethod
    def issue(cls, user) -> tuple["ApiToken", str]:
        token = "kai_" + secrets.token_urlsafe(32)
        return cls.objects.create(user=user, token_hash=hash_token(token), prefix=token[:8]), token


class AuditEntry(models.Model):
    """One admin change to γ, a device or a user's roles: who, what, before and after."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=150, blank=True)  # kept if the user goes
    action = models.CharField(max_length=64)  # "gamma.default", "device.change", …
    target = models.CharField(max_length=255, blank=True)  # "device sim-1", "user bob"
    changes = models.JSONField(default=dict, blank=True)  # {field: [before, after]}
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "audit trail"

    def __str__(self) -> str:
        return f"{self.actor_name or 'system'}: {self.action} {self.target}"
