"""The admins' intervention log and episode replay, through Django's test client."""
from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.runtime.models import Step, Ticket
from tests.frontend.review_data import run_episodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def episodes(demo, scripted, inline_steps, phones):
    return run_episodes(demo, scripted, inline_steps, phones)


def rows(html: str) -> list[str]:
    return re.findall(r'<tr data-ticket-id="[^"]+">(.*?)</tr>', html, re.S)


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_log_reads_like_a_person_wrote_it(client, demo, episodes):
    client.force_login(demo["admin"])
    page = client.get("/review/").content.decode()
    assert len(rows(page)) == 3
    by_task = {t: text(r) for r in rows(page) for t in ("Open the settings app",
               "Go back to the home screen", "Turn on Wi-Fi for me") if t in r}
    approved = by_task["Open the settings app"]
    edited = by_task["Go back to the home screen"]
    taken = by_task["Turn on Wi-Fi for me"]
    assert "Tap ‘Settings’" in approved and "Approved" in approved and "Low confidence" in approved
    assert "agent was right" in approved and "operator" in approved
    assert "Edited : Pressed Home" in edited and "agent was wrong" in edited
    # A take-over shows what the operator did on the phone, not an empty cell.
    # The operator's tap is named as the phone shows it, and it did what the agent
    # proposed (tap Settings): the take-over labels the proposal right (issue 24).
    assert "Took over : Tapped ‘Settings’" in taken and "admin" in taken
    assert "agent was right" in taken
    assert "{'type'" not in page and "&#x27;type&#x27;" not in page


def test_filters_narrow_the_log_and_counts_follow(client, demo, episodes):
    client.force_login(demo["admin"])
    page = client.get("/review/", {"decision": "edit"}).content.decode()
    assert len(rows(page)) == 1 and "Go back to the home screen" in page
    assert "1 ticket" in text(page)
    # The decision facet still counts the other decisions under the remaining filter.
    facets = client.get("/review/facets", {"decision": "edit"}).json()["facets"]
    assert dict(facets["decision"]) == {"approve": 1, "edit": 1, "takeover": 1}
    assert dict(facets["kind"]) == {"intervention": 1}
    facets = client.get("/review/facets", {"decision": "edit", "q": "wi-fi"}).json()["facets"]
    assert dict(facets["decision"]) == {"takeover": 1} and facets["kind"] == []
    assert dict(client.get("/review/facets").json()["facets"]["operator"]) == {
        "operator": 2, "admin": 1}
    bad = client.get("/review/facets", {"min_conf": "x"})
    assert bad.status_code == 400 and "min_conf" in bad.json()["detail"]
    page = client.get("/review/", {"q": "wi-fi"}).content.decode()
    assert [("Turn on Wi-Fi" in r) for r in rows(page)] == [True]
    page = client.get("/review/", {"operator": "admin"}).content.decode()
    assert len(rows(page)) == 1 and "Turn on Wi-Fi" in page
    page = client.get("/review/", {"min_conf": "3"}).content.decode()
    assert rows(page) == []
    page = client.get("/review/", {"since": "2000-01-01", "until": "2000-01-02"}).content.decode()
    assert rows(page) == [] and "match this filter" in page
    page = client.get("/review/", {"device": "sim-1", "backend": "scripted",
                                   "kind": "intervention", "reason": "low_confidence",
                                   "status": "succeeded"}).content.decode()
    assert len(rows(page)) == 3


def test_sorting_and_server_side_paging(client, demo, episodes, settings, monkeypatch):
    from frontend.review import log

    monkeypatch.setattr(log, "PAGE_SIZE", 2)
    client.force_login(demo["admin"])
    first = client.get("/review/", {"sort": "when"}).content.decode()
    assert len(rows(first)) == 2 and "Page 1 of 2" in first
    assert rows(first)[0].find("Open the settings app") >= 0
    second = client.get("/review/", {"sort": "when", "page": "2"}).content.decode()
    assert len(rows(second)) == 1 and "Turn on Wi-Fi" in second
    assert 'rel="prev" href="?sort=when&amp;page=1"' in second
    newest = client.get("/review/").content.decode()
    assert "Turn on Wi-Fi" in rows(newest)[0]


@pytest.mark.parametrize("params, message", [
    ({"since": "yesterday"}, "since: &#x27;yesterday&#x27; is not a date"),
    ({"min_conf": "9"}, "min_conf: a confidence is between 0 and 5"),
    ({"max_conf": "high"}, "max_conf: &#x27;high&#x27; is not a number"),
    ({"decision": "maybe"}, "decision: &#x27;maybe&#x27; is not one of"),
    ({"page": "0"}, "page: pages start at 1"),
    ({"sort": "random()"}, "sort: &#x27;random()&#x27; is not one of"),
    ({"q": "x" * 201}, "q: at most 200 characters"),
    ({"since": "2026-02-02", "until": "2026-01-01"}, "until: is before since"),
])
def test_a_bad_filter_is_a_400_that_names_it_and_keeps_the_rest(client, demo, episodes,
                                                               params, message):
    client.force_login(demo["admin"])
    response = client.get("/review/", params)
    page = response.content.decode()
    assert response.status_code == 400
    assert message in page
    assert rows(page)  # the rest of the filter still shows its tickets


