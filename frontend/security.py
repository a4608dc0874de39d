"""Login throttling and the Content-Security-Policy header.

Login throttling: after ``KAIROS_LOGIN_MAX_FAILURES`` wrong passwords for one username from
one address, that pair is locked out for ``KAIROS_LOGIN_LOCKOUT`` seconds (counted from
the first failure), even with the right password. The counts live in Django's cache:
Redis in the full stack, so every server process sees them; process memory in the
embedded default, which is a single process.
"""
from __future__ import annotations

import hashlib
import secrets
from typing import Any, Callable

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

THROTTLED = "throttled"


def _key(username: str, address: str) -> str:
    digest = hashlib.sha256(f"{username.strip().lower()}|{address}".encode(
        "utf-8", "replace")).hexdigest()
    return f"kairos:login-failures:{digest}"


def client_address(request: HttpRequest | None) -> str:
    return (request.META.get("REMOTE_ADDR") or "unknown") if request is not None else "unknown"


def is_locked_out(username: str, address: str) -> bool:
    return (cache.get(_key(username, address)) or 0) >= settings.KAIROS_LOGIN_MAX_FAILURES


def record_failure(username: str, address: str) -> int:
    key = _key(username, address)
    if cache.add(key, 1, timeout=settings.KAIROS_LOGIN_LOCKOUT):
        return 1
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=settings.KAIROS_LOGIN_LOCKOUT)
        return 1


def clear_failures(username: str, address: str) -> None:
    cache.delete(_key(username, address))


class ThrottledLogin:
    """Mixin for Django's authentication forms: refuse a locked-out username+address
    before checking the password, count wrong passwords, forget them on success."""

    request: HttpRequest | None
    cleaned_data: dict[str, Any]

    def clean(self) -> dict[str, Any]:
        username = str(self.cleaned_data.get("username") or "")
        address = client_address(self.request)
        if username and is_locked_out(username, address):
            minutes = max(1, round(settings.KAIROS_LOGIN_LOCKOUT / 60))
            raise forms.ValidationError(
                f"Too many failed logins for this username from your address. "
                f"Try again in {minutes} minutes.", code=THROTTLED)
        try:
            cleaned = super().clean()  # type: ignore[misc]
        except forms.ValidationError as exc:
            if username and getattr(exc, "code", None) == "invalid_login":
                record_failure(username, address)
            raise
        clear_failures(username, address)
        return cleaned


class ThrottledLoginForm(ThrottledLogin, AuthenticationForm):
    pass


class ThrottledAdminLoginForm(ThrottledLogin, AdminAuthenticationForm):
    pass


class LoginView(auth_views.LoginView):
    form_class = ThrottledLoginForm

    def form_invalid(self, form: Any) -> HttpResponse:
        if form.has_error("__all__", THROTTLED):
            return self.render_to_response(self.get_context_data(form=form, throttled=True),
                                           status=429)
        return super().form_invalid(form)


# --- Content-Security-Policy -------------------------------------------------------

# Scripts only from this site, plus inline ones carrying this response's nonce; styles
# may be inline (screens are sized by a style attribute); images from data/blob URLs
# (live frames); sockets to this site.
DEFAULT_CSP = ("default-src 'self'; script-src 'self' 'nonce-{nonce}'; "
               "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
               "connect-src 'self' ws: wss:; object-src 'none'; base-uri 'self'; "
               "form-action 'self'; frame-ancestors 'none'")


class ContentSecurityPolicyMiddleware:
    """Sends ``KAIROS_CSP`` ("1": the default policy above, or a policy of your own;
    ``{nonce}`` in it is replaced by a fresh nonce, available to templates as
    ``request.csp_nonce``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response
        policy = settings.KAIROS_CSP
        self.policy = DEFAULT_CSP if policy in ("1", "true", "on", "yes") else policy

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.csp_nonce = secrets.token_urlsafe(16)  # type: ignore[attr-defined]
        response = self.get_response(request)
        if self.policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = self.policy.replace(
                "{nonce}", request.csp_nonce)  # type: ignore[attr-defined]
        return response
