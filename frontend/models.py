from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models

from access.audit import AuditEntry  # noqa: F401  (the trail's table is frontend's: see access.audit)


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