def test_a_page_past_the_end_shows_the_last_page(client, demo, episodes):
    client.force_login(demo["admin"])
    page = client.get("/review/", {"page": "99"}).content.decode()
    assert len(rows(page)) == 3 and "Page 1 of 1" in page


def _extra_tickets(task, n: int) -> None:
    """More handoffs of the same shapes (approve, edit, take over with operator input)."""
    from django.utils import timezone

    base = task.steps.order_by("-index").first().index + 1
    now = timezone.now()
    steps = Step.objects.bulk_create([
        Step(task=task, index=base + i, proposed_action={"type": "PRESS_BACK"}, confidence=2,
             executed_action={"type": "PRESS_BACK"}, status="done") for i in range(n)])
    Step.objects.bulk_create([
        Step(task=task, index=base + n + i, proposed_action=None, decided_by="operator",
             executed_action={"type": "WAIT"}, status="done") for i in range(n)])
    decisions = ["approve", "edit", "takeover"]
    Ticket.objects.bulk_create([
        Ticket(task=task, step=s, kind="intervention", reason="low_confidence",
               status="resolved", decision=decisions[i % 3], resolved_at=now,
               human_action={"type": "PRESS_HOME"}, resolved_by=task.owner)
        for i, s in enumerate(steps)])


def test_the_log_runs_a_fixed_number_of_queries_whatever_the_rows(client, demo, episodes):
    client.force_login(demo["admin"])
    client.get("/review/")  # warm the session
    with CaptureQueriesContext(connection) as few:
        assert client.get("/review/").status_code == 200
    _extra_tickets(episodes["taken_over"], 30)
    with CaptureQueriesContext(connection) as many:
        page = client.get("/review/").content.decode()
    assert len(rows(page)) == 33
    assert len(many) == len(few), [q["sql"][:120] for q in many.captured_queries]


def test_replay_shows_each_step_with_the_humans_action_beside_the_agents(client, demo,
                                                                        episodes):
    client.force_login(demo["operator"])
    task = episodes["edited"]
    response = client.get(f"/review/tasks/{task.id}/", {"step": "1"})
    page = response.content.decode()
    assert response.status_code == 200
    first = re.search(r'<article[^>]*data-step="1"[^>]*>(.*?)</article>', page, re.S).group(1)
    assert 'class="mark agent"' in first and 'class="mark human"' not in first  # edit: PRESS_HOME
    assert "Person changed it to" in first and "Pressed Home" in first
    assert "Edited by <b>operator</b>" in first and "agent was wrong" in first
    assert "confidence" in first and "below" in first and "open Settings" in first
    assert re.search(r'<article[^>]*data-step="2"[^>]*hidden', page)

    task = episodes["taken_over"]
    page = client.get(f"/review/tasks/{task.id}/").content.decode()
    operator_step = re.search(r'<article[^>]*data-step="2"[^>]*>(.*?)</article>', page,
                              re.S).group(1)
    assert "Operator input" in operator_step and 'class="mark human"' in operator_step
    assert 'id="final-status"' in page and "Succeeded" in page


def test_replay_of_an_unknown_step_is_a_400_that_still_shows_the_episode(client, demo,
                                                                         episodes):
    client.force_login(demo["admin"])
    task = episodes["approved"]
    for bad in ("99", "zero", "-1"):
        response = client.get(f"/review/tasks/{task.id}/", {"step": bad})
        assert response.status_code == 400
        assert "there is no step" in response.content.decode()
        assert b'data-step="1"' in response.content


def test_replay_runs_a_fixed_number_of_queries_whatever_the_steps(client, demo, episodes):
    client.force_login(demo["admin"])
    task = episodes["taken_over"]
    client.get(f"/review/tasks/{task.id}/")
    with CaptureQueriesContext(connection) as few:
        client.get(f"/review/tasks/{task.id}/")
    _extra_tickets(task, 20)
    with CaptureQueriesContext(connection) as many:
        page = client.get(f"/review/tasks/{task.id}/").content.decode()
    assert page.count('class="card replay-step"') == task.steps.count() > 40
    assert len(many) == len(few)


def test_review_pages_refuse_everyone_but_admins(client, demo, episodes):
    task = episodes["approved"]
    admin_only = ["/review/", "/review/facets", "/review/metrics/", "/review/calibration/",
                  "/review/export.zip", "/review/audit/"]
    for who in ("user", "operator"):
        client.force_login(demo[who])
        for url in admin_only:
            assert client.get(url).status_code == 403, (who, url)
        assert client.post("/review/calibration/", {"scope": "default",
                                                    "gamma": "1"}).status_code == 403
    from agents.runtime.services.validation import default_threshold

    assert default_threshold() == 4.0  # the refused POST changed nothing
    client.force_login(demo["user"])
    assert client.get(f"/review/tasks/{task.id}/").status_code == 403
    client.logout()
    for url in admin_only + [f"/review/tasks/{task.id}/"]:
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith("/login/"), url


def test_replay_of_an_unknown_task_is_a_404(client, demo):
    client.force_login(demo["admin"])
    assert client.get("/review/tasks/00000000-0000-0000-0000-000000000000/").status_code == 404
