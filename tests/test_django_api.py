"""The app uses Django's public API only, so a Django minor release cannot break it.

A source scan: no import of Django modules that are internals (the query compiler,
the tuple lookups, a database backend's own classes), no compiling of querysets, and
no attribute with a leading underscore on anything but the object itself, except the
ones Django documents (``Model._meta``, ``Model._state``, the default and base
managers).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "sagents_django"
INTERNAL_MODULES = (
    "django.db.models.sql",
    "django.db.models.fields.tuple_lookups",
    "django.db.backends.postgresql",
    "django.db.backends.sqlite3",
    "django.db.backends.utils",
    "django.contrib.admin.utils",
)
INTERNAL_CALLS = re.compile(
    r"\.(get_compiler|get_converters|apply_converters)\(|\.query\."
)
"""The query compiler, reached through ``QuerySet.query``."""
DOCUMENTED_PRIVATE = {"_meta", "_state", "_default_manager", "_base_manager"}
PRIVATE_ATTRIBUTE = re.compile(r"\b(?!self\b|cls\b)([A-Za-z_]\w*)\.(_[a-z]\w*)")


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_scan_reads_the_whole_package() -> None:
    names = {path.relative_to(PACKAGE).as_posix() for path in sources()}
    assert {"services/sql.py", "services/display.py", "scope.py"} <= names


def test_no_module_imports_a_django_internal() -> None:
    found = []
    for path in sources():
        text = path.read_text(encoding="utf-8")
        for module in INTERNAL_MODULES:
            if re.search(rf"(from|import)\s+{re.escape(module)}\b", text):
                found.append(f"{path.relative_to(REPO)}: {module}")
    assert found == []


def test_no_module_compiles_a_queryset_itself() -> None:
    found = [
        f"{path.relative_to(REPO)}: {match.group(0)}"
        for path in sources()
        for match in INTERNAL_CALLS.finditer(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_no_module_reads_an_undocumented_private_attribute() -> None:
    found = []
    # The core imports no Django (tests/test_project.py proves it): what it reads
    # with an underscore is its own.
    for path in sources():
        if path.relative_to(PACKAGE).parts[0] == "core":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            for owner, name in PRIVATE_ATTRIBUTE.findall(line.split("#")[0]):
                if name not in DOCUMENTED_PRIVATE:
                    found.append(
                        f"{path.relative_to(REPO)}:{number + 1}: {owner}.{name}"
                    )
    assert found == []


def test_the_scan_would_see_what_the_services_used_to_do() -> None:
    line = "    with connection._prepare_cursor(cursor) as c:"
    assert PRIVATE_ATTRIBUTE.findall(line) == [("connection", "_prepare_cursor")]
    assert PRIVATE_ATTRIBUTE.findall("row._state.db = using") == [("row", "_state")]
    assert PRIVATE_ATTRIBUTE.findall("self._filesystem = x") == []
    assert INTERNAL_CALLS.search("queryset.query.where")
    assert INTERNAL_CALLS.search("query.get_compiler(connection=connection)")
