"""``manage.py sagents_retention``: remove conversations idle past their owner's
retention (``lifecycle.retention``), in bounded batches; ``--dry-run`` counts.

Safe to run again at any moment, or at once with the Celery beat task
``sagents_django.tasks.apply_retention``: a batch removes only what is still idle
under its row locks."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from sagents_django.lifecycle.retention import apply_retention


class Command(BaseCommand):
    help = "Remove conversations idle past their retention (SAGENTS RETENTION_*)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="Count, remove nothing."
        )
        parser.add_argument("--json", action="store_true", help="Print the report.")

    def handle(self, *args: Any, dry_run: bool = False, **options: Any) -> None:
        report = apply_retention(dry_run=dry_run)
        if options["json"]:
            self.stdout.write(json.dumps(report.to_dict()))
            return
        verb = "Would remove" if dry_run else "Removed"
        rows = ", ".join(f"{n} {label}" for label, n in sorted(report.removed.items()))
        self.stdout.write(
            f"{verb} {report.conversations} conversation(s) of {report.owners} "
            f"owner(s) in {report.batches} batch(es); kept {report.kept} that "
            f"came back to life. Rows: {rows or 'none'}."
        )
