"""Write logged handoffs (or whole episodes) as training data (CONTRACT ``export_training``).

    export_training --format llamafactory|jsonl [--since DATE] [--until DATE] [--reason R]
                    [--decision D] [--backend B] [--episodes] --out DIR

Formats are described in docs/review.md; the logic is ``agents.runtime.training.export``.
"""
from __future__ import annotations

import datetime as dt
import json

from django.core.management.base import BaseCommand, CommandError

from agents.runtime.models import Decision, TicketReason
from agents.runtime.training.export import FORMATS, ExportFilter, export_to_directory


def _date(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"'{value}' is not a date like 2026-11-23") from None


class Command(BaseCommand):
    help = ("Export resolved handoffs (or, with --episodes, whole episodes) as LLaMA-Factory "
            "multimodal ShareGPT data or full JSON lines, with their screenshots.")

    def add_arguments(self, parser):
        parser.add_argument("--format", required=True, choices=FORMATS)
        parser.add_argument("--since", type=_date, help="first day, YYYY-MM-DD (inclusive)")
        parser.add_argument("--until", type=_date, help="last day, YYYY-MM-DD (inclusive)")
        parser.add_argument("--reason", choices=[c.value for c in TicketReason])
        parser.add_argument("--decision", choices=[c.value for c in Decision])
        parser.add_argument("--backend", help="only tasks of this backend")
        parser.add_argument("--episodes", action="store_true",
                            help="every step of each episode, not only the handoffs")
        parser.add_argument("--out", required=True, help="directory to write into")
        parser.add_argument("--json", action="store_true", help="print the summary as JSON")

    def handle(self, *args, **opts):
        if opts["since"] and opts["until"] and opts["since"] > opts["until"]:
            raise CommandError("--until is before --since")
        filt = ExportFilter(since=opts["since"], until=opts["until"],
                            reason=opts["reason"] or "", decision=opts["decision"] or "",
                            backend=opts["backend"] or "")
        try:
            stats = export_to_directory(opts["format"], filt, opts["out"],
                                        episodes=opts["episodes"])
        except OSError as exc:
            raise CommandError(f"cannot write to {opts['out']}: {exc}") from None
        if opts["json"]:
            self.stdout.write(json.dumps({"out": str(opts["out"]), **stats.to_json()}))
            return
        what = "episodes" if opts["episodes"] else "handoffs"
        self.stdout.write(f"{stats.records} {what} → {stats.samples} lines, {stats.images} "
                          f"screenshots in {opts['out']} ({', '.join(stats.files)})")
        if stats.missing_images:
            self.stderr.write(f"warning: {stats.missing_images} screenshots are no longer in "
                              "storage (purged?); their llamafactory samples were left out")
