"""The development secret key may run offline commands but never serve with DEBUG off."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("DEBUG", "SECRET_KEY", "DJANGO_SETTINGS_MODULE")}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env={**clean, **env},
                          capture_output=True, text=True, timeout=120)


def test_serving_with_the_development_key_and_debug_off_is_refused():
    out = run("-c", "import kairos_web.asgi")
    assert out.returncode != 0
    assert "SECRET_KEY is not set" in out.stderr


def test_offline_commands_work_without_a_secret_key():
    out = run("manage.py", "makemigrations", "--check", "--dry-run")
    assert out.returncode == 0, out.stderr


def test_a_real_secret_key_serves_with_debug_off():
    out = run("-c", "import kairos_web.asgi", SECRET_KEY="x" * 50, ALLOWED_HOSTS="kairos.example")
    assert out.returncode == 0, out.stderr
