"""``bench memory``: the cost of looking up experience per step (issue 25 item 5).

Seeds ``steps`` remembered steps into the database (the experience tables; 100,000 by
default), spread like a busy installation's: ``apps`` apps, each with the screens of the
development streams' apps (Pocketpay, Homely: real signatures, real instructions and
actions learned by walking their tasks), repeated with other instructions. Then times
:func:`agents.brain.experience.memory.lookup` — what every step of every backend pays — on real
screens of those apps: p50/p95 in ms over ``samples`` lookups, on the database the
installation uses (SQLite or PostgreSQL), and the same against the in-process store; with
the machine's load average, since wall-clock percentiles on shared cores include waiting.
The seeded rows are removed afterwards (their apps are ``bench.memory.*``).
"""
from __future__ import annotations

import os
import random
import statistics
import time
from typing import Any

BENCH_PREFIX = "bench.memory."
STREAMS = ("devices/sim/suites/streams1_pocketpay.yaml", "devices/sim/suites/streams1_homely.yaml")


def _walks(tasks_per_stream: int | None = None) -> list[dict[str, Any]]:
    """Every step of the streams' tasks, as the oracle operator would do them: screen,
    instruction, action, the step before."""
    from agents.brain import loop
    from agents.brain.experience.memory import step_key
    from devices.sim import SimDevice, find_suite
    from devices.sim.oracle import Oracle

    out = []
    for path in STREAMS:
        suite = find_suite(path)
        for task in suite.tasks[:tasks_per_stream]:
            device = SimDevice("bench-memory", apps=suite.bundle)
            device.reset(task)
            oracle = Oracle(device, task)
            prev = ""
            for _ in range(12):
                observation = device.observe()
                action = oracle.next_actions()[0]
                target = loop.target_node(action, observation.nodes)
                summary = loop.history_entry(0, action, "operator", True, target).summary
                out.append({"app": observation.app, "nodes": observation.nodes,
                            "instruction": task.instruction, "action": action, "prev": prev})
                prev = step_key(action, summary, task.instruction)
                if action.type == "COMPLETE":
                    break
                device.perform(action)
    return out


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def cleanup() -> int:
    from agents.runtime.models import ExperienceEntry, ExperienceScreen

    count, _ = ExperienceEntry.objects.filter(app__startswith=BENCH_PREFIX).delete()
    ExperienceScreen.objects.filter(app__startswith=BENCH_PREFIX).delete()
    return count


def bench_memory(*, steps: int = 100_000, apps: int = 200, samples: int = 500,
                 keep: bool = False, seed: int = 7, tasks_per_stream: int | None = None
                 ) -> dict[str, Any]:
    from django.db import connection, transaction

    from agents.brain.experience.memory import MemoryStore, lookup, remember
    from agents.runtime.experience_store import DbStore
    from agents.runtime.models import ExperienceEntry, ExperienceScreen

    rng = random.Random(seed)
    walks = _walks(tasks_per_stream)
    # Each walk step becomes an entry template (signature, action, precondition) once.
    templates, template_walks = [], []
    scratch = MemoryStore()
    for walk in walks:
        entry = remember(scratch, app=walk["app"], nodes=walk["nodes"],
                         instruction=walk["instruction"], action=walk["action"], polarity=1,
                         source="approve", prev=walk["prev"])
        if entry is not None:
            templates.append(entry)
            template_walks.append(walk)
    started = time.perf_counter()
    cleanup()
    memory = MemoryStore()
    rows, screens, seeded = [], {}, []
    for i in range(steps):
        entry = templates[i % len(templates)]
        app = f"{BENCH_PREFIX}{rng.randrange(apps)}.{entry.app}"
        rows.append(ExperienceEntry(
            app=app, signature=entry.signature, tokens=list(entry.tokens),
            fields=[list(f) for f in entry.fields], instruction=entry.instruction,
            action=entry.action.to_json(), action_key=entry.action.key()[:255], pre=entry.pre,
            polarity=1 if rng.random() > 0.05 else -1, source="approve"))
        screens[(app, entry.signature)] = (list(entry.tokens), [list(f) for f in entry.fields])
        memory.add(type(entry)(**{**entry.__dict__, "app": app}))
        seeded.append((app, template_walks[i % len(templates)]))
    with transaction.atomic():
        ExperienceEntry.objects.bulk_create(rows, batch_size=5000)
        ExperienceScreen.objects.bulk_create(
            [ExperienceScreen(app=a, signature=s, tokens=t, fields=f)
             for (a, s), (t, f) in screens.items()], batch_size=5000, ignore_conflicts=True)
    seed_s = time.perf_counter() - started
    store = DbStore()
    try:
        # A step on a screen an app was seen on (its remembered steps are fetched and
        # matched), and one in ten on an app the installation never saw (a miss).
        chosen = [rng.choice(seeded) for _ in range(samples)]
        probes = [walk for _, walk in chosen]
        apps_of = [app if i % 10 else f"{BENCH_PREFIX}unseen.{walk['app']}"
                   for i, (app, walk) in enumerate(chosen)]
        for probe, app in list(zip(probes, apps_of))[:20]:  # warm the connection and caches
            lookup(store, app, probe["nodes"], probe["instruction"], prev=probe["prev"])
        db_ms, cpu_ms, mem_ms, found = [], [], [], 0
        for probe, app in zip(probes, apps_of):
            t0, c0 = time.perf_counter(), time.process_time()
            result = lookup(store, app, probe["nodes"], probe["instruction"], prev=probe["prev"])
            db_ms.append((time.perf_counter() - t0) * 1000)
            cpu_ms.append((time.process_time() - c0) * 1000)
            found += int(result.best is not None)
            t0 = time.perf_counter()
            lookup(memory, app, probe["nodes"], probe["instruction"], prev=probe["prev"])
            mem_ms.append((time.perf_counter() - t0) * 1000)
        stored = ExperienceEntry.objects.filter(app__startswith=BENCH_PREFIX).count()
    finally:
        if not keep:
            cleanup()
    return {
        "bench": "memory", "database": connection.vendor, "remembered_steps": stored,
        "apps": apps, "samples": len(db_ms), "lookups_with_a_match": found,
        "lookup_p50_ms": round(statistics.median(db_ms), 3),
        "lookup_p95_ms": round(_percentile(db_ms, 0.95), 3),
        # CPU time of this process per lookup (the database server's work excluded): on a
        # machine whose cores are shared, wall-clock percentiles include waiting for a core.
        "lookup_cpu_p95_ms": round(_percentile(cpu_ms, 0.95), 3),
        "in_process_p50_ms": round(statistics.median(mem_ms), 3),
        "in_process_p95_ms": round(_percentile(mem_ms, 0.95), 3),
        "seed_s": round(seed_s, 1),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpu_cores": os.cpu_count(),
    }
