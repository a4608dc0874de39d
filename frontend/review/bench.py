"""``bench review``: the admins' pages and the export on a large log.

Seeds (``bulk_create``) a log of ``steps`` steps in 30-step episodes with ``tickets``
handoffs spread over them, 4 phones, 3 backends and 3 operators, then measures through
the real views (Django's test client, templates included):

* ``log_p95_ms`` — the worst p95 over the log's filters (each filter on its own too);
* ``replay_p95_ms`` — the replay page of a 30-step episode;
* ``export_records_per_s`` — ``llamafactory`` export of every handoff to a directory,
  screenshots copied; and the export's peak traced memory for a tenth of the handoffs
  and for all of them (``export_peak_kib_tenth``, ``export_peak_kib_all``), which should
  be about equal.

Everything seeded is removed afterwards (``keep=True`` leaves it for a second run).
"""
from __future__ import annotations

import datetime as dt
import io
import os
import random
import shutil
import tempfile
import time
import tracemalloc
from typing import Any

from PIL import Image

PREFIX = "bench-review"
STEPS_PER_EPISODE = 30
SCREENSHOTS = 40  # distinct files the records cycle through, so every record copies one
FILTERS: dict[str, dict[str, str]] = {
    "none": {},
    "decision": {"decision": "edit"},
    "reason": {"reason": "sensitive_action"},
    "kind": {"kind": "clarification"},
    "device": {"device": f"{PREFIX}-2"},
    "backend": {"backend": "openai"},
    "operator": {"operator": f"{PREFIX}-op1"},
    "status": {"status": "failed"},
    "confidence": {"min_conf": "2", "max_conf": "3"},
    "dates": {"since": "", "until": ""},  # filled with the middle of the seeded range
    "search": {"q": "wi-fi"},
    "sort_confidence": {"sort": "-confidence"},
    "sort_wait": {"sort": "-wait"},
    "last_page": {"page": "9999"},
    "combined": {"decision": "approve", "backend": "heuristic", "min_conf": "1", "q": "open"},
}
INSTRUCTIONS = ("Turn on Wi-Fi", "Open the clock and set an alarm for 7", "Order a latte",
                "Send a message to Ana", "Find a cafe nearby on the map",
                "Turn off Bluetooth", "Open settings and check the battery")
