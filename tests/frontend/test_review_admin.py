"""Metrics, calibration and γ, the Django admin for what admins manage, and the audit trail."""
from __future__ import annotations

import re

import pytest

from access.errors import Conflict
from access.roles import is_operator
from agents.runtime.models import Task
from agents.runtime.services import lifecycle, validation
from devices.models import Device
from access.audit import AuditEntry
from frontend.models import ApiToken
from tests.frontend.review_data import run_episodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def episodes(demo, scripted, inline_steps, phones):
    return run_episodes(demo, scripted, inline_steps, phones)


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_metrics_count_logged_work_with_wilson_intervals(client, demo, episodes):
    client.force_login(demo["admin"])
    page = client.get("/review/metrics/", {"by": "backend"}).content.decode()
    row = text(re.search(r'<tr data-key="scripted">(.*?)</tr>', page, re.S).group(1))
    # 3 tasks, each with one decided intervention at confidence 2 (< γ 4): one approved.
    # TSR: no task here has a success predicate, so none is judged ("–").
    assert row.startswith(" scripted 3 3 / 0 / 0 / 0 – 2.3 1.00 0.00 ")
    assert "0.33 [0.06–0.79] n=3" in row  # approval rate
    assert "0.67 [0.21–0.94] n=3" in row  # intervention precision
    # No decided step had confidence ≥ γ: autonomy precision cannot be estimated.
    assert row.count("–") >= 1
    day = client.get("/review/metrics/").content.decode()
    assert re.search(r'<tr data-key="\d{4}-\d\d-\d\d">', day)

    bad = client.get("/review/metrics/", {"by": "month", "since": "soon"})
    assert bad.status_code == 400
    assert "by: &#x27;month&#x27; is not one of" in bad.content.decode()
    assert "since: &#x27;soon&#x27; is not a date" in bad.content.decode()


def test_calibration_shows_reliability_and_what_each_gamma_would_do(client, demo, episodes):
    client.force_login(demo["admin"])
    page = client.get("/review/calibration/").content.decode()
    assert '<svg' in page and 'data-backend="scripted"' in page
    section = re.search(r'<section class="card" data-backend="scripted">(.*?)</section>', page,
                        re.S).group(1)
    # At γ = 2.5 every scored step asks except the final COMPLETE (confidence 5).
    assert re.search(r'data-gamma="2.5".*?0.50 <span class="ci">\(3 of 6\)', section, re.S)
    # 1 of 3 judged steps right at confidence 2: no γ reaches 0.95.
    assert "No γ reaches autonomy precision 0.95" in section
    bad = client.get("/review/calibration/", {"target": "2"})
    assert bad.status_code == 400 and "is not an autonomy precision" in bad.content.decode()


def test_an_admin_sets_the_default_and_a_phones_gamma_for_new_tasks(client, demo, phones):
    client.force_login(demo["admin"])
    sim1, sim2 = Device.objects.get(name="sim-1"), Device.objects.get(name="sim-2")
    response = client.post("/review/calibration/", {"scope": "default", "gamma": "3.5"})
    assert response.status_code == 302
    response = client.post("/review/calibration/", {"scope": "device", "device": "sim-2",
                                                    "gamma": "2"})
    assert response.status_code == 302
    sim2.refresh_from_db()
    one = lifecycle.create_task(demo["user"], sim1, "Open the clock", start=False)
    two = lifecycle.create_task(demo["user"], sim2, "Open the clock", start=False)
    assert (one.threshold, two.threshold) == (3.5, 2.0)
    page = client.get("/review/calibration/").content.decode()
    assert 'id="current-default">3.5<' in page

    for bad in ("7", "abc", "nan"):
        response = client.post("/review/calibration/", {"scope": "default", "gamma": bad})
        assert response.status_code == 400 and "γ must be" in response.content.decode()
    response = client.post("/review/calibration/", {"scope": "device", "device": "nope",
                                                    "gamma": "2"})
    assert response.status_code == 404
    response = client.post("/review/calibration/", {"scope": "everything", "gamma": "2"})
    assert response.status_code == 400 and "scope must be" in response.content.decode()
    assert validation.default_threshold() == 3.5  # nothing was lost to the bad requests

    client.post("/review/calibration/", {"scope": "default", "gamma": ""})
    assert validation.default_threshold() == 4.0  # back to KAIROS_DEFAULT_THRESHOLD
    trail = [(e.action, e.target, e.changes) for e in AuditEntry.objects.order_by("id")]
    assert trail == [
        ("gamma.default", "installation", {"default_threshold": [None, 3.5]}),
        ("gamma.device", "device sim-2", {"threshold": [None, 2.0]}),
        ("gamma.default", "installation", {"default_threshold": [3.5, None]}),
    ]
    audit = client.get("/review/audit/").content.decode()
    assert "gamma.device" in audit and "admin" in audit
    bad = client.get("/review/audit/", {"page": "x"})
    assert bad.status_code == 400 and "is not a page number" in bad.content.decode()
    assert "gamma.device" in bad.content.decode()  # the trail is still shown


