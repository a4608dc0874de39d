"""/api/devices for adb phones: kind and live status; an offline phone refuses tasks."""
from __future__ import annotations

import json

import pytest

from devices.models import Device
from frontend.models import ApiToken

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(client, demo):
    def call(method: str, path: str, user: str = "operator", body=None):
        _, token = ApiToken.issue(demo[user])
        response = getattr(client, method)(
            path, data=json.dumps(body) if body is not None else None,
            content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
        return response.status_code, response.json() if response.content else None
    return call


def test_adb_phones_are_listed_with_kind_and_online_busy_offline_status(api, phones,
                                                                        inline_steps):
    Device.objects.create(name="R58M123", kind="adb", serial="R58M123", status="online")
    Device.objects.create(name="emulator-5554", kind="adb", serial="emulator-5554",
                          status="offline")
    status, _ = api("post", "/api/tasks", body={"instruction": "Turn on Wi-Fi",
                                                "device": "sim-1"})
    assert status == 201
    _, body = api("get", "/api/devices")
    shown = {d["name"]: (d["kind"], d["status"]) for d in body}
    assert shown["R58M123"] == ("adb", "online")
    assert shown["emulator-5554"] == ("adb", "offline")
    assert shown["sim-1"] == ("sim", "busy")  # a task runs on it
    assert shown["sim-2"] == ("sim", "online")


def test_an_offline_phone_refuses_a_new_task_with_a_clear_message(api, phones):
    Device.objects.create(name="emulator-5554", kind="adb", status="offline")
    status, body = api("post", "/api/tasks", user="user",
                       body={"instruction": "Open Maps", "device": "emulator-5554"})
    assert status == 409
    assert "emulator-5554' is offline" in body["detail"]
    assert not Device.objects.get(name="emulator-5554").tasks.exists()
