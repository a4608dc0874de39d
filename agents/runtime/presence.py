"""Who is at the console now: operators with an open ``/ws/operator/`` socket (issue 26).

One counter per operator in Django's cache (in-process memory in the embedded default,
Redis in the full stack, so every ``serve`` process sees the same), counted up when a
console connects and down when it goes; a console open in two tabs counts twice. The
names come from the database (the operators), so a counter is never the only record of
who exists.
"""
from __future__ import annotations

from django.core.cache import cache

# Long enough for any session; a serve process killed with consoles open leaves counters
# that end with it.
TTL = 12 * 3600


def _key(username: str) -> str:
    return f"kairos:online:{username}"


def arrive(username: str) -> None:
    cache.add(_key(username), 0, TTL)
    try:
        cache.incr(_key(username))
    except ValueError:  # expired between add and incr
        cache.set(_key(username), 1, TTL)


def leave(username: str) -> None:
    try:
        if cache.decr(_key(username)) <= 0:
            cache.delete(_key(username))
    except ValueError:
        pass


def online() -> list[str]:
    """The operators (and admins) with a console open, by name."""
    from django.contrib.auth import get_user_model
    from django.db.models import Q

    names = list(get_user_model().objects.filter(is_active=True).filter(
        Q(is_superuser=True) | Q(groups__name__in=("operators", "admins"))).distinct()
        .values_list("username", flat=True))
    counts = cache.get_many([_key(n) for n in names])
    return sorted(n for n in names if (counts.get(_key(n)) or 0) > 0)
