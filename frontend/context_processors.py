from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from access.roles import is_admin, is_operator


def roles(request: HttpRequest) -> dict[str, Any]:
    """Which surfaces the navigation offers: end users see only their tasks."""
    user = getattr(request, "user", None)
    return {"user_is_operator": is_operator(user), "user_is_admin": is_admin(user)}
