"""Replay a static dataset (AITZ episodes or StaR toggle records) with a backend."""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from agents.evaluation.datasets import DatasetError
from agents.evaluation.suites import evaluate_dataset, format_table
from agents.evaluation.management.commands.evaluate import ProgressBar


class Command(BaseCommand):
    help = "Score a backend step by step on a static dataset (StaR App. A.2 match rules)."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--format", required=True, choices=("aitz", "star"))
        parser.add_argument("--backend", default="heuristic")
        parser.add_argument("--json", dest="json_out", help="write the JSON result to this file")

    def handle(self, *args, path: str, **opts):
        try:
            result = evaluate_dataset(opts["format"], path, opts["backend"], progress=ProgressBar())
        except (DatasetError, FileNotFoundError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(format_table(result))
        if opts["json_out"]:
            with open(opts["json_out"], "w") as handle:
                json.dump(result, handle, indent=2)
        if result.get("unsupported") and not result.get("steps"):
            raise CommandError(f"nothing was scored: {result['unsupported']}")
