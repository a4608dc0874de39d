"""The whole product on an adb phone, in Chromium.

Full stack: PostgreSQL, Redis, a Celery worker process, ``serve`` without its embedded
worker, and two ``device_host`` processes on one Redis — one with the simulated phones,
one with the fake adb phone reached through the real adb server. A task on the adb phone
asks for a person; the operator opens the ticket, watches the phone's live scrcpy video,
takes over, taps the search field and types, and hands back.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

from devices.actions import Action
from devices.adb.fake.rig import FakeAdbRig, free_port
from devices.models import Device
from devices.sim import SimDevice
from frontend.models import ApiToken
from tests.frontend.conftest import save_screenshot
from tests.stack import clear_host_announcements, stack_env

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30_000
pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.django_db(transaction=True)]


def wait_for(predicate, timeout: float = 60.0, what: str = "condition"):
    """Poll for a state other processes produce (no event crosses to this process)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=2) as response:
            return response.status == 200
    except Exception:
        return False


@pytest.fixture(scope="module", autouse=True)
def _orm_beside_playwright():
    """Playwright's sync API keeps an event loop on this thread; the ORM calls here
    (set-up, checks, the database flush after the test) are plain synchronous ones, not
    calls from async code. Module-scoped so it outlives the flush."""
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "1"
    yield
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture
def stack(demo):
    rig = FakeAdbRig()
    phone = rig.attach(SimDevice("fake-adb"))
    phone.sim.perform(Action("OPENAPP", app="Shop"))
    clear_host_announcements()
    env = stack_env()
    port = free_port()
    logs = ROOT / "var" / "test-artifacts"
    logs.mkdir(parents=True, exist_ok=True)
    procs = []
    for name, cmd, extra in (
        ("host-sims", ["device_host", "--devices", "sim-1,sim-2", "--adb", "off"], {}),
        ("host-adb", ["device_host", "--devices", "", "--adb", "on"],
         {"ANDROID_ADB_SERVER_PORT": str(rig.port), "KAIROS_ADB_CONNECT": phone.serial}),
        ("serve", ["serve", "--host", "127.0.0.1", "--port", str(port)], {}),
    ):
        log = open(logs / f"adb-e2e-{name}.log", "w")
        procs.append((subprocess.Popen([sys.executable, "manage.py", *cmd], cwd=ROOT,
                                       env=dict(env, **extra), stdout=log,
                                       stderr=subprocess.STDOUT), log))
    log = open(logs / "adb-e2e-worker.log", "w")
    procs.append((subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "kairos_web", "worker", "--pool=threads",
         "--concurrency=2", "--loglevel=WARNING", "--without-gossip", "--without-mingle",
         "--without-heartbeat"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _healthy(url), what="serve")
        wait_for(lambda: Device.objects.filter(name=phone.serial, status="online").exists(),
                 what="the adb phone online")
        yield url, phone
    finally:
        for proc, log in procs:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
        rig.close()


def test_an_operator_watches_and_takes_over_an_adb_phone_in_the_full_stack(
        stack, browser, demo) -> None:
    url, phone = stack
    _, token = ApiToken.issue(demo["operator"])
    request = urllib.request.Request(
        url + "/api/tasks", method="POST",
        data=b'{"instruction": "Search the shop for red shoes", "device": "%s", '
             b'"threshold": 5}' % phone.serial.encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 201

    context = browser.new_context(viewport={"width": 1360, "height": 900})
    page = context.new_page()
    try:
        # The operator's session, made here (the login form has tests of its own).
        from django.test import Client

        client = Client()
        client.force_login(demo["operator"])
        context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                              "url": url}])
        page.goto(url + "/console/")
        row = page.locator("#queue tbody tr[data-ticket-id]", has_text="red shoes").first
        expect(row).to_be_visible(timeout=TIMEOUT)
        row.locator("a").click()
        page.get_by_role("button", name="Claim", exact=True).click()  # opening only shows it
        expect(page.locator("#holder")).to_contain_text("held by you", timeout=TIMEOUT)

        page.keyboard.press("t")  # take over: the phone's live video replaces the shot
        live = page.locator("#live-img")
        expect(live).to_have_attribute("data-frames", re.compile(r"\d+"), timeout=TIMEOUT)
        phone.actions.clear()

        # Tap the search field on the live video (device pixels 540, 364 of 1080 x 2400).
        box = live.bounding_box()
        page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 364 / 2400)
        expect(page.locator("#flash")).to_contain_text("Sent CLICK", timeout=TIMEOUT)
        page.fill("#type-text", "red shoes")
        page.locator("#type-form button[type=submit]").click()
        expect(page.locator("#flash")).to_contain_text("Sent TYPE", timeout=TIMEOUT)

        wait_for(lambda: any(a["type"] == "TYPE" for a in phone.actions), 20,
                 what="the text to reach the phone")
        click = next(a for a in phone.actions if a["type"] == "CLICK")
        assert abs(click["x"] - 540) <= 40 and abs(click["y"] - 364) <= 40
        field = next(n for n in phone.sim.observe().nodes if "Edit" in n.short_class)
        assert field.text == "red shoes"  # typed on the phone, through scrcpy's control
        save_screenshot(page, "console-adb-takeover")
        # the live video follows the phone: the Home key shows the launcher in new frames
        shown = live.get_attribute("data-frames")
        page.get_by_role("button", name="Home", exact=True).click()
        expect(page.locator("#flash")).to_contain_text("Sent PRESS_HOME", timeout=TIMEOUT)
        expect(live).not_to_have_attribute("data-frames", shown, timeout=TIMEOUT)
        assert phone.sim.observe().app == "com.android.launcher3"

        page.get_by_role("button", name="Hand back", exact=True).click()
        expect(page).to_have_url(url + "/console/", timeout=TIMEOUT)
        tile = page.locator(f".device-tile[data-device-name='{phone.serial}']")
        expect(tile.locator(".device-status")).to_have_text("adb · online")

        # The cable comes out: the console shows the phone offline.
        phone.adbd.unplug()
        wait_for(lambda: Device.objects.filter(name=phone.serial, status="offline").exists(),
                 what="the unplugged phone offline")
        page.reload()
        expect(tile.locator(".device-status")).to_have_text("adb · offline")
    finally:
        context.close()
