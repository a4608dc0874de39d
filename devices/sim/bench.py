"""Simulator timings for ``manage.py bench observe`` (CONTRACT: bench)."""
from __future__ import annotations

import statistics
import time
from typing import Any

from devices.actions import Action
from devices.sim.device import SimDevice
from devices.sim.oracle import NoPathError, Oracle, clear_cache
from devices.sim.suite import bundled_suite_names, find_suite
from devices.sim.world import World


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def errand_tasks(suite_ref: str | None = None) -> list[tuple[Any, Any]]:
    """(suite, task) for every task whose success predicate spans two or more apps — the
    errands — in ``suite_ref`` (a suite file or bundled name), or in every bundled suite."""
    names = [suite_ref] if suite_ref else bundled_suite_names()
    out = []
    for name in names:
        suite = find_suite(name)
        for task in suite.tasks:
            if task.success is None:
                continue
            apps = {var.split(".", 1)[0] for var in task.success.names if "." in var}
            if len(apps) >= 2:
                out.append((suite, task))
    return out


def bench_errands(suite_ref: str | None = None) -> dict[str, Any]:
    """Cold oracle answers (distance and optimal next actions from the start) on the
    errands: the issue-12 target is under 2 s each for optimal paths of 11–16 actions."""
    timings: list[float] = []
    lengths: list[int] = []
    no_path: list[str] = []
    for suite, task in errand_tasks(suite_ref):
        clear_cache()
        world = World(suite.bundle, task.perturbations)
        start = time.perf_counter()
        oracle = Oracle(world, task)
        try:
            lengths.append(oracle.distance())
        except NoPathError:
            no_path.append(task.id)  # beyond the budget: named, not timed
            continue
        oracle.next_actions()
        timings.append((time.perf_counter() - start) * 1000)
    clear_cache()
    return {
        "oracle_errands": len(timings),
        "oracle_errands_without_path": no_path,
        "oracle_errand_max_ms": round(max(timings), 3) if timings else None,
        "oracle_errand_mean_ms": round(statistics.fmean(timings), 3) if timings else None,
        "oracle_errand_actions": [min(lengths), max(lengths)] if lengths else None,
    }


def bench_observe(samples: int = 200, errands: str | None = None,
                  oracle: bool = True) -> dict[str, Any]:
    """Median/tail of ``observe()`` on an unchanged screen and right after a change (render
    + JPEG encode), (with ``oracle``) the slowest cold oracle answer over every bundled task,
    and the oracle's cold answers on the errands (:func:`bench_errands`; ``errands``: a
    suite)."""
    device = SimDevice("bench")
    device.perform(Action("OPENAPP", app="Settings"))
    device.perform(Action("CLICK", x=540, y=376))  # Network & internet: two switches
    device.observe()
    unchanged: list[float] = []
    for _ in range(samples):
        start = time.perf_counter()
        device.observe()
        unchanged.append((time.perf_counter() - start) * 1000)
    changed: list[float] = []
    for _ in range(samples):
        device.perform(Action("CLICK", x=540, y=364))  # toggle Wi-Fi: the screen changes
        start = time.perf_counter()
        device.observe()
        changed.append((time.perf_counter() - start) * 1000)
    oracle_ms: list[float] = []
    tasks = 0
    for name in bundled_suite_names() if oracle else ():
        suite = find_suite(name)
        for task in suite.tasks:
            if task.success is None:
                continue
            clear_cache()
            world = World(suite.bundle, task.perturbations)  # cold: no cached layouts
            start = time.perf_counter()
            Oracle(world, task).next_actions()
            oracle_ms.append((time.perf_counter() - start) * 1000)
            tasks += 1
    clear_cache()
    errand_numbers = bench_errands(errands) if oracle else {}
    return {
        "observe_unchanged_p50_ms": _p(unchanged, 0.5),
        "observe_unchanged_p95_ms": _p(unchanged, 0.95),
        "observe_changed_p50_ms": _p(changed, 0.5),
        "observe_changed_p95_ms": _p(changed, 0.95),
        "oracle_max_ms": round(max(oracle_ms), 3) if oracle_ms else None,
        "oracle_mean_ms": round(statistics.fmean(oracle_ms), 3) if oracle_ms else None,
        "oracle_tasks": tasks,
        **errand_numbers,
        "frame_size": [round(device.info.width * device.scale),
                       round(device.info.height * device.scale)],
        "renders": device.render_count,
        "samples": len(unchanged),
    }
