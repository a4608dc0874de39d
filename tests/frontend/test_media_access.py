"""Step screenshots (``/media/steps/…``) follow their task's access rules and accept the
API's Bearer token (issues 11.4, 15.11); odd paths are a 404, never a 500."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.test import Client

from agents.runtime.models import Step
from agents.runtime.services import lifecycle
from devices.models import Device
from frontend.models import ApiToken

pytestmark = pytest.mark.django_db

JPEG = b"\xff\xd8\xff\xe0" + b"kairos-test-frame" * 10


@pytest.fixture
def screenshot_url(demo) -> str:
    task = lifecycle.create_task(demo["user"], Device.objects.get(name="sim-1"), "Turn on Wi-Fi",
                                 start=False)
    step = Step(task=task, index=0)
    step.screenshot.save(f"{task.id}-0.jpg", ContentFile(JPEG), save=True)
    return step.screenshot.url


def _session(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_owner_and_operators_see_the_screenshot(demo, screenshot_url):
    for user in (demo["user"], demo["operator"], demo["admin"]):
        response = _session(user).get(screenshot_url)
        assert response.status_code == 200, user
        assert b"".join(response.streaming_content) == JPEG
        assert response["Content-Type"] == "image/jpeg"


def test_the_screenshot_url_of_the_api_works_with_the_bearer_token(api, demo, screenshot_url):
    from agents.runtime.models import Task

    task = Task.objects.get()
    status, body = api("get", f"/api/tasks/{task.id}", user="user")
    assert body["steps"][0]["screenshot_url"] == screenshot_url
    _, token = ApiToken.issue(demo["user"])
    response = Client().get(screenshot_url, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200 and b"".join(response.streaming_content) == JPEG


def test_another_end_user_gets_a_404(demo, screenshot_url):
    other = User.objects.create_user("mallory", password="x" * 12)
    assert _session(other).get(screenshot_url).status_code == 404
    _, token = ApiToken.issue(other)
    assert Client().get(screenshot_url, HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 404


def test_anonymous_and_bad_tokens_get_a_json_401(screenshot_url):
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer kai_wrong"}):
        response = Client().get(screenshot_url, **headers)
        assert response.status_code == 401
        assert response.json() == {"detail": "authentication required"}


@pytest.mark.parametrize("path", [
    "/media/steps/" + "a" * 5000 + ".jpg", "/media/steps/%00.jpg", "/media/../../etc/passwd",
    "/media/steps/../../kairos_web/settings.py", "/media/", "/media/steps/nope.jpg",
    "/media/%ED%A0%80",
], ids=["5000-chars", "nul", "dotdot", "dotdot-in-steps", "root", "unknown", "surrogate"])
def test_odd_media_paths_are_a_404(demo, path):
    response = _session(demo["admin"]).get(path)
    assert response.status_code == 404
