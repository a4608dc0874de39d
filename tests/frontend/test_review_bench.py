"""``bench review --smoke``: the benchmark runs end to end and measures something."""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from agents.runtime.models import Task

pytestmark = pytest.mark.django_db


def test_bench_review_smoke_measures_the_log_the_replay_and_the_export():
    out = io.StringIO()
    call_command("bench", "review", "--smoke", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["seeded_steps"] == 600 and result["seeded_tickets"] == 120
    assert result["log_p95_ms"] > 0 and set(result["log_p95_ms_by_filter"]) >= {
        "none", "decision", "search", "dates", "combined"}
    assert result["log_rows_by_filter"]["none"] == 50  # a full first page
    assert result["replay_steps"] == 30 and result["replay_p95_ms"] > 0
    assert result["export_records"] == result["export_records_expected"] > 0
    assert result["export_images"] == result["export_records"]
    assert result["export_records_per_s"] > 0
    assert not Task.objects.filter(device__name__startswith="bench-review").exists()
