"""The full stack as real processes a fault test can kill: device host and Celery workers.

Each process starts in its own session (process group), so ``kill(name)`` can kill a worker
with all its pool children at once, as a machine losing it would, and ``restart(name)``
starts it again with the same command. Logs go to ``var/test-artifacts/``.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "var" / "test-artifacts"


def database_url_for_tests() -> str:
    """DATABASE_URL pointed at the test database pytest-django created."""
    from django.db import connection

    db = urlparse(os.environ["DATABASE_URL"])
    return urlunparse(db._replace(path="/" + connection.settings_dict["NAME"]))


def clear_host_announcements() -> None:
    """Forget the device hosts an earlier test left announced in the services' Redis."""
    import redis

    conn = redis.Redis.from_url(os.environ["KAIROS_TEST_REDIS_URL"])
    for key in conn.scan_iter("kairos:devhost:*"):
        conn.delete(key)


def stack_env(**extra: str) -> dict[str, str]:
    """The environment of a full-stack process (device host, worker, serve) run by a test:
    the test database, the services' Redis, the real settings."""
    env = dict(os.environ, DATABASE_URL=database_url_for_tests(),
               REDIS_URL=os.environ["KAIROS_TEST_REDIS_URL"],
               DEBUG="1", PYTHONUNBUFFERED="1", DJANGO_SETTINGS_MODULE="kairos_web.settings")
    env.pop("KAIROS_TEST_REDIS_URL", None)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    env.update(extra)
    return env


def wait_for(predicate: Callable, timeout: float = 60.0, what: str = "condition",
             every: float = 0.1):
    """Poll for a state another process produces (no event crosses to this process)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


@dataclass
class Stack:
    devices: list[str]
    journal: Path
    workers: int = 1
    pool: str = "threads"
    concurrency: int = 2
    action_latency: float = 0.0
    env_extra: dict[str, str] = field(default_factory=dict)
    tag: str = "stack"
    serve_port: int | None = None  # also run the ASGI server on this port
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    starts: dict[str, int] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        return stack_env(KAIROS_SIM_DEVICES=",".join(self.devices), **self.env_extra)

    def command(self, name: str) -> list[str]:
        if name == "serve":
            return [sys.executable, "manage.py", "serve", "--port", str(self.serve_port)]
        if name == "device_host":
            return [sys.executable, "manage.py", "device_host", "--devices",
                    ",".join(self.devices), "--journal", str(self.journal),
                    "--action-latency", str(self.action_latency)]
        return [sys.executable, "-m", "celery", "-A", "kairos_web", "worker",
                f"--pool={self.pool}", f"--concurrency={self.concurrency}", "--loglevel=WARNING",
                "--without-gossip", "--without-mingle", "--without-heartbeat",
                "-n", f"{name}-{self.tag}@%h"]

    @property
    def names(self) -> list[str]:
        return (["device_host"] + [f"worker{n}" for n in range(1, self.workers + 1)]
                + (["serve"] if self.serve_port else []))

    def start(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.starts[name] = self.starts.get(name, 0) + 1
        log = open(ARTIFACTS / f"{self.tag}-{name}.log", "a")
        log.write(f"--- start {self.starts[name]} at {time.time():.3f}\n")
        log.flush()
        self.processes[name] = subprocess.Popen(
            self.command(name), cwd=ROOT, env=self.env(), stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        log.close()

    def start_all(self) -> None:
        for name in self.names:
            self.start(name)

    def kill(self, name: str, *, group: bool = True) -> None:
        """``kill -9`` the process (with its children when ``group``)."""
        process = self.processes[name]
        try:
            if group:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
        except ProcessLookupError:
            pass
        if group:
            process.wait(timeout=10)

    def kill_children(self, name: str) -> int:
        """``kill -9`` a worker's pool children only (prefork); returns how many."""
        out = subprocess.run(["pgrep", "-P", str(self.processes[name].pid)],
                             capture_output=True, text=True).stdout.split()
        for pid in out:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(out)

    def restart(self, name: str) -> None:
        self.start(name)

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for process in self.processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)

    def logs(self) -> str:
        return "\n".join((ARTIFACTS / f"{self.tag}-{n}.log").read_text(errors="replace")
                         for n in self.names if (ARTIFACTS / f"{self.tag}-{n}.log").exists())
