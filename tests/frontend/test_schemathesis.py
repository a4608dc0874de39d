"""Schemathesis (every check) against a real server on loopback, with a Bearer token: the
OpenAPI document describes what the API does (issue 15.11).

A bounded run for CI (``SCHEMATHESIS_MAX_EXAMPLES``, default 10 per operation; a fixed
seed, ``SCHEMATHESIS_SEED`` for another). Generated strings are UTF-8 without NUL, as the
document's description says strings must be (those two are tried on purpose in tests/test_fuzz.py, and answer 400).
The server runs with DEBUG off, and its log must show no traceback.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.frontend.conftest import running_server

ST = Path(sys.executable).parent / "st"
MAX_EXAMPLES = os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "10")
SEED = os.environ.get("SCHEMATHESIS_SEED", "20261123")


def test_schemathesis_finds_no_failure(tmp_path):
    if not ST.exists():
        pytest.fail("schemathesis is not installed (requirements-test.txt)")
    with running_server(tmp_path, DEBUG="0", ALLOWED_HOSTS="127.0.0.1",
                        SECRET_KEY="schemathesis-" + "k" * 50) as server:
        token = server.token("operator")
        # Tasks with tickets, so the linked (stateful) requests reach real objects.
        for device in ("sim-1", "sim-2"):
            status, _ = server.api("POST", "/api/tasks", token, {
                "instruction": "Turn on Wi-Fi", "device": device, "threshold": 5})
            assert status == 201
        run = subprocess.run(
            [str(ST), "--config-file", str(Path(__file__).with_name("schemathesis.toml")),
             "run", f"{server.url}/api/openapi.json", "--url", server.url,
             "--checks", "all", "-H", f"Authorization: Bearer {token}",
             "--max-examples", MAX_EXAMPLES, "--seed", SEED, "--workers", "1",
             "--generation-codec", "utf-8", "--generation-allow-x00", "false",
             "--no-color"],
            capture_output=True, text=True, timeout=280, cwd=tmp_path)  # its cache goes there
        log = server.log_tail(100_000)
    summary = re.search(r"(\d+) generated, .*", run.stdout)
    print(summary.group(0) if summary else run.stdout[-3000:])
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert summary and int(summary.group(1)) > 0, "schemathesis generated no case"
    assert "Traceback" not in log, log[-4000:]
