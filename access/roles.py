"""The roles (docs/security.md): end users, operators (group ``operators``) and admins
(group ``admins``, or a superuser). An admin is an operator too."""
from __future__ import annotations

from typing import Any


def is_operator(user: Any) -> bool:
    return bool(user and user.is_authenticated and (
        user.is_superuser or user.groups.filter(name__in=("operators", "admins")).exists()
    ))


def is_admin(user: Any) -> bool:
    return bool(user and user.is_authenticated and (
        user.is_superuser or user.groups.filter(name="admins").exists()
    ))
