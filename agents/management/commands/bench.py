"""Measure this installation (CONTRACT ``bench``): prints one JSON object."""
from __future__ import annotations

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

BENCHES = ("observe", "loop", "tickets", "stream", "tokens")


class Command(BaseCommand):
    help = "Benchmarks: observe, loop, tickets, stream (--viewers N), tokens."

    def add_arguments(self, parser):
        parser.add_argument("name", choices=BENCHES)
        parser.add_argument("--json", action="store_true", help="one JSON object only")
        parser.add_argument("--viewers", type=int, default=1, help="stream: number of viewers")
        parser.add_argument("--samples", type=int, default=None, help="how many measurements")
        parser.add_argument("--errands", default=None,
                            help="observe: time the oracle on this suite's multi-app tasks "
                                 "(default: every bundled one)")

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
        if name in ("tickets", "stream"):
            from devices import bench_stream

            if name == "tickets":
                return bench_stream.bench_tickets(**({"samples": samples} if samples else {}))
            if opts["viewers"] < 1:
                raise CommandError("--viewers must be at least 1")
            return bench_stream.bench_stream(viewers=opts["viewers"])
        raise CommandError(f"unknown benchmark '{name}'")
