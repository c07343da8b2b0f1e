"""Where ``sagents_setup`` writes: the checks that need the disk, the import system
and the database (the rest of the generator is pure).

Before anything is written, every module path the run writes is checked against
what exists: a target must not turn an existing module into a package (the
``mysite.settings`` target once made ``settings.py`` unreachable) nor shadow a
module that is importable from elsewhere (``django``, ``json``), since either breaks
imports of the whole site. Then each file gets its plan: written, overwritten
(``--force``), or kept: a migration that a database has applied is never rewritten.
"""

from __future__ import annotations

import importlib.util
import site
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.recorder import MigrationRecorder

from .options import InvalidOption

Action = Literal["write", "overwrite", "keep", "blocked"]


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What a run does with each file, by path relative to the base directory."""

    actions: dict[str, Action]
    notes: dict[str, str]
    """Why a file is kept or blocked, by path."""

    @property
    def blocked(self) -> list[str]:
        """Files that exist and would be overwritten without ``--force``."""
        return [path for path, action in self.actions.items() if action == "blocked"]


def check_module_paths(base: Path, modules: Iterable[tuple[str, bool]]) -> None:
    """InvalidOption when writing a module or package would break imports.

    ``modules`` are ``(dotted path, is_package)`` pairs: the target package, and
    the factory and coordinator modules (whose own file may exist: overwriting it is
    the ``--force`` rule's business)."""
    for dotted, is_package in modules:
        parts = dotted.split(".")
        _check_top_level(base, dotted, parts[0])
        packages = parts if is_package else parts[:-1]
        for depth in range(1, len(packages) + 1):
            relative = "/".join(packages[:depth])
            module = base / f"{relative}.py"
            if module.is_file():
                raise InvalidOption(
                    f"{dotted!r} would turn the module {relative}.py into a package "
                    "(and hide it from every import); choose another package name"
                )


def _check_top_level(base: Path, dotted: str, name: str) -> None:
    """InvalidOption when ``name`` is a module of Python or of an installed
    distribution that ``base/name`` would shadow (``base`` leads ``sys.path`` when
    the site runs, from ``manage.py``'s directory)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return
    places = [str(p) for p in spec.submodule_search_locations or []]
    places = places or [spec.origin or ""]
    if not all(_installed(place) for place in places):
        return  # the site's own code (or another project's), not Python's
    raise InvalidOption(
        f"{dotted!r} would shadow the installed module {name!r} "
        f"({spec.origin or places[0]}); choose another package name"
    )


def _installed(place: str) -> bool:
    """Whether a module at ``place`` is built in, or in the standard library or a
    site-packages directory."""
    path = Path(place)
    if not path.is_absolute():
        return True  # "built-in", "frozen"
    roots = {sysconfig.get_path(key) for key in ("stdlib", "platstdlib")}
    roots |= {sysconfig.get_path(key) for key in ("purelib", "platlib")}
    roots |= set(site.getsitepackages()) | {site.getusersitepackages()}
    resolved = path.resolve()
    return any(resolved.is_relative_to(Path(root).resolve()) for root in roots if root)


def plan(
    base: Path,
    files: Iterable[str],
    *,
    force: bool,
    migration: tuple[str, str] | None,
    migration_file: str | None,
) -> Plan:
    """The action for each file, or InvalidOption for a path that cannot be a file.

    ``migration`` (``(app_label, name)``) and ``migration_file`` name the generated
    migration: when its file exists and a database has applied it, it is kept even
    with ``force``."""
    actions: dict[str, Action] = {}
    notes: dict[str, str] = {}
    for relative in files:
        path = base / relative
        for parent in path.parents:
            if parent == base:
                break
            if parent.exists() and not parent.is_dir():
                raise InvalidOption(
                    f"{parent.relative_to(base)} is a file, not a package "
                    "directory; nothing was written"
                )
        if path.is_dir() or (path.exists() and not path.is_file()):
            raise InvalidOption(f"{relative} exists and is not a file")
        if not path.exists():
            actions[relative] = "write"
        elif relative == migration_file and migration is not None:
            applied = applied_in(migration)
            if applied:
                actions[relative] = "keep"
                notes[relative] = applied
            else:
                actions[relative] = "overwrite" if force else "blocked"
        else:
            actions[relative] = "overwrite" if force else "blocked"
    return Plan(actions=actions, notes=notes)


def check_table_free(table: str, migration: tuple[str, str], *, option: str) -> None:
    """InvalidOption when ``table`` exists in a database where ``migration``, which
    creates it, is not applied: another app's table, on which ``migrate`` would
    fail. A database that cannot answer is left to ``migrate``."""
    for alias in connections:
        connection = connections[alias]
        if not _exists(connection):
            continue
        try:
            if table not in connection.introspection.table_names():
                continue
            if migration in MigrationRecorder(connection).applied_migrations():
                continue
        except DatabaseError:
            continue
        raise InvalidOption(
            f"{option}: the table {table!r} already exists in the {alias!r} "
            f"database, where {'.'.join(migration)}, which creates it, is not "
            "applied (migrate would fail there); choose another prefix"
        )


def applied_in(migration: tuple[str, str]) -> str:
    """Why ``migration`` must be kept ("" when no database has applied it): it is
    applied in a database, or a database could not be asked (then it is kept too:
    rewriting an applied migration breaks that database's history)."""
    for alias in connections:
        if not _exists(connections[alias]):
            continue
        recorder = MigrationRecorder(connections[alias])
        try:
            if recorder.has_table() and migration in recorder.applied_migrations():
                return f"applied in the {alias!r} database"
        except DatabaseError as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "error"
            return (
                f"the {alias!r} database could not say whether it is applied ({reason})"
            )
    return ""


def _exists(connection: BaseDatabaseWrapper) -> bool:
    """Whether the database exists, asked without creating it: connecting to a
    SQLite file that is not there would create it (a dry run writes nothing)."""
    if connection.vendor != "sqlite":
        return True
    name = str(connection.settings_dict["NAME"] or "")
    if name == ":memory:" or name.startswith("file:"):
        return True
    return Path(name).exists()