def test_the_default_gamma_is_also_set_in_the_django_admin(client, demo):
    client.force_login(demo["admin"])
    response = client.post("/admin/agents/installationsettings/add/",
                           {"default_threshold": "3"})
    assert response.status_code == 302
    assert validation.default_threshold() == 3.0
    response = client.post("/admin/agents/installationsettings/1/change/",
                           {"default_threshold": "9"})
    assert response.status_code == 200 and "γ must be between 0 and 5" in \
        response.content.decode()
    assert validation.default_threshold() == 3.0
    assert AuditEntry.objects.get().changes == {"default_threshold": [None, 3.0]}


def _device_form(device: Device, **changes) -> dict:
    data = {"name": device.name, "kind": device.kind, "serial": device.serial,
            "enabled": "on" if device.enabled else "", "threshold": device.threshold or "",
            "users": [u.pk for u in device.users.all()], "width": device.width,
            "height": device.height, "apps": "[]"}
    data.update(changes)
    return {k: v for k, v in data.items() if v != ""}


def test_an_admin_grants_a_user_a_phone_and_disables_another(client, demo, phones):
    client.force_login(demo["admin"])
    sim1 = Device.objects.get(name="sim-1")
    url = f"/admin/devices/device/{sim1.pk}/change/"
    assert client.get(url).status_code == 200
    response = client.post(url, _device_form(sim1, users=[demo["user"].pk]))
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert list(sim1.users.all()) == [demo["user"]]
    entry = AuditEntry.objects.get(action="device.change")
    assert entry.target == "device sim-1" and entry.changes == {"users": [[], ["user"]]}

    response = client.post("/admin/devices/device/", {
        "action": "disable", "_selected_action": [Device.objects.get(name="sim-2").pk]})
    assert response.status_code == 302
    assert not Device.objects.get(name="sim-2").enabled
    assert AuditEntry.objects.filter(action="device.disable", target="device sim-2").exists()
    with pytest.raises(Conflict, match="disabled by an admin"):
        lifecycle.create_task(demo["user"], Device.objects.get(name="sim-2"), "Open the clock")
    client.force_login(demo["user"])
    assert "sim-2" not in client.get("/tasks/").content.decode()


def test_an_admin_changes_a_users_roles_and_it_is_audited(client, demo):
    from django.contrib.auth.models import Group

    client.force_login(demo["admin"])
    user = demo["user"]
    operators = Group.objects.get(name="operators")
    url = f"/admin/auth/user/{user.pk}/change/"
    assert client.get(url).status_code == 200
    response = client.post(url, {
        "username": user.username, "is_active": "on", "groups": [operators.pk],
        "last_login_0": "", "last_login_1": "", "date_joined_0": "2026-11-23",
        "date_joined_1": "00:00:00",
        "Device_users-TOTAL_FORMS": "0", "Device_users-INITIAL_FORMS": "0",
        "Device_users-MIN_NUM_FORMS": "0", "Device_users-MAX_NUM_FORMS": "1000",
    })
    assert response.status_code == 302, text(response.content.decode())[-1500:]
    assert is_operator(user)
    entry = AuditEntry.objects.get(action="user.change")
    assert entry.changes == {"groups": [["end_users"], ["operators"]]}
    assert entry.actor_name == "admin"


def test_api_tokens_are_issued_and_revoked_from_the_admin(client, demo):
    client.force_login(demo["admin"])
    response = client.post("/admin/frontend/apitoken/add/", {"user": demo["operator"].pk},
                           follow=True)
    token = re.search(r'id="new-api-token">(kai_[^<]+)<', response.content.decode()).group(1)
    api = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    client.logout()
    assert client.get("/api/devices", **api).status_code == 200

    client.force_login(demo["admin"])
    row = ApiToken.objects.get(user=demo["operator"])
    response = client.post("/admin/frontend/apitoken/", {
        "action": "revoke", "_selected_action": [row.pk]})
    assert response.status_code == 302
    client.logout()
    assert client.get("/api/devices", **api).status_code == 401
    assert [e.action for e in AuditEntry.objects.order_by("id")] == ["token.issue",
                                                                     "token.revoke"]
    assert token not in str(AuditEntry.objects.values_list("changes", flat=True))


def test_logged_work_is_read_only_in_the_admin(client, demo, episodes):
    client.force_login(demo["admin"])
    task = episodes["edited"]
    for url in ("/admin/agents/task/", "/admin/agents/ticket/", "/admin/agents/trainingrecord/",
                "/admin/frontend/auditentry/", f"/admin/agents/task/{task.pk}/change/"):
        assert client.get(url).status_code == 200, url
    page = client.get(f"/admin/agents/task/{task.pk}/change/").content.decode()
    assert 'name="_save"' not in page  # a view, not a form
    assert client.post(f"/admin/agents/task/{task.pk}/delete/").status_code == 403
    assert Task.objects.filter(pk=task.pk).exists()
    client.force_login(demo["operator"])
    assert client.get("/admin/devices/device/").status_code == 302  # not staff: to login
