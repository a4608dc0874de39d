"""``make demo`` behaves like a product (issue 15, item 12): DEBUG off with a generated
secret kept under var/, friendly error pages, one access-log line per request."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import http.cookiejar
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.frontend.conftest import _free_port, _wait_ready

ROOT = Path(__file__).resolve().parents[2]


def make(target: str, var: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KAIROS_VAR_DIR": str(var)}
    return subprocess.run(["make", "-s", target, f"PY={sys.executable}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=20) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_demo_keeps_a_generated_secret_under_var(tmp_path):
    out = make("secret", tmp_path)
    assert out.returncode == 0, out.stderr
    key = tmp_path / "secret_key"
    first = key.read_text().strip()
    assert len(first) >= 50
    assert stat.S_IMODE(key.stat().st_mode) == 0o600  # readable by its owner only
    assert make("secret", tmp_path).returncode == 0
    assert key.read_text().strip() == first  # kept: sessions survive a restart


def test_the_demo_server_runs_without_debug_and_logs_each_request_once(tmp_path):
    assert make("secret", tmp_path).returncode == 0
    env = {k: v for k, v in os.environ.items()
           if k not in ("DEBUG", "DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update({"KAIROS_VAR_DIR": str(tmp_path), "PYTHONUNBUFFERED": "1",
                "SECRET_KEY": (tmp_path / "secret_key").read_text().strip(),
                "ALLOWED_HOSTS": "127.0.0.1,localhost"})
    for args in (("migrate", "--noinput", "-v0"), ("collectstatic", "--noinput", "-v0"),
                 ("seed_demo", "--password", "demo-pw-1")):
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    port = _free_port()
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_ready(url, process)
            status, body = fetch(url + "/no-such-page/")
            assert status == 404
            assert "Page not found" in body and "/login/" in body  # a way back
            assert "URLconf" not in body and "api/" not in body  # no debug page of routes
            status, body = fetch(url + "/login/")
            assert status == 200
            css = body.split('rel="stylesheet" href="')[1].split('"')[0]
            assert fetch(url + css)[0] == 200  # static files without DEBUG
            # Logging in works over the demo's plain http (no cookie needs HTTPS).
            jar = http.cookiejar.CookieJar()
            opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
            form = opener.open(url + "/login/", timeout=20).read().decode()
            token = form.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
            data = urllib.parse.urlencode({"username": "operator", "password": "demo-pw-1",
                                           "csrfmiddlewaretoken": token}).encode()
            landed = opener.open(url + "/login/", data=data, timeout=20)
            assert landed.url.endswith("/console/"), landed.url
        finally:
            process.terminate()
            process.wait(timeout=20)
    lines = log_path.read_text().splitlines()
    page = [line for line in lines if "/no-such-page/" in line]
    access = [line for line in page if '"GET /no-such-page/ HTTP/1.1" 404' in line]
    assert len(access) == 1, lines
    assert len(page) == 2, page  # the access line and one warning, not a doubled warning
    assert sum('"GET /login/ HTTP/1.1" 200' in line for line in lines) == 2, lines


@pytest.mark.django_db
def test_a_server_error_shows_a_friendly_page(client, settings):
    settings.DEBUG = False
    settings.ROOT_URLCONF = "tests.frontend.failing_urls"
    client.raise_request_exception = False
    response = client.get("/boom/")
    assert response.status_code == 500
    assert b"Something went wrong" in response.content
    assert b"Traceback" not in response.content


def test_make_demo_on_a_busy_port_says_which_port_to_use_instead(tmp_path):
    """Issue 26, item 7: checked first, with a hint, not uvicorn's bare error at the end."""
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**os.environ, "KAIROS_VAR_DIR": str(tmp_path)}
        out = subprocess.run(["make", "-s", "port", f"PORT={port}", f"PY={sys.executable}"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert f"port {port} on 127.0.0.1 is already in use" in out.stderr
    assert f"make demo PORT={port + 1}" in out.stderr
    free = _free_port()
    out = subprocess.run(["make", "-s", "port", f"PORT={free}", f"PY={sys.executable}"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
