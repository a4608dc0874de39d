"""Every ``bench`` runs once in its short smoke mode: a bench that measures nothing fails CI.

``bench stream`` once reported 0 fps for weeks (the simulator's Maps opened behind a modal
location prompt, so the bench's typing never changed the screen); these runs make such a
regression a red build instead of a wrong number in docs/benchmarks.md.
"""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from agents.evaluation.management.commands.bench import BENCHES, nothing_measured


@pytest.fixture(scope="module", autouse=True)
def _end_the_bench_threads_sessions(django_db_blocker):
    """A bench is a command: its helper threads (the in-process Celery worker, the ASGI
    server's sync threads) end with its process and their database sessions with them.
    Here they outlive it inside pytest, so their sessions are ended after the module,
    or the test database could not be dropped."""
    yield
    from django.db import connection

    with django_db_blocker.unblock():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        # That ended the session of asgiref's one thread for async ORM calls too: drop its
        # dead connection so the next socket test opens a new one.
        from asgiref.sync import SyncToAsync
        from django.db import connections

        SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


def run_bench(*args: str) -> dict:
    out = io.StringIO()
    call_command("bench", *args, "--smoke", "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.parametrize("name", [b for b in BENCHES
                                  # these have their own tests below
                                  if b not in ("tickets", "stream", "review", "memory")])
def test_each_bench_measures_something_in_smoke_mode(name, transactional_db) -> None:
    result = run_bench(name)
    assert result["bench"] == name
    assert nothing_measured(name, result) is None


def test_bench_tickets_times_notifications_and_approvals(transactional_db) -> None:
    result = run_bench("tickets")
    assert result["samples"] == 2
    assert result["notify_p95_ms"] > 0 and result["approve_to_action_p95_ms"] > 0


def test_bench_stream_delivers_frames_to_every_viewer(transactional_db) -> None:
    result = run_bench("stream", "--viewers", "2")
    assert result["frames"] > 0
    # The driver changes the screen 30 times a second; even a loaded CI machine shows
    # each viewer several of those changes in the measured second.
    assert result["fps_per_viewer"] >= 5
    assert result["frame_latency_p95_ms"] is not None


def test_a_bench_that_measured_nothing_exits_non_zero(transactional_db) -> None:
    with pytest.raises(CommandError, match="unknown bench device"):
        run_bench("stream", "--device", "no-such-phone")
    assert nothing_measured("stream", {"frames": 0, "fps_per_viewer": 0.0})
    assert nothing_measured("loop", {"steps": 0})
    assert nothing_measured("observe", {"samples": 5}) is None


def test_bench_stream_from_the_fake_adb_phone_shows_the_last_frame_sent(transactional_db):
    result = run_bench("stream", "--device", "adb-fake", "--viewers", "2")
    assert result["device"] == "adb-fake" and result["frames"] > 0
    assert result["frame_latency_p95_ms"] is not None  # phone encoder → viewer, measured
    assert result["last_frame_shown"] is True


def test_bench_observe_times_an_adb_phones_tree_and_screenshot_separately(transactional_db):
    result = run_bench("observe", "--device", "adb-fake")
    assert result["samples"] == 5
    assert result["ui_tree_p50_ms"] > 0 and result["screencap_p50_ms"] > 0
    assert result["video_frame_p50_ms"] > 0


def test_bench_observe_times_reading_a_screen_without_a_tree(transactional_db):
    result = run_bench("observe", "--device", "adb-fake", "--ocr", "--samples", "1")
    assert result["screenshot"] == "1080x2400" and result["ocr_1080x2400_p50_ms"] > 0
    assert result["detected_nodes"] > 0 and result["observe_no_tree_nodes"] > 0
    assert result["observe_no_tree_p50_ms"] > 0 and result["observe_tree_p50_ms"] > 0


def test_bench_memory_times_lookups_that_find_remembered_steps(transactional_db) -> None:
    result = run_bench("memory")
    assert result["remembered_steps"] == 2_000 and result["samples"] == 20
    assert result["lookups_with_a_match"] > 0 and result["lookup_p95_ms"] > 0
    from agents.runtime.models import ExperienceEntry

    assert not ExperienceEntry.objects.exists()  # the seeded steps are removed again
