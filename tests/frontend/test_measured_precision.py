"""/review/metrics/ measures autonomy precision from spot checks (issue 24, item 2):
approve = right, edit / take over = wrong; Wilson 95 % intervals overall, per backend,
phone and app, over time; a warning when the lower bound is below the target."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from agents.runtime.learning import SPOT_CHECK
from agents.brain.metrics import wilson_interval
from agents.runtime.models import Decision, Ticket, TicketStatus
from tests.agents.learning_data import labelled_step

pytestmark = pytest.mark.django_db


def spot_checks(owner, rows, *, start=None, apart=timedelta(days=1)):
    """rows: (backend, phone, app, right, decision or None), ``apart`` from each other."""
    start = start or timezone.now() - apart * (len(rows) + 1)
    for i, (backend, phone, app, right, decision) in enumerate(rows):
        labelled_step(owner, right=right, at=start + apart * i, backend=backend,
                      device=phone, app=app, confidence=4.5, threshold=4.0,
                      reason=SPOT_CHECK, decision=decision)


def admin_client(demo) -> Client:
    client = Client()
    client.force_login(demo["admin"])
    return client


def shown(measured, name: str) -> dict[str, tuple[int, int]]:
    return {row.key: (row.precision.successes, row.precision.n) for row in measured.per[name]}


def test_spot_checks_give_the_measured_precision_with_its_intervals(demo):
    rows = ([("heuristic", "sim-1", "com.a", True, None)] * 10
            + [("heuristic", "sim-2", "com.b", True, None)] * 4
            + [("heuristic", "sim-2", "com.b", False, Decision.EDIT)]
            + [("heuristic", "sim-2", "com.b", False, Decision.TAKEOVER)]
            + [("openai", "sim-1", "com.b", True, None)] * 3
            + [("openai", "sim-1", "com.b", False, Decision.EDIT)])
    spot_checks(demo["operator"], rows)
    # Not spot checks, or not labels: left out.
    labelled_step(demo["operator"], right=False, confidence=4.5, threshold=4.0)
    labelled_step(demo["operator"], right=True, reason=SPOT_CHECK, decision=Decision.ANSWER)
    open_check = labelled_step(demo["operator"], right=False, reason=SPOT_CHECK)
    Ticket.objects.filter(pk=open_check.pk).update(status=TicketStatus.OPEN)

    page = admin_client(demo).get("/review/metrics/")
    assert page.status_code == 200
    measured = page.context["measured"]
    assert (measured.overall.successes, measured.overall.n) == (17, 20)
    assert measured.overall.interval == wilson_interval(17, 20)
    assert shown(measured, "backend") == {"heuristic": (14, 16), "openai": (3, 4)}
    assert shown(measured, "phone") == {"sim-1": (13, 14), "sim-2": (4, 6)}
    assert shown(measured, "app") == {"com.a": (10, 10), "com.b": (7, 10)}
    # One point a day, each spot check on its own day.
    points = [p for p in measured.over_time if p["n"]]
    assert len(points) == 20 and sum(p["n"] for p in points) == 20
    low, high = wilson_interval(17, 20)
    html = page.content.decode()
    assert 'id="precision-warning"' in html and f"{low:.3f}" in html
    assert f"[{low:.2f}–{high:.2f}] n=20" in html
    assert html.count('class="below-target"') >= 1


def test_no_warning_once_the_lower_bound_reaches_the_target(demo):
    # 73 right spot checks in a row put the 95 % Wilson lower bound above 0.95.
    spot_checks(demo["operator"], [("heuristic", "sim-1", "com.a", True, None)] * 73,
                apart=timedelta(hours=6))
    measured = admin_client(demo).get("/review/metrics/").context["measured"]
    assert measured.overall.n == 73 and measured.overall.interval[0] >= 0.95
    assert not measured.warn and measured.all_right_needed == 73
    page = admin_client(demo).get("/review/metrics/")
    assert b'id="precision-warning"' not in page.content


def test_without_spot_checks_there_is_nothing_to_warn_about(demo):
    page = admin_client(demo).get("/review/metrics/")
    assert page.status_code == 200 and not page.context["measured"].warn
    assert b"No spot checks decided in this range." in page.content


def test_the_range_limits_the_spot_checks_counted(demo):
    spot_checks(demo["operator"], [("heuristic", "sim-1", "com.a", False, None)] * 3,
                start=timezone.now() - timedelta(days=90))
    measured = admin_client(demo).get("/review/metrics/").context["measured"]
    assert measured.overall.n == 0
    today = timezone.localdate()
    since = (today - timedelta(days=95)).isoformat()
    page = admin_client(demo).get(f"/review/metrics/?since={since}&by=week")
    assert page.context["measured"].overall.n == 3
    assert page.status_code == 200


def test_bad_metrics_input_is_refused_with_the_measured_section_still_shown(demo):
    page = admin_client(demo).get("/review/metrics/?since=yesterday-ish&by=month")
    assert page.status_code == 400
    assert b'id="measured-precision"' in page.content
