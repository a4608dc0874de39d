"""Whose γ a task runs at (issue 23.6, issue 26.3).

An admin's γ for a phone (else the installation's) is a floor for end users: they may
raise it for their own task, never lower it — over the API or the web form, a lower
``threshold`` is a 403 naming the phone's γ, and no task starts. Operators and admins may
lower it. The web form sends a γ only when the person changed it, so a task started from it
runs at the phone's γ, not the installation default.
"""
from __future__ import annotations

import pytest
from django.test import Client

from agents.runtime.models import Task
from devices.models import Device

pytestmark = pytest.mark.django_db


@pytest.fixture
def strict_phone(demo):
    """sim-1 with γ 5, set by an admin."""
    Device.objects.filter(name="sim-1").update(threshold=5)
    return Device.objects.get(name="sim-1")


def test_an_end_user_cannot_lower_the_phones_gamma_over_the_api(api, strict_phone,
                                                                 inline_steps):
    before = Task.objects.count()
    status, body = api("post", "/api/tasks", user="user", body={
        "instruction": "Turn on Wi-Fi", "device": "sim-1", "threshold": 0})
    assert status == 403
    assert "below the γ of 5 set for 'sim-1'" in body["detail"]
    assert "only operators and admins may lower it" in body["detail"]
    assert Task.objects.count() == before


def test_an_end_user_runs_at_the_phones_gamma_or_above(api, strict_phone, inline_steps):
    status, body = api("post", "/api/tasks", user="user", body={
        "instruction": "Turn on Wi-Fi", "device": "sim-1"})
    assert status == 201 and body["threshold"] == 5.0
    api("post", f"/api/tasks/{body['id']}/abort", user="user")
    Device.objects.filter(name="sim-2").update(threshold=2)
    status, body = api("post", "/api/tasks", user="user", body={
        "instruction": "Turn on Wi-Fi", "device": "sim-2", "threshold": 4.5})
    assert status == 201 and body["threshold"] == 4.5  # raising is the user's to choose


@pytest.mark.parametrize("who", ["operator", "admin"])
def test_operators_and_admins_may_lower_it(api, strict_phone, inline_steps, who):
    status, body = api("post", "/api/tasks", user=who, body={
        "instruction": "Turn on Wi-Fi", "device": "sim-1", "threshold": 0})
    assert status == 201 and body["threshold"] == 0.0


def test_the_installation_gamma_is_the_floor_of_a_phone_without_its_own(api, demo,
                                                                        inline_steps):
    status, body = api("post", "/api/tasks", user="user", body={
        "instruction": "Turn on Wi-Fi", "device": "sim-2", "threshold": 3})
    assert status == 403 and "below the γ of 4 set for 'sim-2'" in body["detail"]


@pytest.mark.parametrize("value", [True, False, "5", "0", [], {}])
def test_threshold_must_be_a_json_number(api, demo, value):
    status, body = api("post", "/api/tasks", user="operator", body={
        "instruction": "Turn on Wi-Fi", "device": "sim-2", "threshold": value})
    assert status == 400
    assert body["detail"].startswith("threshold: must be a number between 0 and 5")


def _browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_web_form_starts_at_the_chosen_phones_gamma(demo, strict_phone, inline_steps):
    client = _browser(demo["user"])
    page = client.get("/tasks/").content.decode()
    assert 'name="threshold" min="0" max="5" step="0.5" value=""' in page  # not pre-filled
    assert f'value="{strict_phone.id}" data-gamma="5"' in page
    response = client.post("/tasks/", {"instruction": "Turn on Wi-Fi",
                                       "device": str(strict_phone.id), "threshold": ""})
    assert response.status_code == 302
    assert Task.objects.get(owner=demo["user"]).threshold == 5.0


def test_the_web_form_refuses_an_end_users_lower_gamma_with_a_message(demo, strict_phone):
    client = _browser(demo["user"])
    response = client.post("/tasks/", {"instruction": "Turn on Wi-Fi",
                                       "device": str(strict_phone.id), "threshold": "0"})
    assert response.status_code == 403
    assert "below the γ of 5 set for &#x27;sim-1&#x27;" in response.content.decode()
    assert not Task.objects.filter(owner=demo["user"]).exists()
    operator = _browser(demo["operator"])
    response = operator.post("/tasks/", {"instruction": "Turn on Wi-Fi",
                                         "device": str(strict_phone.id), "threshold": "0"})
    assert response.status_code == 302
    assert Task.objects.get(owner=demo["operator"]).threshold == 0.0
