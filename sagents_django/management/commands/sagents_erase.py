"""``manage.py sagents_erase``: erase a user's (``--user``) or a conversation
owner's (``--owner``) agent data in every store (``lifecycle.erasure``), and print
what was removed; ``--dry-run`` counts."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sagents_django.exceptions import Conflict, InvalidInput, NotFound
from sagents_django.lifecycle.erasure import erase_owner, erase_user


class Command(BaseCommand):
    help = "Erase a user's or an owner's conversations, files and records."

    def add_arguments(self, parser: CommandParser) -> None:
        who = parser.add_mutually_exclusive_group(required=True)
        who.add_argument("--user", help="The user's primary key.")
        who.add_argument("--owner", help="The conversation owner's primary key.")
        parser.add_argument(
            "--dry-run", action="store_true", help="Count, remove nothing."
        )

    def handle(self, *args: Any, dry_run: bool = False, **options: Any) -> None:
        try:
            if options["user"] is not None:
                report = erase_user(options["user"], dry_run=dry_run)
            else:
                report = erase_owner(options["owner"], dry_run=dry_run)
        except (InvalidInput, NotFound, Conflict) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(report.to_dict(), indent=1))
