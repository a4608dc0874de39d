"""Measure this installation (CONTRACT ``bench``): prints one JSON object.

A bench that measured nothing (0 frames, 0 samples) prints its result and exits non-zero,
so a broken set-up cannot pass for a number. ``--smoke`` runs each bench briefly; CI runs
every bench once that way (``tests/test_bench_smoke.py``).
"""
from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

BENCHES = ("observe", "loop", "tickets", "stream", "tokens", "review", "memory")

# The count in each bench's result that says how much it measured; 0 (or missing) fails.
MEASURED = {"observe": "samples", "loop": "steps", "tickets": "samples", "stream": "frames",
            "tokens": "steps", "memory": "samples"}

# Short runs for CI: enough to prove the bench measures something, not to time it.
SMOKE = {"observe": {"samples": 5}, "loop": {"samples": 3}, "tickets": {"samples": 2},
         "stream": {"seconds": 1.0}, "tokens": {}, "review": {}, "memory": {"samples": 20}}


def nothing_measured(name: str, result: dict[str, Any]) -> str | None:
    """Why ``result`` of bench ``name`` measured nothing, or None when it measured something."""
    key = MEASURED.get(name)
    if key is None:
        return None
    if not result.get(key):
        return f"bench {name} measured nothing ({key} = {result.get(key)!r})"
    if name == "stream" and not result.get("fps_per_viewer"):
        return "bench stream: a viewer received no frame (fps_per_viewer = 0)"
    if name == "stream" and result.get("last_frame_shown") is False:
        return "bench stream: the last frame the phone sent never reached every viewer"
    return None


