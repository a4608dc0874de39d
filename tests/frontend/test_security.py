"""Login throttling, the HTTPS switches and the Content-Security-Policy (issue 11.5)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "pw-for-tests-1"  # the demo fixture's

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()  # the test settings' in-process cache
    yield
    cache.clear()


def _login(client: Client, username: str, password: str, path: str = "/login/"):
    return client.post(path, {"username": username, "password": password})


def test_after_five_wrong_passwords_even_the_right_one_is_refused_for_a_while(demo, settings):
    client = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(settings.KAIROS_LOGIN_MAX_FAILURES):
        response = _login(client, "operator", "wrong")
        assert response.status_code == 200 and b"didn't match" in response.content
    response = _login(client, "operator", PASSWORD)
    assert response.status_code == 429
    assert b"Too many failed logins" in response.content
    assert "_auth_user_id" not in client.session

    # Another address, or another username from this one, is not locked out.
    assert _login(Client(REMOTE_ADDR="203.0.113.8"), "operator", PASSWORD).status_code == 302
    assert _login(client, "user", PASSWORD).status_code == 302


def test_a_successful_login_forgets_earlier_failures(demo, settings):
    client = Client(REMOTE_ADDR="203.0.113.9")
    for _ in range(settings.KAIROS_LOGIN_MAX_FAILURES - 1):
        _login(client, "operator", "wrong")
    assert _login(client, "operator", PASSWORD).status_code == 302
    for _ in range(settings.KAIROS_LOGIN_MAX_FAILURES - 1):
        _login(Client(REMOTE_ADDR="203.0.113.9"), "operator", "wrong")
    assert _login(Client(REMOTE_ADDR="203.0.113.9"), "operator", PASSWORD).status_code == 302


def test_the_admin_login_is_throttled_too(demo, settings):
    client = Client(REMOTE_ADDR="203.0.113.10")
    for _ in range(settings.KAIROS_LOGIN_MAX_FAILURES):
        _login(client, "admin", "wrong", "/admin/login/")
    response = _login(client, "admin", PASSWORD, "/admin/login/")
    assert response.status_code == 200 and b"Too many failed logins" in response.content
    assert "_auth_user_id" not in client.session


def _check_deploy(**env: str) -> str:
    base = {k: v for k, v in os.environ.items()
            if k not in ("DEBUG", "KAIROS_HTTPS", "DJANGO_SETTINGS_MODULE")}
    base.update({"DJANGO_SETTINGS_MODULE": "kairos_web.settings", "DEBUG": "0",
                 "SECRET_KEY": "k" + "x9Qz!7@pL#2" * 6, "ALLOWED_HOSTS": "kairos.example.org"})
    base.update(env)
    out = subprocess.run([sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT, env=base,
                         capture_output=True, text=True, timeout=120)
    return out.stdout + out.stderr


def test_check_deploy_is_clean_with_the_https_switch_and_warns_without():
    without = _check_deploy()
    assert {"W004", "W008", "W012", "W016"} <= set(re.findall(r"security\.(W\d+)", without))
    with_https = _check_deploy(KAIROS_HTTPS="1", SECURE_HSTS_PRELOAD="1")
    assert "System check identified no issues" in with_https, with_https


def test_the_csp_header_carries_a_nonce_that_the_pages_inline_scripts_use(demo, settings):
    settings.KAIROS_CSP = "1"  # read when a new Client builds its middleware chain
    client = Client()
    client.force_login(demo["operator"])
    response = client.get("/console/")
    policy = response["Content-Security-Policy"]
    nonce = re.search(r"'nonce-([^']+)'", policy).group(1)
    inline = re.findall(rb"<script(?![^>]*\bsrc=)([^>]*)>", response.content)
    assert inline and all(f'nonce="{nonce}"'.encode() in attrs for attrs in inline)
    assert client.get("/console/")["Content-Security-Policy"] != policy  # fresh per response


@pytest.mark.services
def test_failures_counted_by_one_process_lock_the_login_in_another(demo, settings):
    """In the full stack the counts live in Redis: a second server process sees them."""
    from tests.conftest import SERVICES_REDIS_URL

    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": SERVICES_REDIS_URL}}
    from frontend.security import clear_failures

    clear_failures("operator", "203.0.113.50")  # only this key: the Redis db is shared
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update({"DJANGO_SETTINGS_MODULE": "kairos_web.settings", "DEBUG": "1",
                "REDIS_URL": SERVICES_REDIS_URL})
    other_process = (
        "from frontend.security import record_failure\n"
        "for _ in range(5): record_failure('operator', '203.0.113.50')\n")
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", other_process], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    response = _login(Client(REMOTE_ADDR="203.0.113.50"), "operator", PASSWORD)
    assert response.status_code == 429
    clear_failures("operator", "203.0.113.50")
