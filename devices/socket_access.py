"""Open sockets follow their user's access while they are open (issue 23.3).

A socket checks who may use it when it opens; without more, it would keep that access
until it closes — an operator logged out, removed from the operators group, deactivated or
demoted would keep receiving other users' tickets, chats and phone frames. Every Kairos
socket therefore joins its user's group (``user_group``), and every change of that user's
access sends ``access.changed`` there after the change commits: logout (with the session
that ended), group membership in either direction, permissions, the user's own row
(``is_active``, ``is_superuser``, password) and its deletion. Each socket then re-reads
its user from the session store and re-checks its own rule
(``KairosJsonConsumer.recheck_access``), closing with 4401 (no longer logged in) or 4403
(no longer allowed).
"""
from __future__ import annotations

from importlib import import_module
from typing import Any, Iterable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Group
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete

ACCESS_CHANGED = "access.changed"


def user_group(user_id: Any) -> str:
    return f"user.{user_id}"


def session_user(session_key: str | None) -> Any:
    """The user a session store holds now for ``session_key`` (anonymous when the session
    ended, its user is inactive or gone, or its password changed) — never the copy a
    socket's scope took when it opened."""
    from django.contrib.auth import get_user

    if not session_key:
        return AnonymousUser()

    class _Request:
        session = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)

    return get_user(_Request())


def access_changed(user_ids: Iterable[Any], *, session_key: str | None = None) -> None:
    """Tell the open sockets of ``user_ids`` to re-check their access, once the change
    commits."""
    from devices.streaming import send_to_group

    message = {"type": ACCESS_CHANGED, "session_key": session_key}
    for user_id in {u for u in user_ids if u is not None}:
        group = user_group(user_id)
        transaction.on_commit(lambda group=group: send_to_group(group, message))


def _on_logout(sender: Any, request: Any = None, user: Any = None, **kwargs: Any) -> None:
    if user is None:
        return
    session = getattr(request, "session", None)
    access_changed([user.pk], session_key=getattr(session, "session_key", None))


def _on_user_saved(sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    if kwargs.get("created") or (update_fields and set(update_fields) <= {"last_login"}):
        return  # a new user has no socket; a login changes nobody's access
    access_changed([instance.pk])


def _on_user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    access_changed([instance.pk])


def _users_of_groups(group_ids: Iterable[Any]) -> list[Any]:
    return list(get_user_model().objects.filter(groups__in=list(group_ids)).values_list(
        "pk", flat=True))


def _on_memberships(sender: Any, instance: Any, action: str, reverse: bool, model: Any,
                    pk_set: Any, **kwargs: Any) -> None:
    """``user.groups`` / ``group.user_set`` and ``user.user_permissions`` changed."""
    if action == "pre_clear" and reverse:  # group.user_set.clear(): who was in it
        lookup = "groups" if isinstance(instance, Group) else "user_permissions"
        instance._kairos_cleared = list(
            model.objects.filter(**{lookup: instance.pk}).values_list("pk", flat=True))
        return
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if not reverse:  # the user's own set changed
        access_changed([instance.pk])
    elif action == "post_clear":
        access_changed(getattr(instance, "_kairos_cleared", []))
    else:  # a group's (or a permission's) users changed: pk_set are users
        access_changed(pk_set or [])


def _on_group_permissions(sender: Any, instance: Any, action: str, reverse: bool,
                          pk_set: Any, **kwargs: Any) -> None:
    """A group's permissions changed: every member re-checks."""
    if action == "pre_clear" and reverse:
        instance._kairos_groups = list(instance.group_set.values_list("pk", flat=True))
        return
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if not reverse:
        access_changed(_users_of_groups([instance.pk]))
    elif action == "post_clear":
        access_changed(_users_of_groups(getattr(instance, "_kairos_groups", [])))
    else:
        access_changed(_users_of_groups(pk_set or []))


def _on_group_deleting(sender: Any, instance: Any, **kwargs: Any) -> None:
    access_changed(_users_of_groups([instance.pk]))


def _on_group_saved(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    if not created:  # a renamed group may no longer be "operators"
        access_changed(_users_of_groups([instance.pk]))


def connect_signals() -> None:
    User = get_user_model()
    uid = "kairos-socket-access"
    user_logged_out.connect(_on_logout, dispatch_uid=uid)
    post_save.connect(_on_user_saved, sender=User, dispatch_uid=uid)
    post_delete.connect(_on_user_deleted, sender=User, dispatch_uid=uid)
    m2m_changed.connect(_on_memberships, sender=User.groups.through, dispatch_uid=uid)
    m2m_changed.connect(_on_memberships, sender=User.user_permissions.through,
                        dispatch_uid=uid + "-perms")
    m2m_changed.connect(_on_group_permissions, sender=Group.permissions.through,
                        dispatch_uid=uid)
    pre_delete.connect(_on_group_deleting, sender=Group, dispatch_uid=uid)
    post_save.connect(_on_group_saved, sender=Group, dispatch_uid=uid)