class Command(BaseCommand):
    help = ("Benchmarks: observe, loop, tickets, stream (--viewers N, --device NAME), tokens, "
            "review, memory. Exits non-zero when a bench measured nothing.")

    def add_arguments(self, parser):
        parser.add_argument("name", choices=BENCHES)
        parser.add_argument("--json", action="store_true", help="one JSON object only")
        parser.add_argument("--viewers", type=int, default=1, help="stream: number of viewers")
        parser.add_argument("--device", default="sim",
                            help="observe, stream: the phone, 'sim' (default) or 'adb-fake' "
                                 "(the adb driver and scrcpy against the fake phone)")
        parser.add_argument("--samples", type=int, default=None, help="how many measurements")
        parser.add_argument("--ocr", action="store_true",
                            help="observe --device adb-fake: a phone whose UI tree cannot be "
                                 "read, its screen read by OCR (1080x2400 screenshots)")
        parser.add_argument("--seconds", type=float, default=None,
                            help="stream: how long to measure (default 5)")
        parser.add_argument("--errands", default=None,
                            help="observe: time the oracle on this suite's multi-app tasks "
                                 "(default: every bundled one)")
        parser.add_argument("--steps", type=int, default=100_000,
                            help="review, memory: steps to seed (default 100,000)")
        parser.add_argument("--tickets", type=int, default=20_000,
                            help="review: tickets to seed (default 20,000)")
        parser.add_argument("--smoke", action="store_true",
                            help="a short run that only proves the bench measures something "
                                 "(review: 600 steps, 120 tickets; memory: 2,000 steps)")
        parser.add_argument("--keep", action="store_true",
                            help="review, memory: leave the seeded rows in the database")
        parser.add_argument("--reuse", action="store_true",
                            help="review: measure the log a --keep run left (no new seed)")

    def handle(self, *args, name: str, **opts):
        if opts["smoke"]:
            for key, value in SMOKE[name].items():
                if opts.get(key) is None:
                    opts[key] = value
        result = self._run(name, opts)
        result.setdefault("database", connection.vendor)
        result.setdefault("channel_layer",
                          settings.CHANNEL_LAYERS["default"]["BACKEND"].rsplit(".", 1)[-1])
        if opts["json"]:
            self.stdout.write(json.dumps(result))
        else:
            for key, value in result.items():
                self.stdout.write(f"{key:>28}: {value}")
        problem = nothing_measured(name, result)
        if problem:
            raise CommandError(problem)

    def _run(self, name: str, opts) -> dict:
        samples = opts["samples"]
        if name == "observe" and opts["device"] == "adb-fake" and opts["ocr"]:
            from devices.adb.bench import bench_ocr_observe

            return {"bench": "observe", **bench_ocr_observe(**({"samples": samples}
                                                              if samples else {}))}
        if name == "observe" and opts["device"] == "adb-fake":
            from devices.adb.bench import bench_adb_observe

            return {"bench": "observe", **bench_adb_observe(**({"samples": samples}
                                                              if samples else {}))}
        if name == "observe":
            from devices.sim import SimLoadError
            from devices.sim.bench import bench_observe, errand_tasks

            if samples is not None and samples < 1:
                raise CommandError("--samples must be at least 1")
            try:
                if opts["errands"] and not errand_tasks(opts["errands"]):
                    raise CommandError(f"no task of {opts['errands']} spans two apps: "
                                       "no errand was timed")
                result = bench_observe(**({"samples": samples} if samples else {}),
                                       errands=opts["errands"],
                                       oracle=not opts["smoke"] or bool(opts["errands"]))
            except (SimLoadError, LookupError) as exc:
                raise CommandError(str(exc)) from None
            if opts["errands"] and not result["oracle_errands"]:
                raise CommandError(f"no task of {opts['errands']} spans two apps: "
                                   "no errand was timed")
            return {"bench": "observe", **result}
        if name == "loop":
            from agents.evaluation.bench.loop import bench_loop

            return bench_loop(**({"steps": samples} if samples else {}))
        if name == "tokens":
            from agents.evaluation.bench.tokens import bench_tokens

            if opts["smoke"]:
                return bench_tokens(suites=("toggles",), tasks=["dnd_on"])
            return bench_tokens()
        if name == "review":
            return self._review(opts)
        if name == "memory":
            from agents.evaluation.bench.memory import bench_memory

            remembered = 2_000 if opts["smoke"] else opts["steps"]
            if remembered < 1 or (samples is not None and samples < 1):
                raise CommandError("--steps and --samples must be at least 1")
            result = bench_memory(steps=remembered, samples=samples or 500, keep=opts["keep"],
                                  tasks_per_stream=4 if opts["smoke"] else None)
            if not result["lookups_with_a_match"]:
                result["samples"] = 0  # nothing matched: the lookups timed no real work
            return result
        if name in ("tickets", "stream"):
            from agents.evaluation.bench import stream as bench_stream

            if name == "tickets":
                return bench_stream.bench_tickets(**({"samples": samples} if samples else {}))
            if opts["viewers"] < 1:
                raise CommandError("--viewers must be at least 1")
            if opts["seconds"] is not None and opts["seconds"] <= 0:
                raise CommandError("--seconds must be positive")
            try:
                return bench_stream.bench_stream(
                    viewers=opts["viewers"], device=opts["device"],
                    **({"drive_hz": 60.0} if opts["device"] == "adb-fake" else {}),
                    **({"seconds": opts["seconds"]} if opts["seconds"] else {}),
                    **({"warmup": 0.5} if opts["smoke"] else {}))
            except bench_stream.NothingToMeasure as exc:
                raise CommandError(str(exc)) from exc
        raise CommandError(f"unknown benchmark '{name}'")

    def _review(self, opts) -> dict:
        from frontend.review.bench import bench_review

        steps, tickets = (600, 120) if opts["smoke"] else (opts["steps"], opts["tickets"])
        if steps < 30 or tickets < 1:
            raise CommandError("--steps must be at least 30 and --tickets at least 1")
        result = bench_review(steps=steps, tickets=tickets, keep=opts["keep"],
                              reuse=opts["reuse"],
                              samples=opts["samples"] or (3 if opts["smoke"] else 15))
        if not result["log_rows_by_filter"].get("none") or not result["replay_steps"] \
                or not result["export_records"] or not result["export_samples"] \
                or not result["export_images"]:
            raise CommandError(f"bench review measured nothing: {json.dumps(result)}")
        return result
