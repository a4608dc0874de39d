"""Collaborative probing (OS-Kairos §4.1): labelled steps of a backend on simulated suites.

    probe --suite S [--suite S2 …] --backend NAME --out FILE [--jobs N]
          [--max-steps 30] [--max-states N]

Writes one JSON line per labelled step (``agents/evaluation/probe.py`` documents the
record) for ``calibrate --from FILE``, and prints how many steps were right.
"""
from __future__ import annotations

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agents.evaluation.probe import probe_jobs, run_probes
from agents.evaluation.management.commands.evaluate import ProgressBar


class Command(BaseCommand):
    help = ("Run a backend on simulated suites with the oracle as teacher and write every "
            "proposal's evidence, confidence and verdict as JSON lines (for calibrate).")

    def add_arguments(self, parser):
        parser.add_argument("--suite", action="append", required=True, metavar="PATH",
                            help="suite file or bundled suite name (repeatable)")
        parser.add_argument("--backend", required=True)
        parser.add_argument("--out", required=True, help="JSON-lines file to write")
        parser.add_argument("--jobs", type=int, default=1)
        parser.add_argument("--max-steps", type=int, default=30)
        parser.add_argument("--max-states", type=int, default=None,
                            help="the oracle's search budget per query (default: "
                            "KAIROS_ORACLE_BUDGET, as evaluate --oracle-budget)")

    def handle(self, *args, **opts):
        from agents.brain.backends import UnknownBackend, get_backend
        from devices.sim import SimLoadError

        if opts["jobs"] < 1:
            raise CommandError("--jobs must be at least 1")
        if opts["max_steps"] < 1:
            raise CommandError("--max-steps must be at least 1")
        if opts["max_states"] is None:
            opts["max_states"] = settings.KAIROS_ORACLE_BUDGET
        if opts["max_states"] < 1:
            raise CommandError("--max-states must be at least 1")
        if opts["backend"].strip().lower() == "oracle":
            raise CommandError("the oracle is the teacher; probe another backend")
        try:
            get_backend(opts["backend"])  # fail fast on an unknown or unconfigured backend
        except (UnknownBackend, TypeError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        try:
            jobs = probe_jobs(opts["suite"], opts["backend"], max_steps=opts["max_steps"],
                              max_states=opts["max_states"])
        except (SimLoadError, LookupError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        counts = {"teacher": [0, 0], "own": [0, 0]}
        try:
            handle = open(opts["out"], "w")
        except OSError as exc:
            raise CommandError(f"cannot write {opts['out']}: {exc.strerror}") from None
        with handle:
            for record in run_probes(jobs, workers=opts["jobs"], progress=ProgressBar()):
                handle.write(json.dumps(record) + "\n")
                tally = counts[record["branch"]]
                tally[0] += 1
                tally[1] += int(record["right"])
        total = sum(c[0] for c in counts.values())
        if total == 0:
            raise CommandError("no labelled steps: the backend proposed nothing with evidence "
                               "and a confidence on these suites")
        for branch, (n, right) in counts.items():
            self.stdout.write(f"{branch:>8}: {n} steps, {right} right ({right / max(n, 1):.1%})")
        self.stdout.write(f"wrote {total} labelled steps of {len(jobs)} tasks to {opts['out']}")
