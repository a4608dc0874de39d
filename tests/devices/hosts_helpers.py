"""Device-host processes for the multi-host tests: start, list, kill."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from devices.adb.fake.rig import FakeAdbRig
from devices.host import announced_hosts
from tests.stack import clear_host_announcements, stack_env, wait_for  # noqa: F401 (re-exported)

ROOT = Path(__file__).resolve().parents[2]


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
    clear_host_announcements()
    env = stack_env(KAIROS_DEVICE_TIMEOUT="3")
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


