"""``bench loop``: the per-step overhead of the agent loop without a model.

Each step is the real service path — observe through the device client, decide (guards
and gate), persist the step and its screenshot, execute on the device, broadcast the
events — with a fixed backend that answers instantly, so what is measured is Kairos's
own overhead, not a model's latency.
"""
from __future__ import annotations

import statistics
import time
from collections import deque
from typing import Any

from agents.brain.backends import register_backend
from agents.brain.backends.base import Proposal, StepContext
from devices.actions import COMPLETE, OPENAPP, PRESS_HOME, Action

LAUNCHER_HINTS = ("launcher", "home")


class AlternatingBackend:
    """Opens an app from the launcher, goes home from an app: every step changes the screen.
    After ``ROUNDS`` such steps it finishes: a third step on the same screen would be the
    no-progress guard's to ask about (issue 26, item 4), and a ticket ends the timing."""

    name = "bench-fixed"
    ROUNDS: int | None = 4

    def __init__(self, **_: Any):
        pass

    def propose(self, ctx: StepContext) -> Proposal:
        if self.ROUNDS is not None and ctx.step_index >= self.ROUNDS:
            return Proposal(Action(COMPLETE), confidence=5.0)
        on_launcher = any(h in ctx.observation.app.lower() for h in LAUNCHER_HINTS)
        if on_launcher and ctx.apps:
            return Proposal(Action(OPENAPP, app=ctx.apps[0].name), confidence=5.0)
        return Proposal(Action(PRESS_HOME), confidence=5.0)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def bench_loop(steps: int = 60) -> dict[str, Any]:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection

    from agents.runtime.models import Task
    from agents.runtime.services import lifecycle, steps as steps_service
    from devices.host import LocalDeviceClient, build_sim_host, set_device_client
    from devices.models import Device

    register_backend("bench-fixed", AlternatingBackend)
    host = build_sim_host(["bench-sim"])
    previous_client = set_device_client(LocalDeviceClient(host))
    pending: deque[tuple[str, int]] = deque()
    previous_scheduler = lifecycle.set_step_scheduler(
        lambda tid, index: pending.append((tid, index)))
    user, _ = get_user_model().objects.get_or_create(username="bench")
    phone = host.device("bench-sim")
    device, _ = Device.objects.update_or_create(
        name="bench-sim", defaults={"width": phone.info.width, "height": phone.info.height})
    timings: list[float] = []
    try:
        warmup = 5
        for n in range(steps + warmup):
            if not pending:  # the last task finished: the next one, as a phone's day goes
                task = Task.objects.create(owner=user, device=device, threshold=4.0,
                                           instruction="bench the loop", backend="bench-fixed")
                lifecycle.start_task(task)
                if not pending:
                    break
            task_id, index = pending.popleft()
            started = time.perf_counter()
            steps_service.run_step(task_id, index)
            if n >= warmup:
                timings.append((time.perf_counter() - started) * 1000)
    finally:
        lifecycle.set_step_scheduler(previous_scheduler)
        set_device_client(previous_client)
        Task.objects.filter(device=device).delete()
        device.delete()
    layer = settings.CHANNEL_LAYERS["default"]["BACKEND"].rsplit(".", 1)[-1]
    return {
        "bench": "loop", "steps": len(timings),
        "step_overhead_p50_ms": round(statistics.median(timings), 2) if timings else None,
        "step_overhead_p95_ms": round(percentile(timings, 0.95), 2) if timings else None,
        "database": connection.vendor, "channel_layer": layer,
    }
