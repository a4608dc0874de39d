"""Measure this installation (CONTRACT ``bench``): prints one JSON object."""
from __future__ import annotations

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

BENCHES = ("observe", "loop", "tickets", "stream", "tokens", "review")


class Command(BaseCommand):
    help = "Benchmarks: observe, loop, tickets, stream (--viewers N), tokens, review."

    def add_arguments(self, parser):
        parser.add_argument("name", choices=BENCHES)
        parser.add_argument("--json", action="store_true", help="one JSON object only")
        parser.add_argument("--viewers", type=int, default=1, help="stream: number of viewers")
        parser.add_argument("--samples", type=int, default=None, help="how many measurements")
        parser.add_argument("--errands", default=None,
                            help="observe: time the oracle on this suite's multi-app tasks "
                                 "(default: every bundled one)")
        parser.add_argument("--steps", type=int, default=100_000,
                            help="review: steps to seed (default 100,000)")
        parser.add_argument("--tickets", type=int, default=20_000,
                            help="review: tickets to seed (default 20,000)")
        parser.add_argument("--smoke", action="store_true",
                            help="review: a small, quick run (600 steps, 120 tickets)")
        parser.add_argument("--keep", action="store_true",
                            help="review: leave the seeded log in the database")
        parser.add_argument("--reuse", action="store_true",
                            help="review: measure the log a --keep run left (no new seed)")

    def handle(self, *args, name: str, **opts):
        result = self._run(name, opts)
        result.setdefault("database", connection.vendor)
        result.setdefault("channel_layer",
                          settings.CHANNEL_LAYERS["default"]["BACKEND"].rsplit(".", 1)[-1])
        if opts["json"]:
            self.stdout.write(json.dumps(result))
        else:
            for key, value in result.items():
                self.stdout.write(f"{key:>28}: {value}")

    def _run(self, name: str, opts) -> dict:
        samples = opts["samples"]
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
                                       errands=opts["errands"])
            except (SimLoadError, LookupError) as exc:
                raise CommandError(str(exc)) from None
            if opts["errands"] and not result["oracle_errands"]:
                raise CommandError(f"no task of {opts['errands']} spans two apps: "
                                   "no errand was timed")
            return {"bench": "observe", **result}
        if name == "loop":
            from agents.bench import bench_loop

            return bench_loop(**({"steps": samples} if samples else {}))
        if name == "tokens":
            from agents.bench_tokens import bench_tokens

            return bench_tokens()
        if name == "review":
            return self._review(opts)
        if name in ("tickets", "stream"):
            from devices import bench_stream

            if name == "tickets":
                return bench_stream.bench_tickets(**({"samples": samples} if samples else {}))
            if opts["viewers"] < 1:
                raise CommandError("--viewers must be at least 1")
            return bench_stream.bench_stream(viewers=opts["viewers"])
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
