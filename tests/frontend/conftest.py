"""A real Kairos server and a real Chromium for browser tests.

The server is ``manage.py serve`` in its own process — the embedded default on a fresh
SQLite file, seeded with ``seed_demo`` — exactly what ``make demo`` runs. Tests talk to it
only as users do: through the browser, the JSON API and WebSockets.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "var" / "test-artifacts"
PASSWORD = "kairos-test-pw"
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class KairosServer:
    def __init__(self, base_url: str, env: dict[str, str], log_path: Path | None = None):
        self.url = base_url
        self.env = env
        self.log_path = log_path

    def log_tail(self, lines: int = 60) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def manage(self, *args: str) -> str:
        out = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env,
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed: {out.stderr[-2000:]}")
        return out.stdout

    def token(self, username: str) -> str:
        return self.manage("create_token", username).strip()

    def api(self, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")


def _wait_ready(url: str, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"kairos serve exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)  # polling a server's readiness: there is no event to await
    raise RuntimeError("kairos serve did not become ready")


@contextlib.contextmanager
def running_server(var: Path, **env_overrides: str) -> Iterator[KairosServer]:
    """``manage.py serve`` on a fresh SQLite file under ``var``, migrated and seeded."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "KAIROS_TEST_REDIS_URL")}
    # sim-3 and sim-4 are for tests that must start from, or may leave, a phone in a
    # state of its own (simulated phones keep their state across tasks, like real ones).
    env.update({"DEBUG": "1", "KAIROS_VAR_DIR": str(var), "PYTHONUNBUFFERED": "1",
                "KAIROS_SIM_DEVICES": "sim-1,sim-2,sim-3,sim-4,sim-5",
                "DJANGO_SETTINGS_MODULE": "kairos_web.settings",
                "KAIROS_CLARIFICATION_TIMEOUT": os.environ.get(
                    "KAIROS_TEST_CLARIFICATION_TIMEOUT", "8"),
                # The end user's flows run at caution 0 (only questions about what they
                # want stop the agent); end users may not go below the installation's γ
                # (issue 23.6), so this installation's is 0. Tests that want operators in
                # the loop ask for 4 or 5 explicitly.
                "KAIROS_DEFAULT_THRESHOLD": "0"})
    env.update(env_overrides)
    port = _free_port()
    server = KairosServer(f"http://127.0.0.1:{port}", env, var / "serve.log")
    server.manage("migrate", "--noinput")
    server.manage("seed_demo", "--password", PASSWORD)
    log = open(var / "serve.log", "w")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_ready(server.url, process)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture(scope="session")
def kairos_server(tmp_path_factory) -> Iterator[KairosServer]:
    with running_server(tmp_path_factory.mktemp("kairos-var")) as server:
        yield server


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


# Per module, not per session: Playwright's sync API keeps an event loop running on the
# main thread while it is open, which would break any async test collected after it.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        if os.environ.get("KAIROS_REQUIRE_SERVICES") == "1":
            pytest.fail("Debian's chromium is not installed (.ci/run installs it)")
        pytest.skip("Debian's chromium is not installed")
    from playwright.sync_api import sync_playwright

    from playwright.sync_api import expect

    # Every awaited condition is still required; 15 s instead of Playwright's 5 s only
    # tolerates a loaded CI machine (the server, its worker and Chromium share 2 cores).
    expect.set_options(timeout=15_000)
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)
    if report.when == "call" and report.failed:
        # The pages as they were when the test failed: fixtures torn down before
        # ``login``'s (task_factory aborts its tasks) would otherwise change what the
        # screenshots show — a cancelled ticket, an empty queue — before they are taken.
        lines = []
        for i, context in enumerate(getattr(item, "browser_contexts", [])):
            for j, page in enumerate(context.pages):
                try:
                    path = save_screenshot(page, f"FAILED-{item.name}-{i}-{j}")
                    lines.append(f"screenshot: {path} of {page.url}")
                except Exception as exc:  # a crashed page still lets the others be saved
                    lines.append(f"no screenshot of page {i}-{j}: {exc}")
        if lines:
            report.sections.append(("Screenshots at the failure", "\n".join(lines)))


@pytest.fixture
def login(request, browser, kairos_server):
    """``login(username)`` → a logged-in page in a fresh browser context.

    When the test fails, every page's screenshot is kept under ``var/test-artifacts`` (taken
    at the failure, by ``pytest_runtest_makereport``) and the end of the server's log is
    printed, so a failure in CI explains itself.
    """
    contexts = []
    request.node.browser_contexts = contexts

    def _login(username: str) -> Any:
        context = browser.new_context(viewport={"width": 1360, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.goto(kairos_server.url + "/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_load_state("networkidle")
        return page

    yield _login
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        print("--- end of the server's log ---\n" + kairos_server.log_tail())
    for context in contexts:
        context.close()



@pytest.fixture(scope="module")
def operator_token(kairos_server) -> str:
    return kairos_server.token("operator")


@pytest.fixture
def task_factory(kairos_server, operator_token):
    """Create low-confidence tasks (γ 5: every step waits for a person); abort whatever is
    still running afterwards. ``owner="user"`` makes it the end user's task."""
    created: list[str] = []

    def _create(instruction: str = "Turn on Wi-Fi", device: str = "sim-1",
                threshold: float = 5, owner: str = "operator") -> dict[str, Any]:
        # A unique suffix lets the test find its own rows in a shared queue.
        text = f"{instruction} [{uuid.uuid4().hex[:6]}]"
        token = operator_token if owner == "operator" else kairos_server.token(owner)
        status, task = kairos_server.api("POST", "/api/tasks", token, {
            "instruction": text, "device": device, "threshold": threshold})
        assert status == 201, task
        created.append(task["id"])
        return task

    yield _create
    for task_id in created:
        kairos_server.api("POST", f"/api/tasks/{task_id}/abort", operator_token)

ACTIVE_STATUSES = ("queued", "running", "waiting_operator", "waiting_user", "taken_over")


def free_phone(server: "KairosServer", device: str) -> None:
    """Abort what earlier tests left running on ``device``: one task drives a phone at a
    time, so a leftover would queue the next test's task behind it."""
    operator = server.token("operator")
    _, tasks = server.api("GET", "/api/tasks", operator)
    for task in tasks:
        if task["device"] == device and task["status"] in ACTIVE_STATUSES:
            server.api("POST", f"/api/tasks/{task['id']}/abort", operator)


def save_screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path

