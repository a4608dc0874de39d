"""Issue 24 in a real Chromium against a real ``serve``: the admin reads the measured
autonomy precision and a drift notice on /review/metrics/, and rolls the calibrator back
on /review/calibration/.

The labels are written into the server's database as the product writes them (a step with
its evidence, a spot check a person decided), by ``manage.py shell`` in the server's own
environment; the apps are made-up packages so that no other test's app starts asking.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.frontend.conftest import save_screenshot

pytestmark = pytest.mark.browser

SEED = """
from datetime import timedelta
from django.contrib.auth.models import User
from django.utils import timezone
from agents.runtime import learning
from tests.agents.learning_data import consistent, history, labelled_step
operator = User.objects.get(username="operator")
# 01:00 five days ago: the first labels span 12 hours and the next day's 5, so each set
# stays within one UTC date whatever time of day the test runs (the chart is per day)
at = (timezone.now() - timedelta(days=5)).replace(hour=1, minute=0, second=0, microsecond=0)
for i, right in enumerate([True] * 10 + [False] * 3):
    labelled_step(operator, right=right, at=at + timedelta(hours=i), backend="heuristic",
                  app="com.example.changed", confidence=4.5, threshold=4.0,
                  reason=learning.SPOT_CHECK)
for i in range(6):
    labelled_step(operator, right=True, at=at + timedelta(days=1, hours=i), backend="heuristic",
                  device="sim-2", app="com.example.steady", confidence=4.5, threshold=4.0,
                  reason=learning.SPOT_CHECK)
history(operator, consistent(30), backend="browsertest")
print(learning.refit_backend("browsertest", "manual").number)
"""


@pytest.fixture(scope="module")
def labels(kairos_server) -> str:
    return kairos_server.manage("shell", "-c", SEED).strip().splitlines()[-1]


def test_an_admin_reads_measured_precision_and_drift_and_rolls_back(login, kairos_server,
                                                                     labels):
    assert labels == "1"
    page = login("admin")
    page.goto(kairos_server.url + "/review/metrics/")
    notice = page.locator("#drift-notice")
    expect(notice).to_be_visible()
    expect(notice.locator('li[data-app="com.example.changed"]')).to_contain_text(
        "right 10 times")
    expect(notice).not_to_contain_text("com.example.steady")
    # 16 of 19 spot checks right: the lower bound is far below 0.95, and the page says so.
    expect(page.locator("#measured-overall")).to_contain_text("n=19")
    expect(page.locator("#precision-warning")).to_contain_text("below the target 0.95")
    expect(page.locator('#measured-app tr[data-key="com.example.changed"]')).to_contain_text(
        "n=13")
    expect(page.locator('#measured-phone tr[data-key="sim-2"]')).to_contain_text("1.00")
    chart = page.locator("#precision-over-time svg")
    expect(chart.locator("line.target")).to_be_attached()
    assert chart.locator("circle[data-period]").count() == 2  # two days with spot checks
    save_screenshot(page, "review-measured-precision")

    page.goto(kairos_server.url + "/review/calibration/")
    versions = page.locator('#calibrator-versions table[data-backend="browsertest"]')
    expect(versions.locator('tr[data-version="1"] .current-version')).to_be_visible()
    expect(versions.locator('tr[data-version="1"] svg.reliability-small')).to_be_visible()
    expect(versions.locator('tr[data-version="1"] .version-reason')).to_contain_text("taken")
    save_screenshot(page, "review-calibrator-versions")
    versions.locator('tr[data-version="0"] button.rollback').click()
    expect(page.locator(".flash")).to_contain_text("The browsertest calibrator is now version 0")
    expect(versions.locator('tr[data-version="0"] .current-version')).to_be_visible()
    expect(versions.locator('tr[data-version="1"] button.rollback')).to_be_visible()

    page.goto(kairos_server.url + "/review/audit/")
    expect(page.locator("body")).to_contain_text("calibrator.rollback")
    expect(page.locator("body")).to_contain_text(re.compile(r"calibrator browsertest"))
