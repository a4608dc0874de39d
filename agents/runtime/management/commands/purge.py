"""Remove old finished tasks with their screenshots (CONTRACT ``purge``); dry run by default.

    purge --older-than DAYS [--yes]
"""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from agents.runtime.retention import purge


class Command(BaseCommand):
    help = ("Remove finished tasks older than DAYS with their steps, tickets, chat, training "
            "records and screenshot files. Prints what it would remove unless --yes.")

    def add_arguments(self, parser):
        parser.add_argument("--older-than", type=float, required=True, metavar="DAYS",
                            help="tasks finished more than DAYS days ago")
        parser.add_argument("--yes", action="store_true", help="really remove them")

    def handle(self, *args, older_than: float, yes: bool, **opts):
        if older_than < 0:
            raise CommandError("--older-than must be zero or more days")
        report = purge(older_than, dry_run=not yes)
        verb = "Removed" if yes else "Would remove"
        self.stdout.write(
            f"{verb} {report.tasks} finished tasks from before "
            f"{report.cutoff:%Y-%m-%d %H:%M} UTC: {report.steps} steps, {report.tickets} "
            f"tickets, {report.messages} chat messages, {report.training_records} training "
            f"records, {report.files} screenshot files ({report.bytes / 1e6:.1f} MB).")
        if report.missing_files:
            self.stdout.write(f"{report.missing_files} referenced files were already gone.")
        for error in report.errors:
            self.stderr.write(f"could not delete {error}")
        if not yes and report.tasks:
            self.stdout.write("Dry run: nothing was removed. Run again with --yes to remove.")
