"""The admin's journey in a real Chromium against a real ``serve`` process.

The logged work comes from ``run_task`` with the oracle as the operator at γ = 5 on a
shopping task where the heuristic goes wrong once: every step asks, the oracle approves
the right proposals and edits the wrong one, exactly as a person at the console would.
"""
from __future__ import annotations

import json
import re
import zipfile

import pytest
from playwright.sync_api import expect

from tests.frontend.conftest import save_screenshot

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def logged_work(kairos_server) -> dict:
    out = kairos_server.manage("run_task", "--suite", "everyday", "--task",
                               "shop_cheapest_headphones", "--threshold", "5", "--operator",
                               "oracle", "--device", "sim-1", "--json")
    result = json.loads(out)
    assert result["interventions"] >= 2 and any(a["by"] == "operator" for a in result["actions"])
    return result


def test_an_admin_filters_the_log_replays_an_edit_and_exports_it(login, kairos_server,
                                                                   logged_work, tmp_path):
    page = login("admin")
    page.goto(kairos_server.url + "/review/")
    total = int(page.locator("#log-total").inner_text().split()[0])
    assert total >= logged_work["interventions"]

    page.select_option("select[name=decision]", "edit")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"decision=edit"))
    rows = page.locator("#log tbody tr[data-ticket-id]")
    expect(rows.first).to_contain_text("Edited")
    assert rows.count() < total
    for i in range(rows.count()):
        expect(rows.nth(i).locator(".human-action")).to_contain_text("Edited")
    # The counts per facet arrive after the rows; each links to the log narrowed to it.
    approve = page.locator('.facet[data-facet="decision"] [data-value="approve"]')
    expect(approve).to_be_visible()
    assert "decision=approve" in approve.get_attribute("href")
    save_screenshot(page, "review-log")

    # The row's link lands on its step, with the person's action drawn beside the agent's.
    link = rows.first.locator("a.replay-link")
    step = int(re.search(r"step=(\d+)", link.get_attribute("href")).group(1))
    link.click()
    expect(page).to_have_url(re.compile(rf"/review/tasks/[0-9a-f-]+/\?step={step}$"))
    shown = page.locator(f'article.replay-step[data-step="{step}"]')
    expect(shown).to_be_visible()
    expect(shown.locator("svg .mark.agent")).to_be_attached()
    expect(shown.locator("svg .mark.human")).to_be_attached()
    expect(shown.locator(".legend .mark-human")).to_contain_text("Person changed it to")
    expect(shown.locator(".decision")).to_contain_text("Edited by oracle-operator")
    agent_ring = shown.locator("svg .mark.agent .ring")
    human_ring = shown.locator("svg .mark.human .ring")
    colours = page.evaluate(
        "([a, h]) => [getComputedStyle(a).stroke, getComputedStyle(h).stroke]",
        [agent_ring.element_handle(), human_ring.element_handle()])
    assert colours[0] != colours[1]
    save_screenshot(page, "review-replay")

    # Keyboard and scrubber step through the episode; the URL follows.
    page.keyboard.press("ArrowRight")
    expect(page.locator(f'article.replay-step[data-step="{step + 1}"]')).to_be_visible()
    expect(shown).to_be_hidden()
    expect(page).to_have_url(re.compile(rf"step={step + 1}$"))
    page.keyboard.press("ArrowLeft")
    expect(shown).to_be_visible()
    page.locator("#step-scrubber").fill("0")
    expect(page.locator("article.replay-step").first).to_be_visible()
    expect(page.locator("#step-position")).to_contain_text("(1 of")

    page.goto(kairos_server.url + "/review/metrics/?by=backend")
    expect(page.locator('#metrics tr[data-key="heuristic"]')).to_be_visible()
    save_screenshot(page, "review-metrics")
    page.goto(kairos_server.url + "/review/calibration/")
    expect(page.locator('#reliability svg .series[data-backend="heuristic"]')).to_be_attached()
    expect(page.locator('section[data-backend="heuristic"] .gamma-table tbody tr')).to_have_count(9)
    save_screenshot(page, "review-calibration")

    page.goto(kairos_server.url + "/review/?decision=edit")
    with page.expect_download() as download_info:
        page.locator("#export-link").click()
    archive_path = tmp_path / "export.zip"
    download_info.value.save_as(archive_path)
    with zipfile.ZipFile(archive_path) as archive:
        archive.extractall(tmp_path / "export")
    root = tmp_path / "export"
    info = json.loads((root / "dataset_info.json").read_text())
    (entry,) = info.values()
    records = [json.loads(x) for x in (root / entry["file_name"]).read_text().splitlines()]
    assert records and all(len(r["images"]) == 1 and (root / r["images"][0]).is_file()
                           for r in records)
    assert {r["messages"][1]["content"].rsplit("Score: ", 1)[1] for r in records} == {"1", "5"}


def test_an_admin_sets_gamma_on_the_calibration_page_and_sees_it_audited(login,
                                                                          kairos_server):
    page = login("admin")
    page.goto(kairos_server.url + "/review/calibration/")
    form = page.locator('tr[data-device="sim-2"] form')
    form.locator("input[name=gamma]").fill("3.5")
    form.get_by_role("button", name="Set").click()
    expect(page.locator(".flash")).to_contain_text("γ for new tasks on sim-2: 3.5")
    expect(page.locator('tr[data-device="sim-2"] td').nth(1)).to_have_text("3.5")
    page.goto(kairos_server.url + "/review/audit/")
    expect(page.locator("#audit tbody tr").first).to_contain_text("gamma.device")
    expect(page.locator("#audit tbody tr").first).to_contain_text("device sim-2")
    save_screenshot(page, "review-audit")
    # Back to the installation's γ: the server is shared, and end users may not go below a
    # phone's γ (issue 23, item 6), so a later test asking for caution 0 on sim-2 would fail.
    page.goto(kairos_server.url + "/review/calibration/")
    form.locator("input[name=gamma]").fill("")
    form.get_by_role("button", name="Set").click()
    expect(page.locator(".flash")).to_contain_text("the installation default")


@pytest.mark.parametrize("who", ["user", "operator"])
def test_non_admins_are_refused_every_review_page_and_the_export(login, kairos_server,
                                                                 logged_work, who):
    page = login(who)
    for path in ("/review/", "/review/metrics/", "/review/calibration/", "/review/audit/",
                 "/review/export.zip"):
        response = page.request.get(kairos_server.url + path)
        assert response.status == 403, (who, path)
    response = page.goto(kairos_server.url + "/review/")
    assert response.status == 403
    expect(page.locator("body")).not_to_contain_text("Handoffs")
    assert page.locator('a[href="/review/"]').count() == 0
