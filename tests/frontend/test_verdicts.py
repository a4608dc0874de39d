"""End users' verdict (issue 24, item 3): "Did Kairos do what you asked?" on a finished
task, through the JSON API, the task page, the review log, the export and what the
installation learns from."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from agents.runtime.models import Step, Task
from agents.runtime.services import lifecycle, verdicts
from devices.models import Device
from tests.frontend.review_data import run_episodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def episodes(demo, scripted, inline_steps, phones):
    """Three finished tasks of the end user ``user`` (approved, edited, taken over)."""
    return run_episodes(demo, scripted, inline_steps, phones)


def test_the_owner_answers_once(api, episodes):
    task = episodes["edited"]
    code, body = api("post", f"/api/tasks/{task.id}/verdict", "user",
                     {"right": False, "note": "it went home instead of opening Settings"})
    assert code == 200 and body["verdict"]["right"] is False
    assert body["verdict"]["note"] == "it went home instead of opening Settings"
    task.refresh_from_db()
    assert task.verdict_right is False and task.verdict_at is not None
    code, body = api("post", f"/api/tasks/{task.id}/verdict", "user", {"right": True})
    assert code == 409 and "already answered" in body["detail"]
    task.refresh_from_db()
    assert task.verdict_right is False  # the first answer stands
    code, body = api("get", f"/api/tasks/{task.id}", "user")
    assert body["verdict"]["right"] is False


def test_a_yes_needs_no_note(api, episodes):
    code, body = api("post", f"/api/tasks/{episodes['approved'].id}/verdict", "user",
                     {"right": True})
    assert code == 200 and body["verdict"] == {"right": True, "note": "",
                                               "at": body["verdict"]["at"]}


def test_nobody_else_answers_for_the_owner(api, episodes):
    from django.contrib.auth.models import User

    User.objects.create_user("someone", password="pw-for-tests-1")
    url = f"/api/tasks/{episodes['approved'].id}/verdict"
    assert api("post", url, "operator", {"right": True})[0] == 403
    assert api("post", url, "admin", {"right": True})[0] == 403
    assert api("post", url, None, {"right": True})[0] == 401
    episodes["approved"].refresh_from_db()
    assert episodes["approved"].verdict_right is None


def test_another_end_user_gets_404(client, demo, episodes):
    from django.contrib.auth.models import User

    from frontend.models import ApiToken

    other = User.objects.create_user("someone", password="pw-for-tests-1")
    _, token = ApiToken.issue(other)
    response = client.post(f"/api/tasks/{episodes['approved'].id}/verdict",
                           data=json.dumps({"right": False}), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 404 and response.json()["detail"]


def test_a_task_that_has_not_finished_cannot_be_judged(api, demo, phones):
    task = lifecycle.create_task(demo["user"], Device.objects.get(name="sim-2"), "Turn on Wi-Fi",
                                 start=False)
    code, body = api("post", f"/api/tasks/{task.id}/verdict", "user", {"right": True})
    assert code == 409 and "not finished" in body["detail"]


@pytest.mark.parametrize("body, problem", [
    ({}, "right"),
    ({"right": "yes"}, "right"),
    ({"right": 1}, "right"),
    ({"right": None}, "right"),
    ({"right": False, "note": 5}, "note"),
    ({"right": False, "note": "x" * 2001}, "note"),
    ({"right": False, "note": "a\x00b"}, ""),
])
def test_bad_input_is_refused_with_a_json_detail(api, episodes, body, problem):
    task = episodes["approved"]
    code, answer = api("post", f"/api/tasks/{task.id}/verdict", "user", body)
    assert code in (400, 422) and problem in answer["detail"], answer
    task.refresh_from_db()
    assert task.verdict_right is None


def test_a_no_is_at_the_top_of_the_review_with_its_note_and_in_the_filters(
        api, client, demo, episodes):
    api("post", f"/api/tasks/{episodes['edited'].id}/verdict", "user",
        {"right": False, "note": "I wanted the settings, not the home screen"})
    api("post", f"/api/tasks/{episodes['approved'].id}/verdict", "user", {"right": True})
    client.force_login(demo["admin"])
    page = client.get("/review/").content.decode()
    top = page.index('id="said-no"')
    assert top < page.index('id="log"')
    said_no = page[top:page.index("</section>", top)]
    assert "I wanted the settings, not the home screen" in said_no
    assert "Go back to the home screen" in said_no and "Open the settings app" not in said_no

    def instructions(query):
        html = client.get("/review/", query).content.decode()
        log = html[html.index('id="log"'):]
        return {i for i in ("Open the settings app", "Go back to the home screen",
                            "Turn on Wi-Fi for me") if i in log}

    assert instructions({"verdict": "wrong"}) == {"Go back to the home screen"}
    assert instructions({"verdict": "right"}) == {"Open the settings app"}
    assert instructions({"verdict": "none"}) == {"Turn on Wi-Fi for me"}
    bad = client.get("/review/", {"verdict": "maybe"})
    assert bad.status_code == 400 and "verdict" in bad.content.decode()


def test_the_export_carries_the_verdict_and_a_no_teaches_nothing_from_acting_alone(
        api, episodes, tmp_path):
    api("post", f"/api/tasks/{episodes['edited'].id}/verdict", "user",
        {"right": False, "note": "wrong screen"})
    api("post", f"/api/tasks/{episodes['approved'].id}/verdict", "user", {"right": True})

    def export(out: Path, *args: str) -> list[str]:
        call_command("export_training", *args, "--out", str(out), "--json",
                     stdout=io.StringIO())
        return [p.read_text() for p in out.glob("*.jsonl")]

    [handoffs] = export(tmp_path / "h", "--format", "jsonl")
    by_task = {r["task"]: r for r in map(json.loads, handoffs.splitlines())}
    assert by_task[str(episodes["edited"].id)]["verdict"] == {"right": False,
                                                              "note": "wrong screen"}
    assert by_task[str(episodes["approved"].id)]["verdict"] == {"right": True, "note": None}
    assert by_task[str(episodes["taken_over"].id)]["verdict"] is None
    [lines] = export(tmp_path / "e", "--format", "jsonl", "--episodes")
    episodes_out = {r["task"]: r for r in map(json.loads, lines.splitlines())}
    assert episodes_out[str(episodes["edited"].id)]["verdict"]["right"] is False

    # What the installation learns from: the "no" episode's acted-alone step (its
    # COMPLETE) is out; the step a person decided stays; the other episodes keep theirs.
    learnable = verdicts.learnable_steps()
    edited = Step.objects.filter(task=episodes["edited"], status="done")
    alone = edited.get(decided_by="agent", tickets__isnull=True)
    decided = edited.get(decided_by="operator")
    assert not learnable.filter(id=alone.id).exists()
    assert learnable.filter(id=decided.id).exists()
    assert learnable.filter(task=episodes["approved"]).count() == Step.objects.filter(
        task=episodes["approved"], status="done").count()
    # The LLaMA-Factory episodes export leaves the same step out. It exports acted-alone
    # steps of episodes that reached their goal; these scripted tasks have no suite
    # predicate, so they are marked as a suite's check would have judged them.
    Task.objects.filter(id__in=[episodes["edited"].id, episodes["approved"].id]).update(
        success=True)
    [samples] = export(tmp_path / "l", "--format", "llamafactory", "--episodes")
    prompts = [json.loads(x)["messages"] for x in samples.splitlines()]
    edited_targets = [m[1]["content"] for m in prompts if "Go back to the home screen" in
                      m[0]["content"]]
    assert edited_targets and not any("COMPLETE" in t for t in edited_targets)
    approved_targets = [m[1]["content"] for m in prompts if "Open the settings app" in
                        m[0]["content"]]
    assert any("COMPLETE" in t for t in approved_targets)


def test_the_task_page_asks_the_owner_only(client, demo, episodes):
    task = episodes["approved"]
    client.force_login(demo["user"])
    page = client.get(f"/tasks/{task.id}/").content.decode()
    assert "Did Kairos do what you asked?" in page and 'id="verdict-form"' in page
    client.post(f"/tasks/{task.id}/", {"verdict": "no", "note": "not this app"})
    page = client.get(f"/tasks/{task.id}/").content.decode()
    assert "did not</strong> do what you asked" in page and "not this app" in page
    assert 'id="verdict-form"' not in page
    # A bad answer on the page is refused with a message, and changes nothing.
    other = episodes["edited"]
    client.post(f"/tasks/{other.id}/", {"verdict": "perhaps"})
    assert Task.objects.get(id=other.id).verdict_right is None
    client.force_login(demo["operator"])
    page = client.get(f"/tasks/{other.id}/").content.decode()
    assert 'id="verdict-form"' not in page
