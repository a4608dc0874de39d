"""Device-host processes for the multi-host tests: start, list, kill."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import pytest
from django.db import connection

from devices.adb.fake.rig import FakeAdbRig
from devices.host import announced_hosts

ROOT = Path(__file__).resolve().parents[2]


def wait_for(predicate, timeout: float = 60.0, what: str = "condition"):
    """Poll for a state other processes produce (no event crosses to this process)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Hosts:
    def __init__(self, env: dict[str, str], logs: Path):
        self.env = env
        self.logs = logs
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, label: str, *args: str, **env: str) -> subprocess.Popen:
        log = open(self.logs / f"device-host-{label}.log", "w")
        proc = subprocess.Popen([sys.executable, "manage.py", "device_host", *args], cwd=ROOT,
                                env=dict(self.env, **env), stdout=log, stderr=subprocess.STDOUT)
        self.procs[label] = proc
        return proc

    def listing(self) -> list[dict]:
        return announced_hosts(self.env["REDIS_URL"])

    def listing_command(self) -> str:
        out = subprocess.run([sys.executable, "manage.py", "device_host", "--list"],
                             cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=60)
        return out.stdout

    def owner_of(self, name: str) -> str | None:
        for host in self.listing():
            if name in host["devices"]:
                return host["host"]
        return None

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()


@pytest.fixture
def hosts():
    redis_url = os.environ["KAIROS_TEST_REDIS_URL"]
    import redis

    conn = redis.Redis.from_url(redis_url)
    for key in conn.scan_iter("kairos:devhost:*"):
        conn.delete(key)
    db = urlparse(os.environ["DATABASE_URL"])
    test_db_url = urlunparse(db._replace(path="/" + connection.settings_dict["NAME"]))
    env = dict(os.environ, DATABASE_URL=test_db_url, REDIS_URL=redis_url, DEBUG="1",
               PYTHONUNBUFFERED="1", DJANGO_SETTINGS_MODULE="kairos_web.settings",
               KAIROS_DEVICE_TIMEOUT="3")
    env.pop("KAIROS_TEST_REDIS_URL", None)
    logs = ROOT / "var" / "test-artifacts"
    logs.mkdir(parents=True, exist_ok=True)
    hosts = Hosts(env, logs)
    yield hosts
    hosts.stop_all()


@pytest.fixture
def adb_rig():
    rig = FakeAdbRig()
    yield rig
    rig.close()