UI_NODES = [{"index": i, "class": "android.widget.TextView", "text": f"Item {i}",
             "bounds": [0, 100 * i, 1080, 100 * i + 90], "clickable": i % 2 == 0,
             "resource_id": f"com.example:id/item{i}", "package": "com.example"}
            for i in range(12)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _screenshots() -> list[str]:
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    names = []
    for n in range(SCREENSHOTS):
        buffer = io.BytesIO()
        Image.new("RGB", (360, 800), (20 + n * 5, 80, 160)).save(buffer, "JPEG", quality=80)
        name = f"steps/{PREFIX}/{n:02d}.jpg"
        if default_storage.exists(name):
            default_storage.delete(name)
        names.append(default_storage.save(name, ContentFile(buffer.getvalue())))
    return names


def cleanup() -> None:
    from django.contrib.auth import get_user_model
    from django.core.files.storage import default_storage

    from agents.runtime.models import Task
    from devices.models import Device

    tasks = Task.objects.filter(device__name__startswith=PREFIX)
    while True:  # in slices: one DELETE of 100,000 steps is slow on SQLite
        ids = list(tasks.values_list("id", flat=True)[:500])
        if not ids:
            break
        Task.objects.filter(id__in=ids).delete()
    Device.objects.filter(name__startswith=PREFIX).delete()
    get_user_model().objects.filter(username__startswith=PREFIX).delete()
    for n in range(SCREENSHOTS):
        name = f"steps/{PREFIX}/{n:02d}.jpg"
        if default_storage.exists(name):
            default_storage.delete(name)


def seed(steps: int, tickets: int) -> dict[str, Any]:
    """The log, written with bulk_create in batches; returns what the bench needs."""
    from django.contrib.auth import get_user_model
    from django.db.models import OuterRef, Subquery
    from django.utils import timezone

    from agents.runtime.models import Step, Task, Ticket, TrainingRecord
    from devices.models import Device

    rng = random.Random(13)
    User = get_user_model()
    owner = User.objects.create(username=f"{PREFIX}-user")
    admin = User.objects.create(username=f"{PREFIX}-admin", is_superuser=True, is_staff=True)
    operators = [User.objects.create(username=f"{PREFIX}-op{n}") for n in range(3)]
    devices = [Device.objects.create(name=f"{PREFIX}-{n}", width=1080, height=2400)
               for n in range(4)]
    shots = _screenshots()
    episodes = max(1, steps // STEPS_PER_EPISODE)
    start = timezone.now() - dt.timedelta(days=60)
    statuses = ["succeeded"] * 6 + ["failed", "aborted"]
    backends = ("heuristic", "openai", "oracle")
    task_rows = []
    for n in range(episodes):
        created = start + dt.timedelta(minutes=n * 60 * 24 * 60 / episodes)
        task_rows.append(Task(
            owner=owner, device=devices[n % 4], threshold=4.0, backend=backends[n % 3],
            instruction=f"{INSTRUCTIONS[n % len(INSTRUCTIONS)]} (#{n})",
            status=statuses[n % len(statuses)], success=None if n % 5 else n % 10 == 0,
            interventions=tickets // episodes, started_at=created,
            finished_at=created + dt.timedelta(minutes=5)))
    Task.objects.bulk_create(task_rows, batch_size=1000)
    # auto_now_add ignores the value given; spread creation times for the date filters.
    for task in task_rows:
        task.created_at = task.started_at
    Task.objects.bulk_update(task_rows, ["created_at"], batch_size=1000)

    step_rows = []
    for task in task_rows:
        for index in range(STEPS_PER_EPISODE):
            confidence = rng.choice((1.0, 2.0, 3.0, 4.0, 5.0, 5.0))
            action = {"type": "CLICK", "x": rng.randrange(1080), "y": rng.randrange(2400),
                      "element": f"Item {index % 12}"}
            step_rows.append(Step(
                task=task, index=index, status="done",
                screenshot=shots[(len(step_rows)) % len(shots)], screen_width=1080,
                screen_height=2400, app="com.example", ui_nodes=UI_NODES,
                plan=["open the app", "tap the item"], current_step="tap the item",
                thought="the item is on screen", proposed_action=action,
                confidence=confidence, executed_action=action, summary=f"CLICK 'Item {index}'",
                outcome="changed", screen_changed=True))
            if len(step_rows) >= 5000:
                Step.objects.bulk_create(step_rows, batch_size=1000)
                step_rows = []
    Step.objects.bulk_create(step_rows, batch_size=1000)

    step_ids = list(Step.objects.filter(task__in=task_rows).order_by("task_id", "index")
                    .values_list("id", "task_id", "index", "confidence", "proposed_action",
                                 "screenshot"))
    chosen = rng.sample(step_ids, min(tickets, len(step_ids)))
    reasons = ("low_confidence",) * 6 + ("sensitive_action", "repeated_failure",
                                         "parse_error", "ambiguous_intent")
    decisions = ("approve",) * 5 + ("edit",) * 3 + ("takeover", "abort", "")
    created_of = {t.id: t.created_at for t in task_rows}
    instruction_of = {t.id: t.instruction for t in task_rows}
    ticket_rows, record_rows = [], []
    for n, (step_id, task_id, index, confidence, action, shot) in enumerate(chosen):
        reason = reasons[n % len(reasons)]
        kind = "clarification" if reason == "ambiguous_intent" else "intervention"
        decision = "answer" if kind == "clarification" else decisions[n % len(decisions)]
        created = created_of[task_id] + dt.timedelta(seconds=index * 10)
        resolved = bool(decision)
        ticket_rows.append(Ticket(
            kind=kind, reason=reason, task_id=task_id, step_id=step_id,
            step_confidence=confidence,
            status="resolved" if resolved else "open", note="the confidence is below γ",
            question="Which one?" if kind == "clarification" else "",
            decision=decision, answer="the first" if decision == "answer" else "",
            human_action={"type": "PRESS_BACK"} if decision == "edit" else None,
            resolved_by=operators[n % 3] if resolved else None,
            resolved_at=created + dt.timedelta(seconds=5 + n % 90) if resolved else None))
    Ticket.objects.bulk_create(ticket_rows, batch_size=1000)
    for ticket, (step_id, task_id, index, confidence, action, shot) in zip(ticket_rows, chosen):
        ticket.created_at = created_of[task_id] + dt.timedelta(seconds=index * 10)
    Ticket.objects.bulk_update(ticket_rows, ["created_at"], batch_size=1000)
    labels = {"approve": 5, "edit": 1, "takeover": 1}
    for ticket, (step_id, task_id, index, confidence, action, shot) in zip(ticket_rows, chosen):
        if ticket.status != "resolved":
            continue
        record_rows.append(TrainingRecord(
            ticket=ticket, task_id=task_id, step_index=index,
            instruction=instruction_of[task_id], goal=instruction_of[task_id],
            screenshot=shot, ui_nodes=UI_NODES, history=[f"CLICK 'Item {i}'" for i in
                                                         range(index)][-8:],
            plan=["open the app"], agent_action=action, agent_confidence=confidence,
            human_action=ticket.human_action, decision=ticket.decision, reason=ticket.reason,
            question=ticket.question, answer=ticket.answer,
            score_label=labels.get(ticket.decision), operator=ticket.resolved_by,
            operator_seconds=(ticket.resolved_at - ticket.created_at).total_seconds()))
        if len(record_rows) >= 2000:
            TrainingRecord.objects.bulk_create(record_rows, batch_size=1000)
            record_rows = []
    TrainingRecord.objects.bulk_create(record_rows, batch_size=1000)
    # A record is made when its ticket is resolved: date it like its ticket.
    TrainingRecord.objects.filter(task__device__name__startswith=PREFIX).update(
        created_at=Subquery(Ticket.objects.filter(id=OuterRef("ticket_id"))
                            .values("created_at")[:1]))
    # A live database keeps statistics on its tables; freshly bulk-loaded ones have none,
    # and the planner would choose as if they were empty.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    middle = start + dt.timedelta(days=30)
    FILTERS["dates"] = {"since": (middle - dt.timedelta(days=3)).date().isoformat(),
                        "until": middle.date().isoformat()}
    return {"admin": admin, "replay_task": task_rows[len(task_rows) // 2],
            "steps": len(task_rows) * STEPS_PER_EPISODE, "tickets": len(ticket_rows)}


def seeded_already() -> dict[str, Any] | None:
    """What an earlier ``--keep`` run left, ready to measure again (``--reuse``)."""
    from django.contrib.auth import get_user_model

    from agents.runtime.models import Step, Task, Ticket

    admin = get_user_model().objects.filter(username=f"{PREFIX}-admin").first()
    tasks = Task.objects.filter(device__name__startswith=PREFIX).order_by("created_at")
    count = tasks.count()
    if admin is None or not count:
        return None
    middle = tasks[count // 2]
    FILTERS["dates"] = {"since": (middle.created_at - dt.timedelta(days=3)).date().isoformat(),
                        "until": middle.created_at.date().isoformat()}
    return {"admin": admin, "replay_task": middle,
            "steps": Step.objects.filter(task__in=tasks).count(),
            "tickets": Ticket.objects.filter(task__in=tasks).count()}


def _timed(client: Any, url: str, params: dict[str, str] | None = None
           ) -> tuple[float, float, Any]:
    """Wall and CPU milliseconds of one request. CPU is this process's: the view, the
    templates and, on SQLite, the database itself; on a shared machine the wall time also
    holds the waits for a free core."""
    t0, c0 = time.perf_counter(), time.process_time()
    response = client.get(url, params or {})
    return (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000, response


def bench_review(*, steps: int = 100_000, tickets: int = 20_000, samples: int = 15,
                 keep: bool = False, reuse: bool = False) -> dict[str, Any]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from agents.runtime.models import TrainingRecord
    from agents.runtime.training.export import ExportFilter, export_to_directory

    try:
        setup_test_environment()  # the test client needs it ("testserver" host)
    except RuntimeError:
        pass  # already set up: running under pytest (the smoke test)
    started = time.perf_counter()
    seeded = seeded_already() if reuse else None
    reused = seeded is not None
    if seeded is None:
        cleanup()
        seeded = seed(steps, tickets)
    seed_s = time.perf_counter() - started
    client = Client()
    client.force_login(seeded["admin"])
    try:
        per_filter: dict[str, float] = {}
        cpu_per_filter: dict[str, float] = {}
        rows_seen: dict[str, int] = {}
        for name, params in FILTERS.items():
            response = client.get("/review/", params)  # warm the caches of this filter
            if response.status_code != 200:
                raise RuntimeError(f"/review/ {params} answered {response.status_code}")
            walls, cpus = [], []
            for _ in range(samples):
                wall, cpu, response = _timed(client, "/review/", params)
                walls.append(wall)
                cpus.append(cpu)
            per_filter[name] = round(percentile(walls, 0.95), 1)
            cpu_per_filter[name] = round(percentile(cpus, 0.95), 1)
            rows_seen[name] = response.content.count(b"<tr data-ticket-id=")
        facets = [_timed(client, "/review/facets", FILTERS["decision"])[0]
                  for _ in range(max(3, samples // 3))]
        url = f"/review/tasks/{seeded['replay_task'].id}/"
        client.get(url)
        replay, replay_cpu = [], []
        for _ in range(samples):
            wall, cpu, response = _timed(client, url)
            replay.append(wall)
            replay_cpu.append(cpu)
        replay_steps = response.content.count(b'class="card replay-step"')

        out_dir = tempfile.mkdtemp(prefix="kairos-bench-export-")
        try:
            records = TrainingRecord.objects.filter(task__device__name__startswith=PREFIX)
            everything = ExportFilter(tickets=None)
            everything_records = records.count()
            t0, cpu0 = time.perf_counter(), time.process_time()
            stats = export_to_directory("llamafactory", everything, out_dir)
            export_s = time.perf_counter() - t0
            # On a shared machine the wall time includes waiting for a core; the CPU time
            # is what the export itself costs (this process; the database's own work on
            # PostgreSQL is in its server process).
            export_cpu_s = time.process_time() - cpu0
            tenth_day = _tenth_of_the_range(records)
            peaks = {}
            for label, filt in (("tenth", ExportFilter(until=tenth_day)), ("all", everything)):
                shutil.rmtree(out_dir, ignore_errors=True)
                tracemalloc.start()
                measured = export_to_directory("llamafactory", filt, out_dir)
                peaks[label] = (tracemalloc.get_traced_memory()[1] // 1024, measured.records)
                tracemalloc.stop()
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)
    finally:
        if not keep:
            cleanup()
    return {
        "bench": "review", "database": connection.vendor,
        "seeded_steps": seeded["steps"], "seeded_tickets": seeded["tickets"],
        "seed_s": round(seed_s, 1), "reused_seed": reused, "samples": samples,
        "log_p95_ms": max(per_filter.values()) if per_filter else None,
        "log_cpu_p95_ms": max(cpu_per_filter.values()) if cpu_per_filter else None,
        "log_p95_ms_by_filter": per_filter, "log_cpu_p95_ms_by_filter": cpu_per_filter,
        "log_rows_by_filter": rows_seen,
        "facets_p95_ms": round(percentile(facets, 0.95), 1),
        "replay_steps": replay_steps,
        "replay_p95_ms": round(percentile(replay, 0.95), 1) if replay else None,
        "replay_cpu_p95_ms": round(percentile(replay_cpu, 0.95), 1) if replay_cpu else None,
        "export_records": stats.records, "export_samples": stats.samples,
        "export_images": stats.images, "export_s": round(export_s, 2),
        "export_records_per_s": round(stats.records / export_s, 1) if export_s else None,
        "export_cpu_s": round(export_cpu_s, 2),
        "export_records_per_cpu_s": round(stats.records / export_cpu_s, 1)
        if export_cpu_s else None,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "export_peak_kib_tenth": peaks["tenth"][0], "export_records_tenth": peaks["tenth"][1],
        "export_peak_kib_all": peaks["all"][0], "export_records_all": peaks["all"][1],
        "export_records_expected": everything_records,
    }


def _tenth_of_the_range(records) -> dt.date:
    dates = records.order_by("created_at").values_list("created_at", flat=True)
    n = dates.count()
    return dates[max(0, n // 10 - 1)].date() if n else dt.date.today()
