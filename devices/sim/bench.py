"""Simulator timings for ``manage.py bench observe`` (CONTRACT: bench)."""
from __future__ import annotations

import statistics
import time
from typing import Any

from devices.actions import Action
from devices.sim.device import SimDevice
from devices.sim.oracle import Oracle, clear_cache
from devices.sim.suite import bundled_suite_names, find_suite
from devices.sim.world import World


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def bench_observe(samples: int = 200, oracle: bool = True) -> dict[str, Any]:
    """Median/tail of ``observe()`` on an unchanged screen and right after a change (render
    + JPEG encode), and (with ``oracle``) the slowest cold oracle answer over every bundled
    task."""
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
    return {
        "observe_unchanged_p50_ms": _p(unchanged, 0.5),
        "observe_unchanged_p95_ms": _p(unchanged, 0.95),
        "observe_changed_p50_ms": _p(changed, 0.5),
        "observe_changed_p95_ms": _p(changed, 0.95),
        "oracle_max_ms": round(max(oracle_ms), 3) if oracle_ms else None,
        "oracle_mean_ms": round(statistics.fmean(oracle_ms), 3) if oracle_ms else None,
        "oracle_tasks": tasks,
        "frame_size": [round(device.info.width * device.scale),
                       round(device.info.height * device.scale)],
        "renders": device.render_count,
        "samples": len(unchanged),
    }
