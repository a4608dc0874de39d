"""Measure the shipped prior of the experience memory's confidence (issue 25).

Runs ``evaluate --learn`` (heuristic backend, oracle operator, the shipped calibrator, no
prior) on development suites and counts, per bucket (kind / times confirmed / instruction
similarity, ``agents.brain.calibration.experience.bucket``), how often a proposal that came
from memory was right by the oracle's step label. Never run it on held-out suites
(``heldout_*``, ``fresh11``–``fresh15``, ``streams2_*``, ``streams3_*``): what judges the
memory must not have shaped its prior.
"""
from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agents.brain.calibration.experience import PRIOR_WEIGHT, SHIPPED_PRIOR, ExperiencePrior

DEVELOPMENT = ("streams1_pocketpay,streams1_homely,toggles,everyday,reworded2,home,bank,"
               "cloud,complex,fresh_apps,fresh2_apps,fresh3_apps,fresh4_apps,fresh5_apps,"
               "fresh6_apps,fresh7_apps,fresh8_apps,fresh9_apps,fresh10_apps")
HELD_OUT = ("heldout_", "streams2_", "streams3_", "streams4_", "fresh11", "fresh12", "fresh13",
            "fresh14", "fresh15")


class Command(BaseCommand):
    help = ("Measure the experience memory's prior on development suites and write it "
            "(default: the shipped file).")

    def add_arguments(self, parser):
        parser.add_argument("--suites", default=DEVELOPMENT,
                            help="comma-separated development suites")
        parser.add_argument("--thresholds", default="4,5")
        parser.add_argument("--out", default=str(SHIPPED_PRIOR))

    def handle(self, *args, **opts):
        from agents.evaluation.learning import evaluate_learning

        suites = [s.strip() for s in opts["suites"].split(",") if s.strip()]
        if any(s.startswith(HELD_OUT) for s in suites):
            raise CommandError("held-out suites must not shape the prior")
        thresholds = [float(t) for t in opts["thresholds"].split(",")]
        rows: list[dict] = []
        for suite in suites:
            evaluate_learning(suite, "heuristic", thresholds, var_dir=str(settings.VAR_DIR),
                              memory_rows=rows)
            self.stderr.write(f"{suite}: {len(rows)} memory proposals so far")
        counts: dict[str, list[int]] = {}
        for row in rows:
            counts.setdefault(row["bucket"], [0, 0])[0 if row["right"] else 1] += 1
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, cwd=settings.BASE_DIR).stdout.strip()
        except OSError:
            commit = ""
        prior = ExperiencePrior(
            {k: (r, w) for k, (r, w) in counts.items()}, PRIOR_WEIGHT,
            {"measured": datetime.date.today().isoformat(), "commit": commit,
             "how": ("manage.py fit_experience_prior: evaluate --learn, heuristic backend, "
                     "oracle operator, shipped calibrator, no prior; every judged proposal "
                     "that came from memory (proposed by it, or the backend agreeing with "
                     "it), right = the oracle found the step right"),
             "suites": suites, "thresholds": thresholds,
             "proposals": len(rows)})
        Path(opts["out"]).write_text(json.dumps(prior.to_json(), indent=1) + "\n")
        for key, (r, w) in sorted(counts.items()):
            self.stdout.write(f"{key:24s} {r:5d} right {w:4d} wrong")
        self.stdout.write(f"wrote {opts['out']}")
