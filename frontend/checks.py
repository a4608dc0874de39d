"""``manage.py check --deploy`` warnings of Kairos's own (issue 23.7).

Django's own deploy checks pass the development fallback key (it is long and varied) and
say nothing of ``ALLOWED_HOSTS=*``; both are choices no deployment should make unknowingly.
"""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Tags, Warning, register


@register(Tags.security, deploy=True)
def kairos_deploy_checks(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    warnings = []
    # DEV_SECRET_KEY is a setting of its own (kairos_web/settings.py), read like any other.
    if settings.SECRET_KEY == settings.DEV_SECRET_KEY:
        warnings.append(Warning(
            "SECRET_KEY is Kairos's public development fallback: anyone can forge sessions.",
            hint="Set SECRET_KEY in the environment to a long random value "
                 "(make demo keeps one in var/secret_key).", id="kairos.W001"))
    if "*" in settings.ALLOWED_HOSTS:
        warnings.append(Warning(
            "ALLOWED_HOSTS contains '*': any Host header is accepted, and sockets from any "
            "site's page pass the Origin check.",
            hint="List the host names Kairos is served as, e.g. "
                 "ALLOWED_HOSTS=kairos.example.org.", id="kairos.W002"))
    if settings.KAIROS_TRUSTED_PROXIES == "*":
        warnings.append(Warning(
            "KAIROS_TRUSTED_PROXIES is '*': any client can set its own address with "
            "X-Forwarded-For and sidestep the login lockout.",
            hint="Name the proxies' addresses, e.g. KAIROS_TRUSTED_PROXIES=127.0.0.1.",
            id="kairos.W003"))
    return warnings
